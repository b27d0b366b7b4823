//! enigma: write GPU compute kernels in the Metal execution model once;
//! simulate, check and run them everywhere.
//!
//! This facade re-exports the public API: the IR and its builder DSL
//! ([`ir`]), the runtime ([`Runtime`], [`Device`], [`Buffer`], [`Pipeline`]),
//! the kernels ([`kernels`]) and the analysis tools ([`analysis`]).

pub use enigma_analysis as analysis;
pub use enigma_ir as ir;
pub use enigma_kernels as kernels;
pub use enigma_runtime::{Arg, Buffer, Device, DeviceInfo, Pipeline, Runtime, RuntimeError, SpecValues};
