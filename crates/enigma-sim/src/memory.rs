//! Simulated memory: device buffers and threadgroup memory as words of
//! relaxed atomics, so threads of different threadgroups running on different
//! OS threads may touch the same buffer without undefined behaviour in Rust
//! (a race in the kernel stays a race of values, which the sanitizer reports,
//! never memory corruption). On x86-64 and AArch64 relaxed word loads and
//! stores compile to plain moves.

use enigma_backend::{BufferStorage, RuntimeError};
use enigma_ir::Scalar;
use std::any::Any;
use std::sync::atomic::{AtomicU32, Ordering::Relaxed};

/// The bit pattern threadgroup memory starts with: `0x7FBADBAD`, a NaN as
/// f32 and an implausible integer, so reads of unwritten memory stand out.
pub const POISON_WORD: u32 = 0x7FBA_DBAD;

/// Words of memory, addressed by byte offset.
#[derive(Debug)]
pub struct Words(pub Box<[AtomicU32]>);

impl Words {
    pub fn new(len_bytes: usize, fill: u32) -> Words {
        Words((0..len_bytes.div_ceil(4)).map(|_| AtomicU32::new(fill)).collect())
    }

    /// Like [`Words::new`] for sizes a user chose: an allocation that fails
    /// is an error naming `what` and the size, not an abort.
    pub fn try_new(len_bytes: usize, fill: u32, what: &str) -> Result<Words, RuntimeError> {
        Ok(Words(try_filled(len_bytes.div_ceil(4), || AtomicU32::new(fill), len_bytes as u128, what)?.into_boxed_slice()))
    }

    /// Reads a scalar of `ty` at a byte offset aligned to its size.
    #[inline(always)]
    pub fn read(&self, offset: usize, ty: Scalar) -> u64 {
        let w = offset / 4;
        match ty.size_bytes() {
            4 => self.0[w].load(Relaxed) as u64,
            8 => self.0[w].load(Relaxed) as u64 | (self.0[w + 1].load(Relaxed) as u64) << 32,
            2 => (self.0[w].load(Relaxed) >> ((offset % 4) * 8)) as u16 as u64,
            _ => (self.0[w].load(Relaxed) >> ((offset % 4) * 8)) as u8 as u64,
        }
    }

    /// Writes a scalar of `ty`; sub-word writes touch only their own bytes.
    #[inline(always)]
    pub fn write(&self, offset: usize, ty: Scalar, v: u64) {
        let w = offset / 4;
        match ty.size_bytes() {
            4 => self.0[w].store(v as u32, Relaxed),
            8 => {
                self.0[w].store(v as u32, Relaxed);
                self.0[w + 1].store((v >> 32) as u32, Relaxed);
            }
            n => {
                let shift = (offset % 4) * 8;
                let mask = if n == 2 { 0xffffu32 } else { 0xffu32 } << shift;
                self.0[w].fetch_and(!mask, Relaxed);
                self.0[w].fetch_or(((v as u32) << shift) & mask, Relaxed);
            }
        }
    }

    pub fn word(&self, offset: usize) -> &AtomicU32 {
        &self.0[offset / 4]
    }

    pub fn fill(&self, value: u32) {
        for w in self.0.iter() {
            w.store(value, Relaxed);
        }
    }
}

/// A device buffer of the simulator.
#[derive(Debug)]
pub struct SimBuffer {
    pub words: Words,
    pub len_bytes: usize,
}

impl SimBuffer {
    /// A zeroed buffer; failing to allocate it is [`RuntimeError::Allocation`].
    pub fn try_new(len_bytes: usize) -> Result<SimBuffer, RuntimeError> {
        Ok(SimBuffer { words: Words::try_new(len_bytes, 0, "a simulator buffer")?, len_bytes })
    }
}

impl BufferStorage for SimBuffer {
    fn len_bytes(&self) -> usize {
        self.len_bytes
    }

    /// The words' memory: on a little-endian host the word of byte offset
    /// `4·w` holds bytes `4·w .. 4·w + 4` in order, so it is the buffer's
    /// bytes as kernels see them.
    fn host_address(&self) -> Option<u64> {
        cfg!(target_endian = "little").then(|| self.words.0.as_ptr() as u64)
    }

    fn write(&self, offset: usize, data: &[u8]) -> Result<(), RuntimeError> {
        check_range(offset, data.len(), self.len_bytes)?;
        let head = ((4 - offset % 4) % 4).min(data.len());
        for (i, b) in data[..head].iter().enumerate() {
            self.words.write(offset + i, Scalar::U8, *b as u64);
        }
        let body = &data[head..];
        let first_word = (offset + head) / 4;
        let mut chunks = body.chunks_exact(4);
        for (w, chunk) in (first_word..).zip(&mut chunks) {
            self.words.0[w].store(u32::from_le_bytes(chunk.try_into().expect("chunks of 4")), Relaxed);
        }
        let tail_start = offset + head + body.len() / 4 * 4;
        for (i, b) in chunks.remainder().iter().enumerate() {
            self.words.write(tail_start + i, Scalar::U8, *b as u64);
        }
        Ok(())
    }

    fn read(&self, offset: usize, out: &mut [u8]) -> Result<(), RuntimeError> {
        check_range(offset, out.len(), self.len_bytes)?;
        let head = ((4 - offset % 4) % 4).min(out.len());
        let (head_out, body) = out.split_at_mut(head);
        for (i, b) in head_out.iter_mut().enumerate() {
            *b = self.words.read(offset + i, Scalar::U8) as u8;
        }
        let first_word = (offset + head) / 4;
        let body_words = body.len() / 4;
        let (words_out, tail) = body.split_at_mut(body_words * 4);
        for (w, chunk) in (first_word..).zip(words_out.chunks_exact_mut(4)) {
            chunk.copy_from_slice(&self.words.0[w].load(Relaxed).to_le_bytes());
        }
        let tail_start = offset + head + body_words * 4;
        for (i, b) in tail.iter_mut().enumerate() {
            *b = self.words.read(tail_start + i, Scalar::U8) as u8;
        }
        Ok(())
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// `len` values made by `make`, in a vector whose allocation may fail: the
/// error names `what` and `bytes`, the size as the caller asked for it.
pub fn try_filled<T>(len: usize, make: impl FnMut() -> T, bytes: u128, what: &str) -> Result<Vec<T>, RuntimeError> {
    let mut v = Vec::new();
    v.try_reserve_exact(len).map_err(|_| RuntimeError::allocation(what, bytes))?;
    v.resize_with(len, make);
    Ok(v)
}

fn check_range(offset: usize, len: usize, size: usize) -> Result<(), RuntimeError> {
    if offset.checked_add(len).is_none_or(|end| end > size) {
        return Err(RuntimeError::BufferRange { offset, len, size });
    }
    Ok(())
}
