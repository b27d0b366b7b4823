//! Writes the IR text of the kernels the matrix families' selections choose
//! over a grid of problems, devices and overrides (and the split-K
//! reductions) into a directory, one file per kernel name:
//! `scripts/emit-identity.sh` compares them with a baseline, covering the
//! variants (stages, whole tiles, ragged rows, K splits, fragment order)
//! that `enigma emit --list` does not name.
//!
//! `cargo run -p enigma-kernels --example variant_ir -- DIR`

#[path = "../tests/devices/mod.rs"]
mod devices;

use devices::device;
use enigma_backend::DeviceKind;
use enigma_ir::{Kernel, QuantLayout};
use enigma_kernels::library::gemm::{self, GemmProblem};
use enigma_kernels::library::qmatmul::{self, QmatmulKernel, QmatmulProblem, QmatmulSelection};
use enigma_kernels::library::quant::Format;
use enigma_kernels::library::select::{GemmOptions, Overrides};
use enigma_kernels::library::{qgemm_cooperative, qgemm_fused, split, DType};
use std::collections::BTreeMap;


/// `text` without the source locations the printer appends to statements
/// (`  // crates/…:line`): they name where the builder ran, which moving code
/// between files changes, and no backend emits them.
fn without_locations(text: &str) -> String {
    text.lines().map(|l| format!("{}\n", l.split_once("  // crates/").map_or(l, |(code, _)| code))).collect()
}

fn main() {
    let dir = std::env::args().nth(1).unwrap_or_else(|| {
        eprintln!("usage: variant_ir DIR");
        std::process::exit(2)
    });
    if dir == "--help" || dir == "-h" {
        println!("usage: variant_ir DIR: writes the IR text of the selected matrix kernels into DIR");
        return;
    }
    let devices = [
        device(DeviceKind::Simulator, 2, 32 * 1024, true),
        device(DeviceKind::Cuda, 132, 227 * 1024, true),
        device(DeviceKind::Metal, 40, 32 * 1024, false),
    ];
    let sum = |s| Overrides { gemm: GemmOptions { k_splits: Some(3), split_sum: Some(s), ..GemmOptions::default() }, ..Overrides::default() };
    let overrides = [
        Overrides::default(),
        sum(split::SplitSum::Reduction),
        sum(split::SplitSum::LastThreadgroup),
        Overrides { gemm: GemmOptions { stages: Some(1), ..GemmOptions::default() }, ..Overrides::default() },
        Overrides { gemm: GemmOptions { stages: Some(2), tile: Some(enigma_kernels::library::tile::GemmTile::new(64, 64, 32, 2, 2)), ..GemmOptions::default() }, ..Overrides::default() },
        Overrides { threads: Some(128), ..Overrides::default() },
        Overrides { vectorize: Some(false), ..Overrides::default() },
    ];
    let mut kernels: BTreeMap<String, Vec<Kernel>> = BTreeMap::new();
    let mut add = |k: Kernel| {
        let same = kernels.entry(k.name.clone()).or_default();
        if !same.contains(&k) {
            same.push(k);
        }
    };
    let shapes = [(1, 64, 64), (16, 11008, 4096), (64, 128, 256), (70, 130, 41), (128, 128, 128), (256, 4096, 4096), (4096, 4096, 4096), (33, 96, 64)];
    for dev in &devices {
        for o in &overrides {
            for &(m, n, k) in &shapes {
                for (input, output) in [(DType::F16, DType::F32), (DType::BF16, DType::BF16), (DType::F32, DType::F32), (DType::F16, DType::F16)] {
                    if let Ok(plan) = gemm::select(&GemmProblem { input, output, m, n, k, batch: 1 }, dev, o) {
                        add(plan.kernel());
                    }
                }
                for format in [Format::Fp4, Format::Int4, Format::MlxAffine] {
                    for layout in [QuantLayout::Rows, QuantLayout::Fragments] {
                        for out in [DType::F16, DType::F32] {
                            let problem = QmatmulProblem { format, layout, out, m: m as usize, n: n as usize, k: k as usize, group: 64 };
                            for kernel in [None, Some(QmatmulKernel::Tiled), Some(QmatmulKernel::Fused)] {
                                let selection = match kernel {
                                    None => qmatmul::select(&problem, dev, o),
                                    Some(kind) => qmatmul::select_kernel(kind, &problem, dev, o),
                                };
                                let Ok(selection) = selection else { continue };
                                add(match selection {
                                    QmatmulSelection::Decode(p) => p.kernel(),
                                    QmatmulSelection::FragmentsDecode(p) => p.kernel(),
                                    QmatmulSelection::Affine(p) => p.kernel(),
                                    QmatmulSelection::Tiled(c) => gemm::qgemm(&c),
                                    QmatmulSelection::Fused(c) => qgemm_fused::qgemm_fused(&c),
                                    QmatmulSelection::Cooperative(c) => qgemm_cooperative::qgemm_cooperative(&c),
                                });
                            }
                        }
                    }
                }
            }
        }
    }
    for output in DType::ALL {
        for width in [1, 4] {
            add(split::splitk_reduce(output, width));
        }
    }
    std::fs::create_dir_all(&dir).expect("creating the output directory");
    let mut files = 0;
    for (name, same) in &kernels {
        for (i, k) in same.iter().enumerate() {
            std::fs::write(format!("{dir}/{name}.{i}.ir"), without_locations(&enigma_ir::text::print(k))).expect("writing a kernel");
            files += 1;
        }
    }
    println!("{files} kernels in {dir}");
}
