//! Metal's shader logs (macOS 15+): the lines a kernel prints through MSL
//! 3.2's `os_log`, collected for a dispatch. A kernel that prints is compiled
//! with `MTLCompileOptions.enableLogging`; its command buffer is made from an
//! `MTLCommandBufferDescriptor` whose `logState` is an `MTLLogState`
//! (`newLogStateWithDescriptor:error:`, sized by the print bound) to which a
//! log handler was added; the handler appends each message to a process-wide
//! buffer, which the dispatch takes once its command buffer has completed.
//! Type-checked, not run on a Mac.
//!
//! The handler is an Objective-C block. objc2-metal's `addLogHandler:` takes
//! a `block2` block, which enigma does without: [`HandlerBlock`] is a global
//! block literal written out by the block ABI (an `isa` of
//! `_NSConcreteGlobalBlock`, the `BLOCK_IS_GLOBAL` flag, the invoke function,
//! a descriptor), made once per process and never freed, so the runtime's
//! copies of it are the block itself. A global block captures nothing, so
//! the messages go to one process-wide buffer, and dispatches of kernels that
//! print run one at a time ([`Collection`] holds the lock that says so).

use crate::mapping;
use objc2::encode::{Encoding, RefEncode};
use objc2::rc::Retained;
use objc2::runtime::ProtocolObject;
use objc2::msg_send;
use objc2_foundation::NSString;
use objc2_metal::{MTLDevice, MTLLogLevel, MTLLogState, MTLLogStateDescriptor};
use std::ffi::{c_int, c_ulong, c_void};
use std::ptr::NonNull;
use std::sync::{Mutex, MutexGuard, OnceLock};

/// The block ABI's flag of a block that lives for the whole program: the
/// runtime neither copies nor frees it.
const BLOCK_IS_GLOBAL: c_int = 1 << 28;

extern "C" {
    /// The class of global blocks, from the system's block runtime.
    static _NSConcreteGlobalBlock: c_void;
}

/// The block ABI's descriptor of a block without copy or dispose helpers.
#[repr(C)]
struct BlockDescriptor {
    reserved: c_ulong,
    size: c_ulong,
}

/// `void (^)(NSString *subSystem, NSString *category, MTLLogLevel level,
/// NSString *message)`, laid out as the block ABI's literal.
#[repr(C)]
struct HandlerBlock {
    isa: *const c_void,
    flags: c_int,
    reserved: c_int,
    invoke: unsafe extern "C" fn(*const HandlerBlock, *mut NSString, *mut NSString, MTLLogLevel, NonNull<NSString>),
    descriptor: *const BlockDescriptor,
}

// SAFETY: the block is immutable after it is made, and its invoke function
// only touches the mutex-guarded `MESSAGES`; Metal calls it from its own
// threads.
unsafe impl Send for HandlerBlock {}
// SAFETY: as for `Send`.
unsafe impl Sync for HandlerBlock {}

// SAFETY: a reference to the struct is a pointer to a block literal of the
// ABI's layout, which Objective-C encodes as a block (`@?`).
unsafe impl RefEncode for HandlerBlock {
    const ENCODING_REF: Encoding = Encoding::Block;
}

/// The messages the handler has received and no dispatch has taken yet.
static MESSAGES: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Held by the dispatch of a kernel that prints, from before its command
/// buffer is made until it has taken its messages.
static PRINTING: Mutex<()> = Mutex::new(());

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // The guarded data stays consistent whatever panicked while holding it.
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// The handler's body: appends the message.
///
/// # Safety
/// Metal calls it with `message` a valid `NSString`.
unsafe extern "C" fn receive(_block: *const HandlerBlock, _subsystem: *mut NSString, _category: *mut NSString, _level: MTLLogLevel, message: NonNull<NSString>) {
    // SAFETY: Metal passes a valid NSString for the message (non-null in
    // the method's declaration) for the duration of the call.
    let text = unsafe { message.as_ref() }.to_string();
    lock(&MESSAGES).push(text);
}

/// The process's handler block, made on first use.
fn handler() -> &'static HandlerBlock {
    static DESCRIPTOR: BlockDescriptor = BlockDescriptor { reserved: 0, size: std::mem::size_of::<HandlerBlock>() as c_ulong };
    static BLOCK: OnceLock<HandlerBlock> = OnceLock::new();
    BLOCK.get_or_init(|| HandlerBlock {
        // Only the address of the runtime's class object is taken.
        isa: std::ptr::addr_of!(_NSConcreteGlobalBlock),
        flags: BLOCK_IS_GLOBAL,
        reserved: 0,
        invoke: receive,
        descriptor: &DESCRIPTOR,
    })
}

/// An `MTLLogState` whose messages reach [`Collection::finish`].
pub(crate) struct ShaderLog {
    pub(crate) state: Retained<ProtocolObject<dyn MTLLogState>>,
}

impl ShaderLog {
    /// A log state on `device` with the handler added, its buffer sized for
    /// the lines a dispatch shows ([`mapping::log_buffer_bytes`]). macOS 15
    /// or later (the caller checks).
    pub(crate) fn new(device: &ProtocolObject<dyn MTLDevice>) -> Result<ShaderLog, String> {
        let descriptor = MTLLogStateDescriptor::new();
        descriptor.setLevel(MTLLogLevel::Debug);
        // SAFETY: the size is Metal's minimum (1 KiB) or more, well within
        // NSInteger.
        unsafe { descriptor.setBufferSize(mapping::log_buffer_bytes() as isize) };
        let state = device
            .newLogStateWithDescriptor_error(&descriptor)
            .map_err(|e| format!("Metal could not create a log state for shader logging: {}", e.localizedDescription()))?;
        // SAFETY: `addLogHandler:` takes a block of this signature; the
        // block is global (never freed) and its invoke function is
        // thread-safe, as Metal requires of a handler it calls from its
        // own threads.
        unsafe {
            let _: () = msg_send![&*state, addLogHandler: handler()];
        }
        Ok(ShaderLog { state })
    }
}

/// A dispatch collecting shader logs: it holds the process's printing lock
/// from [`Collection::start`] to [`Collection::finish`].
pub(crate) struct Collection {
    _printing: MutexGuard<'static, ()>,
}

impl Collection {
    /// Takes the printing lock and drops messages an earlier dispatch left.
    pub(crate) fn start() -> Collection {
        let printing = lock(&PRINTING);
        lock(&MESSAGES).clear();
        Collection { _printing: printing }
    }

    /// The messages received since [`Collection::start`] (call once the
    /// command buffer has completed).
    pub(crate) fn finish(self) -> Vec<String> {
        std::mem::take(&mut *lock(&MESSAGES))
    }
}
