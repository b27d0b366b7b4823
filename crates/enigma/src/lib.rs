//! enigma: write GPU compute kernels in the Metal execution model once;
//! simulate, check and run them everywhere.
//!
//! This facade re-exports the public API: the IR and its builder DSL
//! ([`ir`]), code generation ([`codegen`]: MSL and CUDA C++ from a validated
//! kernel), the runtime ([`Runtime`], [`Device`], [`Buffer`], [`Pipeline`]),
//! the kernels ([`kernels`]), the kernel library's operations ([`ops`]) and
//! the analysis tools ([`analysis`]). The simulator is [`Device::Sim`]
//! (`"sim"`; `"cpu"` and `"simulator"` parse to it too).
//!
//! ```
//! use enigma::{Device, Runtime};
//! let rt = Runtime::new(Device::Sim).unwrap();
//! let x = rt.buffer_from(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
//! let s = enigma::ops::sum(&rt, &x, 6).unwrap(); // a buffer holding one f32
//! let bytes = s.read_bytes().unwrap();
//! assert_eq!(f32::from_le_bytes(bytes[..4].try_into().unwrap()), 21.0);
//!
//! // The same kernel library's softmax as Metal Shading Language.
//! let kernel = enigma::kernels::library::softmax::softmax(enigma::kernels::library::DType::F32, 4, 0);
//! let info = enigma::ir::validate(&kernel, &enigma::ir::ValidationOptions::default()).unwrap();
//! let msl = enigma::codegen::msl::write_string(&kernel, &info, &enigma::codegen::msl::Options::default()).unwrap();
//! assert!(msl.contains("kernel void"));
//! ```

pub use enigma_analysis as analysis;
pub use enigma_codegen as codegen;
pub use enigma_ir as ir;
pub use enigma_kernels as kernels;
pub use enigma_ops as ops;
pub use enigma_runtime::{Arg, Buffer, Device, DeviceInfo, Pipeline, Runtime, RuntimeError, SpecValues, Texture, TextureFormat};
#[cfg(doctest)] pub mod doc_tests;
