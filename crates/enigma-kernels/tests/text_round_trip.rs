//! Every kernel enigma ships — the seed kernels, the seed-001 reduction
//! passes, the whole kernel library and both variants of every sanitizer
//! corpus entry — prints as text that parses back to the same kernel (source
//! locations included) and prints identically again, and its JSON form reads
//! back equal. Two seed kernels' text is kept as a snapshot so that changes
//! to the format are reviewed.

use enigma_ir::text::{parse, print};
use enigma_ir::{from_json, to_json, to_json_pretty, Kernel};

fn shipped_kernels() -> Vec<Kernel> {
    let mut kernels = enigma_kernels::seed_kernels();
    kernels.push(enigma_kernels::two_pass_sum::reduce_final_seed());
    kernels.extend(enigma_kernels::library::variants::all_kernels());
    for entry in enigma_testing::corpus::entries() {
        kernels.push((entry.buggy.kernel)());
        kernels.push((entry.fixed.kernel)());
    }
    kernels
}

/// Equality that names the kernel and the first statement that differs.
fn assert_same(got: &Kernel, want: &Kernel) {
    for (i, (g, w)) in got.body.iter().zip(&want.body).enumerate() {
        assert_eq!(g, w, "kernel `{}`: body[{i}]", want.name);
    }
    assert_eq!(got, want, "kernel `{}`", want.name);
}

#[test]
fn every_shipped_kernel_round_trips_through_text() {
    let kernels = shipped_kernels();
    assert!(kernels.len() > 150, "{} kernels", kernels.len());
    for kernel in &kernels {
        let printed = print(kernel);
        let parsed = parse(&printed).unwrap_or_else(|e| panic!("{e}\n{printed}"));
        assert_same(&parsed, kernel);
        assert_eq!(print(&parsed), printed, "kernel `{}`", kernel.name);
        // Source locations are part of the text.
        if kernel.body.first().is_some_and(|s| s.loc.is_some()) {
            assert!(printed.contains(".rs:"), "kernel `{}` printed no location:\n{printed}", kernel.name);
        }
    }
}

#[test]
fn every_shipped_kernel_round_trips_through_json() {
    for kernel in shipped_kernels() {
        assert_same(&from_json(&to_json(&kernel)).unwrap(), &kernel);
        assert_same(&from_json(&to_json_pretty(&kernel)).unwrap(), &kernel);
    }
}

/// The text without source locations, which move whenever the kernels'
/// Rust files are edited.
fn without_locations(mut kernel: Kernel) -> String {
    fn strip(block: &mut Vec<enigma_ir::Stmt>) {
        for stmt in block {
            stmt.loc = None;
            match &mut stmt.kind {
                enigma_ir::StmtKind::If { then_body, else_body, .. } => {
                    strip(then_body);
                    strip(else_body);
                }
                enigma_ir::StmtKind::For { body, .. } | enigma_ir::StmtKind::While { body, .. } => strip(body),
                _ => {}
            }
        }
    }
    strip(&mut kernel.body);
    print(&kernel)
}

#[test]
fn snapshot_reduce_threadgroup() {
    insta::assert_snapshot!(without_locations(enigma_kernels::two_pass_sum::reduce_threadgroup()));
}

#[test]
fn snapshot_shuffle_stencil() {
    insta::assert_snapshot!(without_locations(enigma_kernels::dispatch_patterns::shuffle_stencil()));
}
