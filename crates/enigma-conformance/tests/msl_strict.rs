//! The strict MSL check (`enigma-codegen/tests/strict`: clang in C++ for
//! OpenCL mode against a shim with Metal's address spaces, type rules and
//! version gates) over the MSL of every kernel the conformance cases compile
//! and of every kernel `enigma emit` knows (the seeds' and the library's),
//! each written for the version it needs (`msl::Options::for_kernel`).
//! The cases' kernels are recorded by running the portable cases on the
//! simulator behind a backend that keeps what it compiles. Without a clang++
//! that reads C++ for OpenCL the tests skip, saying why
//! (`enigma_conformance::skip`, counted by `scripts/test.sh`).

#[path = "../../enigma-codegen/tests/strict/mod.rs"]
mod strict;

use enigma_backend::{ArgValue, Backend, BufferStorage, CompiledKernel, DeviceInfo, DispatchGeometry, DispatchOptions, DispatchReport, RuntimeError, SpecValues};
use enigma_codegen::msl;
use enigma_ir::{validate, Kernel, KernelInfo, ValidationOptions};
use enigma_runtime::Runtime;
use enigma_sim::SimBackend;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// The simulator, keeping every kernel it compiles.
#[derive(Debug, Default)]
struct Recording {
    sim: SimBackend,
    compiled: Mutex<Vec<(Kernel, KernelInfo)>>,
}

impl Backend for Recording {
    fn info(&self) -> &DeviceInfo {
        self.sim.info()
    }
    fn allocate(&self, bytes: usize) -> Result<Box<dyn BufferStorage>, RuntimeError> {
        self.sim.allocate(bytes)
    }
    fn compile(&self, kernel: &Kernel, info: &KernelInfo, spec: &SpecValues) -> Result<Box<dyn CompiledKernel>, RuntimeError> {
        self.compiled.lock().unwrap_or_else(|e| e.into_inner()).push((kernel.clone(), info.clone()));
        self.sim.compile(kernel, info, spec)
    }
    fn dispatch(
        &self,
        kernel: &dyn CompiledKernel,
        args: &[ArgValue<'_>],
        geometry: &DispatchGeometry,
        options: &DispatchOptions,
    ) -> Result<DispatchReport, RuntimeError> {
        self.sim.dispatch(kernel, args, geometry, options)
    }
}

/// One distinct MSL source: the first kernel that produced it, and its version.
struct Source {
    text: String,
    kernel: String,
    version: (u8, u8),
}

/// Writes each kernel's MSL for the version it needs and compiles it
/// strictly, once per distinct source, on every core: how many sources, and
/// the failures.
fn strict_failures(tag: &str, kernels: &[(Kernel, KernelInfo)]) -> (usize, Vec<String>) {
    let dir = strict::scratch_dir(tag);
    let mut seen = BTreeMap::new();
    let mut failures = vec![];
    for (kernel, info) in kernels {
        // Cooperative tensors both ways: on SIMD-group matrices (the version
        // the kernel needs) and with MetalPerformancePrimitives (MSL 4.0).
        let mut versions = vec![None];
        if info.features.contains(&enigma_ir::Feature::CooperativeTensors) {
            versions.push(Some(msl::MPP_VERSION));
        }
        for version in versions {
            let options = msl::Options::for_kernel(info, version);
            match msl::write_string(kernel, info, &options) {
                Ok(text) => {
                    seen.entry(text).or_insert((kernel.name.clone(), options.language_version));
                }
                Err(e) => failures.push(format!("== {}\n{e}", kernel.name)),
            }
        }
    }
    let sources: Vec<Source> = seen.into_iter().map(|(text, (kernel, version))| Source { text, kernel, version }).collect();
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get());
    let chunk = sources.len().div_ceil(workers).max(1);
    std::thread::scope(|scope| {
        let handles: Vec<_> = sources
            .chunks(chunk)
            .enumerate()
            .map(|(c, part)| {
                let dir = &dir;
                scope.spawn(move || {
                    part.iter()
                        .enumerate()
                        .filter_map(|(i, s)| {
                            strict::errors(dir, &format!("{}_{}", c * chunk + i, s.kernel), &s.text, s.version)
                                .map(|e| format!("== {} (MSL {}.{})\n{e}", s.kernel, s.version.0, s.version.1))
                        })
                        .collect::<Vec<String>>()
                })
            })
            .collect();
        for h in handles {
            failures.extend(h.join().unwrap_or_else(|_| vec!["a clang worker panicked".into()]));
        }
    });
    std::fs::remove_dir_all(&dir).ok();
    (sources.len(), failures)
}

#[test]
fn the_msl_of_every_conformance_case_passes_the_strict_check() {
    if let Some(why) = strict::unavailable() {
        enigma_conformance::skip("enigma-conformance", &why);
        return;
    }
    let backend = Arc::new(Recording::default());
    let rt = Runtime::with_backend(backend.clone());
    for case in enigma_conformance::cases() {
        // Whether the case passes is the conformance tests' business; this
        // one wants what it compiles.
        let _ = case.run_catching(&rt);
    }
    let kernels = std::mem::take(&mut *backend.compiled.lock().unwrap_or_else(|e| e.into_inner()));
    assert!(kernels.len() >= 100, "only {} kernels compiled by the cases", kernels.len());
    let (sources, failures) = strict_failures("cases", &kernels);
    assert!(failures.is_empty(), "{} of {sources} sources fail:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn the_msl_of_every_library_kernel_passes_the_strict_check() {
    if let Some(why) = strict::unavailable() {
        enigma_conformance::skip("enigma-conformance", &why);
        return;
    }
    let mut all = enigma_kernels::seed_kernels();
    all.push(enigma_kernels::two_pass_sum::reduce_final_seed());
    all.extend(enigma_kernels::library::variants::all_kernels());
    let kernels: Vec<(Kernel, KernelInfo)> = all
        .into_iter()
        .map(|k| {
            let info = validate(&k, &ValidationOptions::default()).unwrap_or_else(|e| panic!("{e}"));
            (k, info)
        })
        .collect();
    assert!(kernels.len() >= 200, "only {} library kernels", kernels.len());
    let (sources, failures) = strict_failures("library", &kernels);
    assert!(failures.is_empty(), "{} of {sources} sources fail:\n{}", failures.len(), failures.join("\n"));
}

/// The attention prefill kernels on cooperative tensors, whose online
/// softmax keeps its row state in m×1 tensors and applies it with
/// `combine` (along rows and between the row tensors), both ways: one and
/// two warpgroups, 64 and 128 keys, f16 and bf16, masked and with the
/// log-sum-exp. Their staged K/V blocks need more threadgroup memory than
/// an Apple GPU's 32 KiB, so they are validated against a larger limit:
/// this checks the MSL's names and types, not that a Mac could run it.
#[test]
fn the_msl_of_the_cooperative_prefill_kernels_passes_the_strict_check() {
    if let Some(why) = strict::unavailable() {
        enigma_conformance::skip("enigma-conformance", &why);
        return;
    }
    use enigma_kernels::library::attention_prefill_cooperative::{prefill_cooperative, CoopPrefillConfig};
    use enigma_kernels::library::DType;
    let configs = [
        CoopPrefillConfig { dtype: DType::F16, d: 64, causal: false, lse: false, block_q: 64, block_kv: 128, tile_copies: false, stages: 2 },
        CoopPrefillConfig { dtype: DType::F16, d: 64, causal: true, lse: true, block_q: 128, block_kv: 64, tile_copies: false, stages: 2 },
        CoopPrefillConfig { dtype: DType::BF16, d: 128, causal: true, lse: false, block_q: 64, block_kv: 64, tile_copies: true, stages: 3 },
    ];
    let kernels: Vec<(Kernel, KernelInfo)> = configs
        .iter()
        .map(|c| {
            let k = prefill_cooperative(c);
            let options = ValidationOptions { max_threadgroup_memory_bytes: c.memory_bytes(), ..ValidationOptions::default() };
            let info = validate(&k, &options).unwrap_or_else(|e| panic!("{e}"));
            (k, info)
        })
        .collect();
    let (sources, failures) = strict_failures("prefill", &kernels);
    assert_eq!(sources, 2 * configs.len(), "one source per kernel and lowering");
    assert!(failures.is_empty(), "{} of {sources} sources fail:\n{}", failures.len(), failures.join("\n"));
}
