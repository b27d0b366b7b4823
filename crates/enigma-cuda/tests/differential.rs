//! Differential test: random well-formed kernels (`enigma_ir::testgen`) give
//! the same outputs on the simulator and on CUDA. The generator keeps every
//! float exactly representable (integers; multiples of 0.25 in quantized
//! matrix products) and every sum exact, so the comparison is exact:
//! integers bit for bit, floats by value (see the testgen module docs).
//! The mixed configuration has every phase the generator turns on by
//! default, cooperative-tensor products among them (about half of its
//! kernels; the count is printed and must not be zero), and the print phase:
//! the lines a kernel prints (collected through
//! `DispatchOptions::collect_printed`) must agree as a multiset, the
//! simulator's thread tags removed.
//!
//! `ENIGMA_DIFF_CASES` sets how many seeds run (default 300); a failure names
//! its seed, and `ENIGMA_DIFF_SEED` runs that one alone. Without a CUDA
//! device the test prints `skipped: <reason>` and passes (recorded by
//! `enigma_conformance::skip`, so `scripts/test.sh` counts it).

use enigma_ir::testgen::{case_with, pack, CaseArg, GenConfig, KernelCase};
use enigma_ir::{Type, ValidationOptions};
use enigma_runtime::{Arg, Buffer, Device, DispatchMode, Options, Runtime, Texture, TextureFormat};

/// A case's buffer or texture.
enum Memory {
    Buffer(Buffer),
    Texture(Texture),
}

/// The one-channel format of a generated texture's texel type.
fn format(texel: enigma_ir::Scalar) -> TextureFormat {
    match texel {
        enigma_ir::Scalar::F32 => TextureFormat::R32Float,
        enigma_ir::Scalar::I32 => TextureFormat::R32Sint,
        _ => TextureFormat::R32Uint,
    }
}

/// A case's outputs' words, and its printed lines sorted, without the
/// simulator's `thread (x,y,z): ` tags.
fn run(rt: &Runtime, case: &KernelCase) -> Result<(Vec<Vec<u32>>, Vec<String>), String> {
    enigma_ir::validate(&case.kernel, &ValidationOptions::default()).map_err(|e| e.to_string())?;
    let pipeline = rt.pipeline(&case.kernel).map_err(|e| e.to_string())?;
    let mut buffers: Vec<Option<Memory>> = vec![];
    for arg in &case.args {
        buffers.push(match arg {
            CaseArg::Input { elem, data } => {
                let bytes = pack(*elem, data);
                Some(Memory::Buffer(rt.buffer_from_bytes(Type::scalar(*elem), &bytes).map_err(|e| e.to_string())?))
            }
            CaseArg::Output { elem, len } => {
                Some(Memory::Buffer(rt.buffer_of_type(Type::scalar(*elem), *len as usize).map_err(|e| e.to_string())?))
            }
            CaseArg::Texture { texel, width, height, data } => {
                let words = data.clone().unwrap_or_else(|| vec![0; (width * height) as usize]);
                Some(Memory::Texture(rt.texture_from(format(*texel), *width, *height, &words).map_err(|e| e.to_string())?))
            }
            CaseArg::Value(_) => None,
        });
    }
    let args: Vec<Arg<'_>> = case
        .args
        .iter()
        .zip(&buffers)
        .map(|(a, b)| match (a, b) {
            (CaseArg::Value(lit), _) => Arg::Value(*lit),
            (_, Some(Memory::Buffer(b))) => Arg::from(b),
            (_, Some(Memory::Texture(t))) => Arg::from(t),
            (_, None) => unreachable!("every buffer argument has a buffer"),
        })
        .collect();
    let collect = Options { collect_printed: true, ..Default::default() };
    let report = rt.dispatch(&pipeline, &args, DispatchMode::Threads, case.grid, case.threads, &collect).map_err(|e| e.to_string())?;
    let mut lines: Vec<String> = report
        .printed
        .iter()
        .map(|l| l.strip_prefix("thread (").and_then(|t| t.split_once("): ")).map_or(l.as_str(), |(_, text)| text).to_string())
        .collect();
    lines.sort();
    let mut outputs = vec![];
    for (arg, buf) in case.args.iter().zip(&buffers) {
        let bytes = match (arg, buf) {
            (CaseArg::Output { .. }, Some(Memory::Buffer(b))) => b.read_bytes(),
            (CaseArg::Texture { data: None, .. }, Some(Memory::Texture(t))) => t.read_bytes(),
            _ => continue,
        };
        let bytes = bytes.map_err(|e| e.to_string())?;
        outputs.push(bytes.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect());
    }
    Ok((outputs, lines))
}

#[test]
fn random_kernels_agree_between_the_simulator_and_cuda() {
    let cuda = match Runtime::new(Device::Cuda) {
        Ok(rt) => rt,
        Err(e) => return enigma_conformance::skip(env!("CARGO_PKG_NAME"), &e),
    };
    let sim = Runtime::new(Device::Sim).unwrap();
    let cases: u64 = std::env::var("ENIGMA_DIFF_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(300);
    let seeds: Vec<u64> = match std::env::var("ENIGMA_DIFF_SEED").ok().and_then(|s| s.parse().ok()) {
        Some(seed) => vec![seed],
        None => (0..cases).collect(),
    };
    let configs = [
        ("mixed", GenConfig { prints: true, ..GenConfig::default() }),
        ("integer-only", GenConfig { floats: false, ..GenConfig::default() }),
    ];
    let (mut failures, mut cooperative, mut printing) = (vec![], 0, 0);
    for seed in &seeds {
        for (label, config) in &configs {
            let case = case_with(config, *seed);
            cooperative += usize::from(!case.kernel.cooperative_tensors.is_empty());
            let outcome = run(&sim, &case).and_then(|(want, want_lines)| {
                let (got, lines) = run(&cuda, &case)?;
                printing += usize::from(!want_lines.is_empty());
                if lines != want_lines {
                    return Err(format!("printed lines differ: CUDA {lines:?}, the simulator {want_lines:?}"));
                }
                case.compare_outputs(&want, &got)
            });
            if let Err(e) = outcome {
                failures.push(format!("seed {seed} ({label}): {e}"));
            }
        }
    }
    println!(
        "{} kernels compared ({cooperative} with cooperative tensors, {printing} printing), {} differ",
        seeds.len() * configs.len(),
        failures.len()
    );
    assert!(cooperative > 0 || seeds.len() < 8, "no kernel of {} seeds has a cooperative phase", seeds.len());
    assert!(failures.is_empty(), "{}", failures.iter().take(10).cloned().collect::<Vec<_>>().join("\n"));
}
