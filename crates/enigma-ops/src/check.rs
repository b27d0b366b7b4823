//! Comparing a kernel's output with its f64 reference.

use crate::launch::LaunchSummary;
use std::fmt;

/// Element `i` passes when `|got - want| ≤ abs + rel · |want|`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tolerance {
    pub abs: f64,
    pub rel: f64,
}

impl Tolerance {
    pub fn new(abs: f64, rel: f64) -> Tolerance {
        Tolerance { abs, rel }
    }

    /// Bit-exact (integer results, max/min).
    pub fn exact() -> Tolerance {
        Tolerance { abs: 0.0, rel: 0.0 }
    }

    pub fn bound(&self, want: f64) -> f64 {
        self.abs + self.rel * want.abs()
    }
}

/// The result of checking one run against its reference.
#[derive(Clone, Debug, PartialEq)]
pub struct CheckOutcome {
    /// The registry entry (or operation) checked.
    pub name: String,
    pub shape: Vec<usize>,
    /// Elements compared.
    pub checked: usize,
    /// Elements outside the tolerance.
    pub failures: usize,
    pub max_abs_error: f64,
    /// The largest `|got - want| / bound` (≤ 1 passes).
    pub worst_ratio: f64,
    /// Index of the element with the largest ratio, with its values.
    pub worst_index: usize,
    pub worst_got: f64,
    pub worst_want: f64,
    /// The tolerance of the worst element (per-element tolerances vary for
    /// sums: they scale with the summands).
    pub tolerance: Tolerance,
    pub passed: bool,
    /// The dispatches of the run.
    pub launches: Vec<LaunchSummary>,
    /// Bytes the operation must move at least (inputs read once, outputs
    /// written once), for bandwidth figures.
    pub bytes: u64,
}

impl CheckOutcome {
    /// Compares `got` with `want` under a per-element tolerance.
    pub fn compare(name: &str, shape: &[usize], got: &[f64], want: &[f64], tol: impl Fn(usize) -> Tolerance) -> CheckOutcome {
        let mut out = CheckOutcome {
            name: name.to_string(),
            shape: shape.to_vec(),
            checked: want.len(),
            failures: 0,
            max_abs_error: 0.0,
            worst_ratio: 0.0,
            worst_index: 0,
            worst_got: got.first().copied().unwrap_or(f64::NAN),
            worst_want: want.first().copied().unwrap_or(f64::NAN),
            tolerance: tol(0),
            passed: got.len() == want.len(),
            launches: vec![],
            bytes: 0,
        };
        for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
            let t = tol(i);
            let err = (g - w).abs();
            let same = g == w || (g.is_nan() && w.is_nan());
            let ratio = if same {
                0.0
            } else if err.is_nan() {
                f64::INFINITY
            } else {
                err / t.bound(w).max(f64::MIN_POSITIVE)
            };
            // A NaN error fails: `err <= bound` is false for it.
            let within = err <= t.bound(w);
            if !same && !within {
                out.failures += 1;
            }
            if !same {
                let e = if err.is_nan() { f64::INFINITY } else { err };
                out.max_abs_error = out.max_abs_error.max(e);
            }
            if ratio > out.worst_ratio || i == 0 {
                out.worst_ratio = ratio;
                out.worst_index = i;
                out.worst_got = g;
                out.worst_want = w;
                out.tolerance = t;
            }
        }
        out.passed = out.passed && out.failures == 0;
        out
    }
}

impl fmt::Display for CheckOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shape: Vec<String> = self.shape.iter().map(|s| s.to_string()).collect();
        write!(
            f,
            "{} [{}]: {} — {} elements, {} outside tolerance; max |error| {:.3e}; worst element {} got {} want {} (tolerance {:.1e} + {:.1e}·|want|, {:.2} of it)",
            self.name,
            shape.join("x"),
            if self.passed { "ok" } else { "FAILED" },
            self.checked,
            self.failures,
            self.max_abs_error,
            self.worst_index,
            self.worst_got,
            self.worst_want,
            self.tolerance.abs,
            self.tolerance.rel,
            self.worst_ratio,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compare_counts_failures_and_nans() {
        let t = |_| Tolerance::new(0.1, 0.0);
        let ok = CheckOutcome::compare("x", &[3], &[1.0, 2.0, 3.05], &[1.0, 2.0, 3.0], t);
        assert!(ok.passed, "{ok}");
        assert_eq!(ok.worst_index, 2);
        let bad = CheckOutcome::compare("x", &[3], &[1.0, f64::NAN, 3.5], &[1.0, 2.0, 3.0], t);
        assert!(!bad.passed);
        assert_eq!(bad.failures, 2);
        assert_eq!(bad.worst_index, 1);
        let short = CheckOutcome::compare("x", &[3], &[1.0], &[1.0, 2.0], t);
        assert!(!short.passed);
    }
}
