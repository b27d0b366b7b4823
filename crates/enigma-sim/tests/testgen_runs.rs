//! The simulator runs every kernel of the IR's random generator
//! (`enigma_ir::testgen`) without an error, with the sanitizer on: the
//! generator promises in-bounds, race-free kernels with no undefined values
//! and no shuffles of inactive lanes, so the sanitizer must find nothing
//! (but unwritten outputs of threads that returned early), and two runs must
//! leave the same outputs.

use enigma_backend::{ArgValue, Backend, DispatchMode, DispatchOptions, FindingKind, SpecValues, TextureDesc, TextureFormat};
use enigma_ir::testgen::{self, arb_case, CaseArg, GenConfig, KernelCase};
use enigma_ir::text::print;
use enigma_ir::{validate, ValidationOptions};
use enigma_sim::SimBackend;
use proptest::prelude::*;

/// Runs `case` on the simulator; returns its outputs' 32-bit words, in
/// output order, or the error (with the kernel's text).
fn run(case: &KernelCase, sanitize: bool) -> Result<Vec<Vec<u32>>, String> {
    let kernel = &case.kernel;
    let show = |e: &dyn std::fmt::Display| format!("{e}\n{}", print(kernel));
    let info = validate(kernel, &ValidationOptions::default()).map_err(|e| show(&e))?;
    let backend = SimBackend::new();
    let compiled = backend.compile(kernel, &info, &SpecValues::default()).map_err(|e| show(&e))?;
    let mut storages = vec![];
    for arg in &case.args {
        // Inputs take their elements' sizes; outputs and texels are 32-bit.
        let bytes: Vec<u8> = match arg {
            CaseArg::Input { elem, data } => testgen::pack(*elem, data),
            CaseArg::Output { len, .. } => vec![0; *len as usize * 4],
            CaseArg::Texture { width, height, data, .. } => {
                data.clone().unwrap_or_else(|| vec![0; (width * height) as usize]).iter().flat_map(|w| w.to_le_bytes()).collect()
            }
            CaseArg::Value(_) => continue,
        };
        let storage = backend.allocate(bytes.len()).map_err(|e| show(&e))?;
        storage.write(0, &bytes).map_err(|e| show(&e))?;
        storages.push(storage);
    }
    let mut next = storages.iter();
    let args: Vec<ArgValue<'_>> = case
        .args
        .iter()
        .map(|arg| match arg {
            CaseArg::Value(lit) => ArgValue::literal(*lit),
            CaseArg::Texture { texel, width, height, .. } => {
                let format = match texel {
                    enigma_ir::Scalar::F32 => TextureFormat::R32Float,
                    enigma_ir::Scalar::I32 => TextureFormat::R32Sint,
                    _ => TextureFormat::R32Uint,
                };
                let desc = TextureDesc { format, width: *width, height: *height };
                ArgValue::Texture { storage: next.next().expect("one storage per texture").as_ref(), desc }
            }
            _ => ArgValue::Buffer { storage: next.next().expect("one storage per buffer").as_ref(), elem: None },
        })
        .collect();
    let geometry =
        enigma_backend::check_dispatch(backend.info(), compiled.as_ref(), &args, DispatchMode::Threads, case.grid, case.threads)
            .map_err(|e| show(&e))?;
    let report = backend
        .dispatch(compiled.as_ref(), &args, &geometry, &DispatchOptions { sanitize, schedules: 0, ..Default::default() })
        .map_err(|e| show(&e))?;
    // Output elements of threads that returned early stay unwritten (a
    // coverage warning, expected); anything else is a generator or simulator bug.
    let findings: Vec<_> = report.findings.iter().filter(|f| f.kind != FindingKind::Coverage).collect();
    if !findings.is_empty() {
        return Err(show(&format!("sanitizer findings: {findings:#?}")));
    }
    let mut outputs = vec![];
    for (arg, storage) in case.args.iter().filter(|a| !matches!(a, CaseArg::Value(_))).zip(&storages) {
        let len = match arg {
            CaseArg::Output { len, .. } => Some(*len),
            CaseArg::Texture { width, height, data: None, .. } => Some(width * height),
            _ => None,
        };
        if let Some(len) = len {
            let mut bytes = vec![0u8; len as usize * 4];
            storage.read(0, &mut bytes).map_err(|e| show(&e))?;
            outputs.push(bytes.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect());
        }
    }
    Ok(outputs)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn generated_kernels_run_clean_under_the_sanitizer(case in arb_case(GenConfig::default())) {
        let sanitized = run(&case, true).map_err(TestCaseError::fail)?;
        let plain = run(&case, false).map_err(TestCaseError::fail)?;
        prop_assert_eq!(case.compare_outputs(&sanitized, &plain), Ok(()));
    }

    #[test]
    fn generated_kernels_with_textures_run_clean_under_the_sanitizer(case in arb_case(GenConfig { textures: true, ..GenConfig::default() })) {
        let sanitized = run(&case, true).map_err(TestCaseError::fail)?;
        let plain = run(&case, false).map_err(TestCaseError::fail)?;
        prop_assert_eq!(case.compare_outputs(&sanitized, &plain), Ok(()));
    }
}

/// The texture phase appears and its output texture is written.
#[test]
fn texture_cases_read_and_write_textures() {
    let config = GenConfig { textures: true, ..GenConfig::default() };
    let with_textures: Vec<KernelCase> =
        (0..32).map(|seed| testgen::case_with(&config, seed)).filter(|c| c.args.iter().any(|a| matches!(a, CaseArg::Texture { .. }))).collect();
    assert!(with_textures.len() >= 8, "{} of 32 cases have textures", with_textures.len());
    let written = with_textures
        .iter()
        .filter(|case| run(case, false).unwrap().last().is_some_and(|texels| texels.iter().any(|&w| w != 0)))
        .count();
    assert!(written * 2 >= with_textures.len(), "{written} of {} cases wrote a non-zero texel", with_textures.len());
}

/// Some texture phases sample an f32 `sample` texture (with constant
/// samplers of both filters), and those kernels run clean under the
/// sanitizer with the same outputs as without it.
#[test]
fn texture_cases_sample_with_constant_samplers() {
    let config = GenConfig { textures: true, ..GenConfig::default() };
    let sampling: Vec<KernelCase> = (0..200)
        .map(|seed| testgen::case_with(&config, seed))
        .filter(|c| c.kernel.body.iter().any(|s| s.kind.exprs().iter().any(|e| e.any(&mut |x| matches!(x, enigma_ir::Expr::TextureSample { .. })))))
        .collect();
    assert!(sampling.len() >= 3, "{} of 200 cases sample a texture", sampling.len());
    let filters: std::collections::BTreeSet<String> = sampling
        .iter()
        .flat_map(|c| enigma_ir::text::print(&c.kernel).lines().filter(|l| l.contains("sampler(")).map(|l| if l.contains("linear") { "linear".to_string() } else { "nearest".to_string() }).collect::<Vec<_>>())
        .collect();
    assert_eq!(filters.len(), 2, "{filters:?}");
    for case in &sampling {
        let sanitized = run(case, true).unwrap_or_else(|e| panic!("{e}\n{}", enigma_ir::text::print(&case.kernel)));
        assert_eq!(case.compare_outputs(&sanitized, &run(case, false).unwrap()), Ok(()));
    }
}

/// The asynchronous-copy phase appears, in one and two stages, and what it
/// copies reaches the outputs: changing `async_in` changes them.
#[test]
fn async_copy_cases_copy_into_the_outputs() {
    let with_copies: Vec<(KernelCase, usize)> = (0..48)
        .map(testgen::case)
        .filter_map(|case| {
            let param = case.kernel.params.iter().position(|p| p.name == "async_in")?;
            Some((case, param))
        })
        .collect();
    assert!(with_copies.len() >= 8, "{} of 48 cases copy asynchronously", with_copies.len());
    let two_stages = with_copies.iter().filter(|(case, _)| print(&case.kernel).contains("async_wait(1)")).count();
    assert!(two_stages > 0 && two_stages < with_copies.len(), "{two_stages} of {} cases have two stages", with_copies.len());
    let changed = with_copies
        .iter()
        .filter(|(case, param)| {
            let mut other = case.clone();
            if let CaseArg::Input { elem, data } = &mut other.args[*param] {
                for w in data.iter_mut() {
                    *w = match elem {
                        enigma_ir::Scalar::F32 => (f32::from_bits(*w) + 1.0).to_bits(),
                        _ => !*w,
                    };
                }
            }
            run(case, false).unwrap() != run(&other, false).unwrap()
        })
        .count();
    assert!(changed * 2 >= with_copies.len(), "{changed} of {} cases' outputs depend on async_in", with_copies.len());
}

#[test]
fn seeded_cases_run_and_repeat_exactly() {
    let int_only = GenConfig { floats: false, ..GenConfig::default() };
    for seed in 0..16 {
        for case in [testgen::case(seed), testgen::case_with(&int_only, seed)] {
            let a = run(&case, false).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
            let b = run(&case, false).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
            assert_eq!(a, b, "seed {seed}");
        }
    }
}

/// The outputs are what the kernel computes, not left zeroed: across seeds
/// most first output elements are non-zero somewhere.
#[test]
fn outputs_are_written() {
    let written = (0..32)
        .filter(|&seed| run(&testgen::case(seed), false).unwrap().iter().any(|out| out.iter().any(|&w| w != 0)))
        .count();
    assert!(written >= 24, "{written} of 32 cases wrote a non-zero output");
}
