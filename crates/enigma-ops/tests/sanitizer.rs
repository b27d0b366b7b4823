//! Every registry entry runs clean under the simulator's sanitizer: no
//! races, uninitialised threadgroup reads, inactive-lane shuffles,
//! divergent barriers, out-of-bounds accesses, order dependence, nor
//! unwritten output elements. Errors would fail the run; warnings are in
//! the launch log and must be absent too.

use enigma_ops::{registry, GemmOptions, GemmTile, Options, RowOptions};
use enigma_runtime::{Device, Runtime};

#[test]
fn every_entry_runs_clean_under_the_sanitizer() {
    let rt = Runtime::new(Device::Sim).unwrap();
    let mut runs = 0;
    for entry in registry() {
        // Partial vectors, several threadgroups and (for scans and vector
        // reductions with 32 threads) several levels or passes.
        let shape = match entry.shape_names.len() {
            1 => vec![1001],
            2 => vec![3, 100],
            // Fragment order needs N a multiple of 16.
            _ if entry.name.starts_with("qmatmul_fragments_") => vec![2, 48, 128],
            // Depthwise convolution: batch x channels x h x w.
            4 => vec![2, 3, 5, 16],
            // Batched attention decode: batch x q_heads x kv_heads x s_len x d.
            5 => vec![2, 4, 2, 40, 128],
            // batch x heads x kv_heads x s_q x s_kv x d.
            _ if entry.name.starts_with("attention_prefill_") => vec![1, 2, 1, 40, 33, 64],
            _ => vec![2, 40, 128],
        };
        // Scalar and vector kernels, 32-thread threadgroups, and the
        // streaming form of the row kernels (ignored by the others).
        let combinations = [(Some(false), None, None), (None, None, None), (None, Some(32), None), (None, None, Some(false))];
        for (vectorize, threads, cache_rows) in combinations {
            // The fused quantized kernel's threads are its tile's: one SIMD
            // group is a 32×32 tile over 1×1 (on fragment-ordered weights
            // 16×16, 64 deep).
            let (threads, gemm_tile) = match threads {
                Some(_) if entry.name.starts_with("qmatmul_fused_") => (None, Some(GemmTile::new(32, 32, 32, 1, 1))),
                Some(_) if entry.name.starts_with("qmatmul_fragments_") => (None, Some(GemmTile::new(16, 16, 64, 1, 1))),
                _ => (threads, None),
            };
            let options = Options { sanitize: true, vectorize, threads, rows: RowOptions { cache: cache_rows }, gemm: GemmOptions { tile: gemm_tile, ..GemmOptions::default() }, ..Options::default() };
            let outcome = entry.run_with(&rt, &shape, &options).unwrap_or_else(|e| panic!("{} {shape:?} {options:?}: {e}", entry.name));
            assert!(outcome.passed, "{outcome}");
            assert!(!outcome.launches.is_empty(), "{outcome}");
            for launch in &outcome.launches {
                assert!(launch.findings.is_empty(), "{} ({}): {}", entry.name, launch.kernel, launch.findings.join("\n"));
            }
            runs += 1;
        }
    }
    assert_eq!(runs, 4 * registry().len());
}

#[test]
fn the_sanitizer_flags_a_library_kernel_dispatched_short() {
    // The check above means something only if the sanitizer looks at
    // these kernels: `relu_f32_vec4` over 1001 elements needs 251 float4
    // threads; one threadgroup of 128 leaves vectors 128..251 unwritten.
    use enigma_kernels::library::{elementwise, DType};
    use enigma_runtime::{Arg, DispatchMode};
    let rt = Runtime::new(Device::Sim).unwrap();
    let kernel = elementwise::elementwise(elementwise::Elementwise::Relu, DType::F32, 4);
    let pipeline = rt.pipeline(&kernel).unwrap();
    let x = enigma_ops::upload(&rt, enigma_ir::Scalar::F32, &[1.0; 1001]).unwrap();
    let y = rt.buffer_bytes(1004 * 4).unwrap();
    let options = enigma_runtime::Options { sanitize: true, ..Default::default() };
    let args = [Arg::from(&x), Arg::from(&y), Arg::u32(1001)];
    let report = rt.dispatch(&pipeline, &args, DispatchMode::Threadgroups, [1, 1, 1], [128, 1, 1], &options).unwrap();
    let text: Vec<String> = report.findings.iter().map(|f| f.to_string()).collect();
    assert_eq!(report.findings.len(), 1, "{text:?}");
    assert!(text[0].contains("coverage") && text[0].contains("123 of 251"), "{}", text[0]);
    // The full dispatch of the plan is clean.
    let plan = elementwise::plan(elementwise::Elementwise::Relu, DType::F32, 1001, 4, 128).unwrap();
    let report = rt.dispatch(&pipeline, &args, DispatchMode::Threadgroups, plan.dispatch.size, plan.dispatch.threads, &options).unwrap();
    assert!(report.findings.is_empty(), "{:?}", report.findings);
}
