//! `print` on a backend against the simulator: some threads print a line
//! (an integer, a float and a bool) and every thread writes a buffer. The
//! backend's lines, collected through `DispatchOptions::collect_printed`,
//! equal the simulator's as a multiset (GPUs print in their own order), the
//! simulator's thread tags (`thread (3,0,0): `) removed and only the lines in
//! the kernel's format kept (a capture also holds whatever else the process
//! prints meanwhile); the buffer equals
//! the plain-Rust reference. The floats are multiples of 1/4 below 64 in
//! magnitude, which `%g` prints exactly.

use crate::util::*;
use enigma_ir::builder::*;
use enigma_ir::{Access, Type};
use enigma_runtime::{Arg, Device, DispatchMode, Options, Runtime};
use rand::Rng;

/// A line without the simulator's `thread (x,y,z): ` tag.
fn untagged(line: &str) -> &str {
    match line.strip_prefix("thread (").and_then(|rest| rest.split_once("): ")) {
        Some((_, text)) => text,
        None => line,
    }
}

/// Thread `g` of `n`: where `g % 7 == 3`, prints `g={g} v={x[g]} neg={x[g] < 0}`;
/// every thread writes `out[g] = 2·x[g] + 1`.
pub fn print_lines(rt: &Runtime) -> CaseResult {
    seeded("print_lines", |rng| {
        let mut k = KernelBuilder::new("print_lines");
        let x = k.buffer("x", Type::F32, Access::Read);
        let out = k.buffer("out", Type::F32, Access::ReadWrite);
        let n = k.value("n", Type::U32);
        let g = k.let_("g", thread_position_in_grid().x());
        k.if_(g.ge(n), |k| k.return_());
        let v = k.let_("v", x.get(g));
        k.if_((g % 7u32).eq(3u32), |k| k.print("g={} v={} neg={}", &[g, v, v.lt(0.0f32)]));
        k.store(out.at(g), v * 2.0f32 + 1.0f32);
        let kernel = finish(k)?;
        let n = 300usize;
        let xs: Vec<f32> = (0..n).map(|_| rng.gen_range(-255i32..256) as f32 / 4.0).collect();
        let collect = Options { collect_printed: true, ..Default::default() };
        let run = |rt: &Runtime| -> Result<(Vec<String>, Vec<f32>), String> {
            let p = pipeline(rt, &kernel)?;
            let (xb, ob) = (upload(rt, &xs)?, filled(rt, n, 0f32)?);
            let args = [Arg::from(&xb), Arg::from(&ob), Arg::u32(n as u32)];
            let report = rt.dispatch(&p, &args, DispatchMode::Threads, [n as u32 + 13, 1, 1], [64, 1, 1], &collect).ctx("dispatching")?;
            // A capture holds every line the process writes to standard
            // output while the dispatch runs (`enigma-cuda`'s printf capture),
            // the test harness's reports from its other threads included:
            // the kernel's lines are those in its own format.
            let mut lines: Vec<String> = report.printed.iter().map(|l| untagged(l).to_string()).filter(|l| l.starts_with("g=")).collect();
            lines.sort();
            Ok((lines, download::<f32>(&ob)?))
        };
        let (lines, got) = run(rt)?;
        let sim = Runtime::new(Device::Sim).ctx("opening the simulator")?;
        let (want_lines, _) = run(&sim)?;
        ensure!(
            want_lines.len() == (0..n).filter(|g| g % 7 == 3).count(),
            "the simulator printed {} lines, expected one per thread g with g % 7 == 3",
            want_lines.len()
        );
        if let Some(i) = (0..want_lines.len().max(lines.len())).find(|&i| lines.get(i) != want_lines.get(i)) {
            return Err(format!(
                "print_lines: {} line(s) printed, the simulator's {}; sorted, line {i} is {:?}, the simulator's {:?}",
                lines.len(),
                want_lines.len(),
                lines.get(i),
                want_lines.get(i)
            ));
        }
        let want: Vec<f32> = xs.iter().map(|v| v * 2.0 + 1.0).collect();
        check_f32_exact("print_lines out", &got, &want, |i| format!("thread {i}"))
    })
}

#[cfg(test)]
mod tests {
    use super::untagged;

    #[test]
    fn the_simulators_tag_is_removed() {
        assert_eq!(untagged("thread (3,0,0): g=3 v=-1.5 neg=true"), "g=3 v=-1.5 neg=true");
        assert_eq!(untagged("g=3 v=-1.5 neg=true"), "g=3 v=-1.5 neg=true");
    }
}
