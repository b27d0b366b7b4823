//! enigma's CPU simulator: the reference implementation of the execution
//! model (see `enigma_ir`'s semantics).
//!
//! Each SIMD group runs its 32 lanes in lockstep with an active-lane mask;
//! every instruction works on all 32 lanes at once (the interpreter's cost is
//! paid per SIMD group, not per thread). Threadgroups run in parallel on a
//! rayon pool. Threadgroup memory starts filled with [`memory::POISON_WORD`].
//! Out-of-bounds accesses, integer division by zero and barriers not reached
//! by the whole threadgroup are errors naming the kernel, the thread and the
//! IR location — never a panic, never a hang.

mod dispatch;
mod exec;
pub mod memory;
mod ops;
mod program;

use enigma_backend::{
    ArgValue, Backend, BufferStorage, CompiledKernel, DeviceInfo, DeviceKind, DispatchGeometry, DispatchOptions,
    DispatchReport, RuntimeError, SpecValues,
};
use enigma_ir::{Kernel, KernelInfo};
use memory::SimBuffer;
use std::any::Any;
use std::time::Instant;

/// The largest threadgroup the simulator runs (Metal's limit).
pub const MAX_THREADS_PER_THREADGROUP: u32 = 1024;
/// Threadgroup memory per threadgroup (Apple GPUs' 32 KiB).
pub const MAX_THREADGROUP_MEMORY_BYTES: u64 = 32 * 1024;

/// The simulator as a [`Backend`].
#[derive(Debug)]
pub struct SimBackend {
    info: DeviceInfo,
}

impl Default for SimBackend {
    fn default() -> Self {
        SimBackend::new()
    }
}

impl SimBackend {
    pub fn new() -> SimBackend {
        let threads = rayon::current_num_threads() as u32;
        SimBackend {
            info: DeviceInfo {
                kind: DeviceKind::Simulator,
                name: format!("enigma simulator (CPU, {threads} threads)"),
                max_threads_per_threadgroup: MAX_THREADS_PER_THREADGROUP,
                max_threadgroup_memory_bytes: MAX_THREADGROUP_MEMORY_BYTES,
                simd_width: 32,
                compute_units: threads,
                memory_bytes: None,
            },
        }
    }
}

/// A kernel lowered for the simulator.
#[derive(Debug)]
pub struct SimKernel {
    kernel: Kernel,
    info: KernelInfo,
    program: program::Program,
}

impl CompiledKernel for SimKernel {
    fn kernel(&self) -> &Kernel {
        &self.kernel
    }
    fn max_total_threads_per_threadgroup(&self) -> u32 {
        MAX_THREADS_PER_THREADGROUP
    }
    fn thread_execution_width(&self) -> u32 {
        32
    }
    fn static_threadgroup_memory_length(&self) -> u64 {
        self.info.threadgroup_memory_bytes
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl Backend for SimBackend {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn allocate(&self, bytes: usize) -> Result<Box<dyn BufferStorage>, RuntimeError> {
        Ok(Box::new(SimBuffer::new(bytes)))
    }

    fn compile(&self, kernel: &Kernel, info: &KernelInfo, spec: &SpecValues) -> Result<Box<dyn CompiledKernel>, RuntimeError> {
        let program = program::lower(kernel, &spec.resolve(kernel));
        Ok(Box::new(SimKernel { kernel: kernel.clone(), info: info.clone(), program }))
    }

    fn dispatch(
        &self,
        compiled: &dyn CompiledKernel,
        args: &[ArgValue<'_>],
        geometry: &DispatchGeometry,
        _options: &DispatchOptions,
    ) -> Result<DispatchReport, RuntimeError> {
        let start = Instant::now();
        let sim = compiled.as_any().downcast_ref::<SimKernel>().ok_or_else(|| RuntimeError::Backend {
            backend: "simulator",
            message: format!("kernel `{}` was compiled for another device", compiled.kernel().name),
        })?;
        let mut buffers = Vec::with_capacity(args.len());
        let mut values = Vec::with_capacity(args.len());
        for arg in args {
            match arg {
                ArgValue::Buffer { storage, .. } => {
                    let buf = storage.as_any().downcast_ref::<SimBuffer>().ok_or_else(|| RuntimeError::Backend {
                        backend: "simulator",
                        message: "a buffer of another device was passed to the simulator".into(),
                    })?;
                    buffers.push(Some((&buf.words, buf.len_bytes)));
                    values.push([0; 4]);
                }
                ArgValue::Value { ty, bytes } => {
                    let size = ty.scalar.size_bytes() as usize;
                    let mut comps = [0u64; 4];
                    for (c, comp) in comps.iter_mut().enumerate().take(ty.width as usize) {
                        let mut raw = [0u8; 8];
                        raw[..size].copy_from_slice(&bytes[c * size..(c + 1) * size]);
                        *comp = ops::norm(ty.scalar, u64::from_le_bytes(raw));
                    }
                    buffers.push(None);
                    values.push(comps);
                }
            }
        }
        let env = exec::Env {
            program: &sim.program,
            buffers,
            values,
            threads_per_grid: geometry.grid,
            threadgroups_per_grid: geometry.threadgroups,
            threadgroup_size: geometry.threads_per_threadgroup,
        };
        dispatch::run_dispatch(&sim.kernel, &env, geometry)?;
        Ok(DispatchReport { device_time: None, wall_time: start.elapsed(), notes: geometry.warnings.clone() })
    }
}
