//! The lines a kernel prints through CUDA's `printf`, collected for a
//! dispatch asked for them (`DispatchOptions::collect_printed`). The driver
//! writes a kernel's `printf` output through the C library's standard output
//! when the context synchronises with the launch; a [`Capture`] points file
//! descriptor 1 at an unlinked temporary file from before the launch until
//! after that synchronisation, then reads the lines back and restores the
//! descriptor. Whatever else the process writes to descriptor 1 in that
//! window lands in the capture too, and captures run one at a time in a
//! process. Written against the CUDA programming guide's account of when the
//! `printf` buffer is flushed; not yet run on a GPU.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::fd::AsRawFd;
use std::sync::{Mutex, MutexGuard};

/// Held by the capture in progress.
static CAPTURING: Mutex<()> = Mutex::new(());

/// Descriptor 1 redirected to a temporary file.
pub(crate) struct Capture {
    file: File,
    /// A duplicate of the original descriptor 1.
    saved: libc::c_int,
    _one_at_a_time: MutexGuard<'static, ()>,
}

/// Flushes Rust's and the C library's buffered standard output.
fn flush_stdout() {
    let _ = std::io::stdout().flush();
    // SAFETY: fflush(NULL) flushes every open C stream; it takes no pointer
    // the caller owns.
    unsafe { libc::fflush(std::ptr::null_mut()) };
}

impl Capture {
    /// Starts capturing descriptor 1.
    pub(crate) fn start() -> std::io::Result<Capture> {
        let one_at_a_time = CAPTURING.lock().unwrap_or_else(|e| e.into_inner());
        let path = std::env::temp_dir().join(format!("enigma-cuda-printf-{}-{:?}", std::process::id(), std::thread::current().id()));
        let file = File::options().read(true).write(true).create(true).truncate(true).open(&path)?;
        // The file lives on through its descriptor.
        std::fs::remove_file(&path)?;
        flush_stdout();
        // SAFETY: dup of descriptor 1, which the process has open.
        let saved = unsafe { libc::dup(1) };
        if saved < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: both descriptors are open; dup2 makes 1 refer to the file.
        if unsafe { libc::dup2(file.as_raw_fd(), 1) } < 0 {
            let err = std::io::Error::last_os_error();
            // SAFETY: `saved` is the duplicate made above.
            unsafe { libc::close(saved) };
            return Err(err);
        }
        Ok(Capture { file, saved, _one_at_a_time: one_at_a_time })
    }

    /// Restores descriptor 1 and returns the lines written meanwhile.
    pub(crate) fn finish(mut self) -> std::io::Result<Vec<String>> {
        self.restore();
        let mut text = String::new();
        self.file.seek(SeekFrom::Start(0))?;
        self.file.read_to_string(&mut text)?;
        Ok(text.lines().map(str::to_string).collect())
    }

    fn restore(&mut self) {
        if self.saved < 0 {
            return;
        }
        flush_stdout();
        // SAFETY: `saved` is the duplicate of the original descriptor 1.
        unsafe {
            libc::dup2(self.saved, 1);
            libc::close(self.saved);
        }
        self.saved = -1;
    }
}

impl Drop for Capture {
    /// A capture dropped unfinished (an error on the way) restores
    /// descriptor 1 all the same.
    fn drop(&mut self) {
        self.restore();
    }
}
