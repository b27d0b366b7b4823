//! `print` on the simulator ([`enigma_ir::StmtKind::Print`]): each line
//! rendered as C's `printf` renders it on a GPU (integers in decimal,
//! floats as `%g`, bools as `true`/`false`), tagged with the thread's grid
//! position, and kept per SIMD group; after the dispatch its lines are
//! written to standard output SIMD group by SIMD group in dispatch order
//! (threadgroups in linear order, then SIMD groups by index), at most
//! [`MAX_PRINTED_LINES`] of them, then a note of how many more there were.

use crate::ops;
use enigma_ir::limits::MAX_PRINTED_LINES;
use enigma_ir::print_format::Piece;
use enigma_ir::Scalar;
use std::collections::BTreeMap;
use std::io::Write;
use std::sync::Mutex;

/// One line: the pieces of the format with each value in place.
pub fn render(pieces: &[Piece], values: &[(Scalar, u64)]) -> String {
    let mut out = String::new();
    let mut values = values.iter();
    for piece in pieces {
        match piece {
            Piece::Text(t) => out.push_str(t),
            // Validation matched the values to the placeholders.
            Piece::Value => out.push_str(&values.next().map_or_else(String::new, |&(ty, bits)| value(ty, bits))),
        }
    }
    out
}

/// One value as the backends' `printf` prints it.
fn value(ty: Scalar, bits: u64) -> String {
    match ty {
        Scalar::Bool => (if bits != 0 { "true" } else { "false" }).to_string(),
        t if t.is_float() => c_g(ops::to_f64(t, bits)),
        t if t.is_signed_int() => (bits as i64).to_string(),
        _ => bits.to_string(),
    }
}

/// `x` as C's `printf("%g", x)`: 6 significant digits, the exponent form
/// where the exponent is below -4 or at least 6, trailing zeros dropped.
pub fn c_g(x: f64) -> String {
    if x.is_nan() {
        return if x.is_sign_negative() { "-nan" } else { "nan" }.to_string();
    }
    if x.is_infinite() {
        return if x < 0.0 { "-inf" } else { "inf" }.to_string();
    }
    if x == 0.0 {
        return if x.is_sign_negative() { "-0" } else { "0" }.to_string();
    }
    // Rounded to 6 significant digits first: the exponent is the rounded value's.
    let sci = format!("{x:.5e}");
    let (mantissa, exponent) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    if !(-4..6).contains(&exponent) {
        let sign = if exponent < 0 { '-' } else { '+' };
        format!("{}e{sign}{:02}", strip_zeros(mantissa), exponent.unsigned_abs())
    } else {
        strip_zeros(&format!("{x:.*}", (5 - exponent) as usize)).to_string()
    }
}

/// `1.500` → `1.5`, `2.000` → `2`.
fn strip_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

/// A dispatch's printed lines, gathered from the threadgroups as they
/// finish (in any order) and kept as the first [`MAX_PRINTED_LINES`] in
/// dispatch order.
#[derive(Debug, Default)]
pub struct PrintLog {
    state: Mutex<LogState>,
}

#[derive(Debug, Default)]
struct LogState {
    /// Lines by threadgroup (linear index), its SIMD groups' in index order.
    lines: BTreeMap<u64, Vec<String>>,
    kept: usize,
    /// Lines printed but not kept.
    dropped: u64,
}

impl PrintLog {
    /// Adds threadgroup `linear`'s lines, and the count of those its SIMD
    /// groups printed past their own limit.
    pub fn add(&self, linear: u64, lines: Vec<String>, dropped: u64) {
        if lines.is_empty() && dropped == 0 {
            return;
        }
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        s.kept += lines.len();
        s.dropped += dropped;
        if !lines.is_empty() {
            s.lines.entry(linear).or_default().extend(lines);
        }
        // Keep the first lines in dispatch order: drop from the last threadgroups.
        while s.kept > MAX_PRINTED_LINES {
            let excess = s.kept - MAX_PRINTED_LINES;
            let Some(mut last) = s.lines.last_entry() else { break };
            let n = last.get().len();
            let removed = if n <= excess {
                last.remove();
                n
            } else {
                last.get_mut().truncate(n - excess);
                excess
            };
            s.kept -= removed;
            s.dropped += removed as u64;
        }
    }

    /// Writes the lines, then the note of the lines left out (which it
    /// also returns), to `sink`, or to standard output without one.
    pub fn write_out(&self, sink: Option<&Mutex<Vec<String>>>) -> Option<String> {
        let s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let note = (s.dropped > 0).then(|| {
            format!("print: {} more line(s) not shown (the simulator shows the first {MAX_PRINTED_LINES} of a dispatch)", s.dropped)
        });
        let lines = s.lines.values().flatten().chain(note.as_ref());
        if let Some(sink) = sink {
            sink.lock().unwrap_or_else(|e| e.into_inner()).extend(lines.cloned());
        } else if s.kept > 0 || note.is_some() {
            let mut out = std::io::stdout().lock();
            for line in lines {
                // A closed standard output loses the lines, as printf's would.
                let _ = writeln!(out, "{line}");
            }
            let _ = out.flush();
        }
        note
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c_g_matches_printf() {
        // printf("%g") of each, from C.
        for (x, want) in [
            (1.5, "1.5"),
            (100000.0, "100000"),
            (1000000.0, "1e+06"),
            (123456789.0, "1.23457e+08"),
            (0.0001, "0.0001"),
            (0.00001234, "1.234e-05"),
            (-2.0, "-2"),
            (1.0 / 3.0, "0.333333"),
            (999999.5, "1e+06"),
            (f32::MAX as f64, "3.40282e+38"),
            (1e-45_f32 as f64, "1.4013e-45"),
            (-0.0, "-0"),
            (f64::NEG_INFINITY, "-inf"),
            (f64::NAN, "nan"),
        ] {
            assert_eq!(c_g(x), want, "{x}");
        }
    }

    #[test]
    fn values_render_by_type() {
        let pieces = enigma_ir::print_format::pieces("{} {} {} {}").unwrap();
        let line = render(&pieces, &[(Scalar::I32, -3i64 as u64), (Scalar::U32, 7), (Scalar::Bool, 1), (Scalar::F16, 0x3e00)]);
        assert_eq!(line, "-3 7 true 1.5");
    }

    #[test]
    fn the_log_keeps_the_first_lines_in_dispatch_order() {
        let log = PrintLog::default();
        log.add(2, vec!["c".into(); MAX_PRINTED_LINES], 0);
        log.add(0, vec!["a".into(); 3], 0);
        log.add(1, vec!["b".into(); 2], 5);
        let s = log.state.lock().unwrap();
        let lines: Vec<&String> = s.lines.values().flatten().collect();
        assert_eq!(lines.len(), MAX_PRINTED_LINES);
        assert_eq!((lines[0].as_str(), lines[3].as_str(), lines[5].as_str()), ("a", "b", "c"));
        assert_eq!(s.dropped, 5 + 5);
    }
}
