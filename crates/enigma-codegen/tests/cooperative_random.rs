//! Random kernels with a cooperative-tensor phase (`enigma_ir::testgen`,
//! `GenConfig::cooperative`, on by default): their MSL, on SIMD-group
//! matrix fragments (the version each kernel needs) and with
//! MetalPerformancePrimitives (MSL 4.0), passes the strict clang check
//! (`tests/msl_strict/`, see `strict`), a left operand dequantized from
//! 4-bit weights included (with MetalPerformancePrimitives the operation's
//! left input tensor, filled slot by slot), and the CUDA generator writes
//! them for every architecture (the differential test runs them on a GPU).

mod strict;

use enigma_codegen::{cuda, msl};
use enigma_ir::testgen::{case_with, GenConfig};
use enigma_ir::{validate, Feature, Kernel, StmtKind};

/// The cooperative tensor a kernel dequantizes into, if any.
fn dequantized(kernel: &Kernel) -> Option<String> {
    kernel.body.iter().find_map(|s| match s.kind {
        StmtKind::CooperativeDequantize { tensor, .. } => Some(kernel.cooperative(tensor).name.clone()),
        _ => None,
    })
}

#[test]
fn random_cooperative_kernels_pass_the_strict_check_both_ways() {
    if let Some(why) = strict::unavailable() {
        println!("skipped: {why}");
        return;
    }
    let config = GenConfig::default();
    let dir = strict::scratch_dir("cooperative-random");
    let (mut cooperative, mut dequantizing, mut failures) = (0, 0, vec![]);
    for seed in 0..48u64 {
        let kernel = case_with(&config, seed).kernel;
        let info = validate(&kernel, &Default::default()).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        if !info.features.contains(&Feature::CooperativeTensors) {
            continue;
        }
        cooperative += 1;
        let weights = dequantized(&kernel);
        dequantizing += usize::from(weights.is_some());
        for asked in [None, Some(msl::MPP_VERSION)] {
            let options = msl::Options::for_kernel(&info, asked);
            let text = msl::write_string(&kernel, &info, &options).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
            if let (Some(weights), Some(_)) = (&weights, asked) {
                let needle = format!("auto {weights} = ");
                if !text.contains(&needle) || !text.contains(".get_left_input_cooperative_tensor<") {
                    failures.push(format!("== seed {seed}: MSL 4.0 does not declare `{weights}` as a left input tensor"));
                }
            }
            let name = format!("seed{seed}_{}{}", options.language_version.0, options.language_version.1);
            if let Some(e) = strict::errors(&dir, &name, &text, options.language_version) {
                failures.push(format!("== seed {seed}, MSL {:?}\n{e}", options.language_version));
            }
        }
    }
    std::fs::remove_dir_all(&dir).ok();
    assert!(cooperative >= 8, "only {cooperative} of 48 random kernels have a cooperative phase");
    assert!(dequantizing >= 2, "only {dequantizing} of 48 random kernels dequantize a left operand");
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn random_cooperative_kernels_are_written_for_cuda_with_and_without_wgmma() {
    let (mut cooperative, mut dequantizing, mut failures) = (0, 0, vec![]);
    for seed in 0..64u64 {
        let kernel = case_with(&GenConfig::default(), seed).kernel;
        let info = validate(&kernel, &Default::default()).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        if !info.features.contains(&Feature::CooperativeTensors) {
            continue;
        }
        cooperative += 1;
        let weights = dequantized(&kernel);
        dequantizing += usize::from(weights.is_some());
        for wgmma in [false, true] {
            match cuda::write_string(&kernel, &info, &cuda::Options { wgmma, ..cuda::Options::default() }) {
                Ok(source) if !source.source.contains("coop_out") => failures.push(format!("seed {seed}, wgmma {wgmma}: no coop_out in the source")),
                Ok(source) if weights.is_some() && !source.source.contains("enigma_q4_pair") => {
                    failures.push(format!("seed {seed}, wgmma {wgmma}: the dequantization decodes no weight (no enigma_q4_pair)"))
                }
                Ok(_) => {}
                Err(e) => failures.push(format!("seed {seed}, wgmma {wgmma}: {e}")),
            }
        }
    }
    assert!(cooperative >= 8, "only {cooperative} of 64 default random kernels have a cooperative phase");
    assert!(dequantizing >= 2, "only {dequantizing} of 64 default random kernels dequantize a left operand");
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}
