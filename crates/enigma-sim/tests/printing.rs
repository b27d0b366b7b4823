//! `print` on the simulator: one line per thread that runs it, tagged with
//! the thread's grid position, values as C's `printf` shows them; the
//! lines in dispatch order SIMD group by SIMD group (threadgroups in
//! linear order) whatever order the threadgroups ran in; a sanitized
//! dispatch prints once; past the limit the first lines are kept and a
//! note counts the rest; a failing dispatch still shows what it printed.

use enigma_backend::{ArgValue, Backend, DispatchMode, DispatchOptions, RuntimeError, SpecValues};
use enigma_ir::builder::*;
use enigma_ir::limits::MAX_PRINTED_LINES;
use enigma_ir::{validate, Access, Kernel, Type, ValidationOptions};
use enigma_sim::SimBackend;
use std::sync::{Arc, Mutex};

/// Dispatches `kernel` over one zeroed buffer of `words` u32s, `grid`
/// threads in threadgroups of `tg`; the printed lines and the report's notes.
fn printed(kernel: &Kernel, words: usize, grid: [u32; 3], tg: [u32; 3], sanitize: bool) -> (Vec<String>, Result<Vec<String>, RuntimeError>) {
    let info = validate(kernel, &ValidationOptions::default()).unwrap();
    let lines = Arc::new(Mutex::new(vec![]));
    let backend = SimBackend::new().printing_to(lines.clone());
    let compiled = backend.compile(kernel, &info, &SpecValues::default()).unwrap();
    let storage = backend.allocate(words * 4).unwrap();
    let args = [ArgValue::Buffer { storage: storage.as_ref(), elem: None }];
    let geometry = enigma_backend::check_dispatch(backend.info(), compiled.as_ref(), &args, DispatchMode::Threads, grid, tg).unwrap();
    let report = backend.dispatch(compiled.as_ref(), &args, &geometry, &DispatchOptions { sanitize, schedules: 0, ..Default::default() });
    let lines = lines.lock().unwrap().clone();
    (lines, report.map(|r| r.notes))
}

/// Each thread prints its index, a float, a bool and a negative number.
fn hello() -> Kernel {
    let mut k = KernelBuilder::new("hello");
    let out = k.buffer("out", Type::U32, Access::ReadWrite);
    let gid = k.let_("gid", thread_position_in_grid().x());
    let halved = k.let_("halved", gid.cast(Type::F32) * 0.5f32);
    let negative = k.let_("negative", gid.cast(Type::I32) - 2i32);
    k.print("gid {} half {} odd {} minus {} {{braces}}", &[gid, halved, (gid & 1u32).eq(1u32), negative]);
    k.store(out.at(gid), gid);
    k.finish().unwrap()
}

#[test]
fn each_thread_prints_a_tagged_line_in_dispatch_order() {
    // 4 threadgroups of 40 threads: two SIMD groups each, the second partial.
    let (lines, notes) = printed(&hello(), 160, [160, 1, 1], [40, 1, 1], false);
    assert!(!notes.unwrap().iter().any(|n| n.contains("print")), "nothing was left out");
    let want: Vec<String> = (0..160)
        .map(|g: i64| format!("thread ({g},0,0): gid {g} half {} odd {} minus {} {{braces}}", (g as f64) * 0.5, g % 2 == 1, g - 2))
        .collect();
    assert_eq!(lines, want);
}

#[test]
fn a_sanitized_dispatch_prints_once() {
    let (lines, notes) = printed(&hello(), 64, [64, 1, 1], [32, 1, 1], true);
    assert!(notes.unwrap().is_empty());
    assert_eq!(lines.len(), 64);
    assert_eq!(lines[63], "thread (63,0,0): gid 63 half 31.5 odd true minus 61 {braces}");
}

#[test]
fn lines_are_grouped_by_simd_group_and_tagged_with_grid_positions() {
    // A 2-D threadgroup of 8×8 threads (two SIMD groups), each thread
    // printing twice with a barrier between: SIMD group 0's lines come
    // first, both rounds, then SIMD group 1's.
    let mut k = KernelBuilder::new("rounds");
    let out = k.buffer("out", Type::U32, Access::ReadWrite);
    let lid = k.let_("lid", thread_index_in_threadgroup());
    k.print("first {}", &[lid]);
    k.threadgroup_barrier(enigma_ir::MemFlags::None);
    k.print("second {}", &[lid]);
    k.store(out.at(lid), lid);
    let (lines, _) = printed(&k.finish().unwrap(), 64, [8, 8, 1], [8, 8, 1], false);
    let mut want = vec![];
    for sg in 0..2u32 {
        for round in ["first", "second"] {
            for lane in 0..32 {
                let l = sg * 32 + lane;
                want.push(format!("thread ({},{},0): {round} {l}", l % 8, l / 8));
            }
        }
    }
    assert_eq!(lines, want);
}

#[test]
fn past_the_limit_the_first_lines_are_kept_and_the_rest_counted() {
    // 3 lines per thread over 2048 threads: 6144 lines, 4096 shown.
    let mut k = KernelBuilder::new("chatty");
    let out = k.buffer("out", Type::U32, Access::ReadWrite);
    let gid = k.let_("gid", thread_position_in_grid().x());
    k.for_range("i", 0u32, 3u32, 1u32, |k, i| k.print("{} {}", &[gid, i]));
    k.store(out.at(gid), gid);
    let (lines, notes) = printed(&k.finish().unwrap(), 2048, [2048, 1, 1], [256, 1, 1], false);
    let dropped = 3 * 2048 - MAX_PRINTED_LINES;
    let note = format!("print: {dropped} more line(s) not shown (the simulator shows the first {MAX_PRINTED_LINES} of a dispatch)");
    assert_eq!(lines.len(), MAX_PRINTED_LINES + 1);
    assert_eq!(lines[0], "thread (0,0,0): 0 0");
    // 42 SIMD groups of 96 lines, then SIMD group 42: its first two rounds.
    assert_eq!(lines[MAX_PRINTED_LINES - 1], "thread (1375,0,0): 1375 1");
    assert_eq!(lines[MAX_PRINTED_LINES], note);
    assert_eq!(notes.unwrap(), vec![note]);
}

#[test]
fn a_failing_dispatch_still_shows_its_lines() {
    let mut k = KernelBuilder::new("fails");
    let out = k.buffer("out", Type::U32, Access::ReadWrite);
    let gid = k.let_("gid", thread_position_in_grid().x());
    k.print("about to write {}", &[gid * 100u32]);
    k.store(out.at(gid * 100u32), gid);
    let (lines, result) = printed(&k.finish().unwrap(), 32, [32, 1, 1], [32, 1, 1], false);
    assert!(result.unwrap_err().to_string().contains("out-of-bounds"));
    assert_eq!(lines.len(), 32);
    assert_eq!(lines[1], "thread (1,0,0): about to write 100");
}
