//! Roofline predictions of the library's kernels on a catalogue device.
//!
//! A [`Workload`] is one call of a library operation at one shape; it knows
//! the bytes the call must move at least (every input read once from memory,
//! every output written once: no kernel can move less) and the floating-point
//! operations it must do. [`predict`] divides them by the device's peak
//! bandwidth and FP16 throughput: the larger time is the roofline's lower
//! bound. It is a model of the best a kernel could do, **not a measurement**:
//! a kernel reaches some fraction of it (BENCHMARKS.md gives that fraction
//! on the GPUs enigma has measured), and a figure the catalogue lacks (the
//! FP16 throughput of most Apple GPUs) leaves its side of the roof unknown.
//!
//! [`DeviceSpec::roof_seconds`] is the one place that turns FLOPs and bytes
//! into seconds on a device; the tile planner ([`crate::tiles`]) uses it too.

use serde::{Deserialize, Serialize};

use crate::tiles::WeightFormat;
use crate::DeviceSpec;

/// Bytes of one element of a floating-point type: 2 for f16/bf16, 4 for f32.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Precision {
    /// f16 or bf16: the FP16 throughput's roof.
    Half,
    /// f32: the catalogue has no FP32 throughput, so its compute roof is
    /// unknown.
    Single,
}

impl Precision {
    /// Bytes per element.
    pub fn bytes(self) -> f64 {
        match self {
            Precision::Half => 2.0,
            Precision::Single => 4.0,
        }
    }
}

/// One call of a library operation at one shape.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Workload {
    /// `batch` products `C[m×n] = A[m×k]·B[k×n]`, C written in `output`.
    Gemm { batch: u64, m: u64, n: u64, k: u64, input: Precision, output: Precision },
    /// `C[m×n] = A[m×k]·dequant(B)` with 4-bit weights (one f16 scale per
    /// `group` weights), A and C in f16.
    QuantMatmul { m: u64, n: u64, k: u64, group: u64, weights: WeightFormat },
    /// `y[rows] = W[rows×cols]·x`, x and y in f32.
    Gemv { rows: u64, cols: u64, weights: Precision },
    /// One decode step: `batch` sequences of `keys` cached keys, `q_heads`
    /// query heads over `kv_heads` K/V heads of dimension `d`.
    AttentionDecode { batch: u64, q_heads: u64, kv_heads: u64, keys: u64, d: u64, precision: Precision },
    /// Attention over a sequence (prefill): `q_len` queries against
    /// `kv_len` keys per head; `causal` keeps key `j` for query `i` where
    /// `j ≤ i` (torch's `is_causal`, top-left aligned).
    AttentionPrefill { batch: u64, q_heads: u64, kv_heads: u64, q_len: u64, kv_len: u64, d: u64, causal: bool, precision: Precision },
}

impl Workload {
    /// Bytes the call must move at least: each input read once, each output
    /// written once.
    pub fn bytes(&self) -> f64 {
        match *self {
            Workload::Gemm { batch, m, n, k, input, output } => {
                let (b, m, n, k) = (f(batch), f(m), f(n), f(k));
                b * ((m * k + k * n) * input.bytes() + m * n * output.bytes())
            }
            Workload::QuantMatmul { m, n, k, group, weights } => {
                let groups = f(k / group.max(1));
                let (m, n, k) = (f(m), f(n), f(k));
                let scales = if weights.has_scales() { groups * n * 2.0 } else { 0.0 };
                k * n * weights.bytes_per_weight() + scales + (m * k + m * n) * 2.0
            }
            Workload::Gemv { rows, cols, weights } => f(rows) * f(cols) * weights.bytes() + (f(rows) + f(cols)) * 4.0,
            Workload::AttentionDecode { batch, q_heads, kv_heads, keys, d, precision } => {
                f(batch) * 2.0 * (f(kv_heads) * f(keys) + f(q_heads)) * f(d) * precision.bytes()
            }
            Workload::AttentionPrefill { batch, q_heads, kv_heads, q_len, kv_len, d, precision, .. } => {
                f(batch) * 2.0 * (f(q_heads) * f(q_len) + f(kv_heads) * f(kv_len)) * f(d) * precision.bytes()
            }
        }
    }

    /// Floating-point operations (a multiply-add counts two): `2·m·n·k` per
    /// product, `4·d` per (query, key) pair of attention that the mask keeps.
    pub fn flops(&self) -> f64 {
        match *self {
            Workload::Gemm { batch, m, n, k, .. } => 2.0 * f(batch) * f(m) * f(n) * f(k),
            Workload::QuantMatmul { m, n, k, .. } => 2.0 * f(m) * f(n) * f(k),
            Workload::Gemv { rows, cols, .. } => 2.0 * f(rows) * f(cols),
            Workload::AttentionDecode { batch, q_heads, keys, d, .. } => 4.0 * f(batch) * f(q_heads) * f(keys) * f(d),
            Workload::AttentionPrefill { batch, q_heads, q_len, kv_len, d, causal, .. } => {
                4.0 * f(batch) * f(q_heads) * kept_pairs(q_len, kv_len, causal) * f(d)
            }
        }
    }

    /// Whether the compute roof is the FP16 throughput (16-bit inputs);
    /// f32 inputs have no known compute roof in the catalogue.
    fn half_precision(&self) -> bool {
        match *self {
            Workload::Gemm { input, .. } => input == Precision::Half,
            Workload::QuantMatmul { .. } => true,
            Workload::Gemv { weights, .. } => weights == Precision::Half,
            Workload::AttentionDecode { precision, .. } | Workload::AttentionPrefill { precision, .. } => precision == Precision::Half,
        }
    }
}

fn f(x: u64) -> f64 {
    x as f64
}

/// (query, key) pairs the mask keeps: all `q_len · kv_len`, or with the
/// top-left causal mask `Σ_i min(i + 1, kv_len)`.
fn kept_pairs(q_len: u64, kv_len: u64, causal: bool) -> f64 {
    if !causal {
        return f(q_len) * f(kv_len);
    }
    // Rows below kv_len keep i + 1 keys; the rest keep all kv_len.
    let ramp = f(q_len.min(kv_len));
    ramp * (ramp + 1.0) / 2.0 + (f(q_len) - ramp) * f(kv_len)
}

/// Which roof a prediction sits on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Roof {
    Memory,
    Compute,
    /// One of the two roofs is unknown: the known one is only a lower bound.
    Unknown,
}

/// A roofline prediction of one workload on one device.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RooflinePrediction {
    pub device: String,
    pub workload: Workload,
    pub bytes: f64,
    pub flops: f64,
    /// `flops / bytes`.
    pub arithmetic_intensity: f64,
    /// Seconds at the device's FP16 throughput, where known.
    pub compute_seconds: Option<f64>,
    /// Seconds at the device's peak bandwidth, where known.
    pub memory_seconds: Option<f64>,
    /// The larger of the two, where both are known.
    pub seconds: Option<f64>,
    pub roof: Roof,
}

impl RooflinePrediction {
    /// The time no kernel can beat: the larger known roof (`None` when
    /// neither is known).
    pub fn lower_bound_seconds(&self) -> Option<f64> {
        match (self.compute_seconds, self.memory_seconds) {
            (Some(c), Some(m)) => Some(c.max(m)),
            (c, m) => c.or(m),
        }
    }
}

/// The roofline prediction of `workload` on `device` (see the module doc).
pub fn predict(device: &DeviceSpec, workload: Workload) -> RooflinePrediction {
    let (bytes, flops) = (workload.bytes(), workload.flops());
    let (compute_seconds, memory_seconds) = device.roof_seconds(flops, bytes, workload.half_precision());
    let (seconds, roof) = match (compute_seconds, memory_seconds) {
        (Some(c), Some(m)) => (Some(c.max(m)), if c > m { Roof::Compute } else { Roof::Memory }),
        _ => (None, Roof::Unknown),
    };
    RooflinePrediction {
        device: device.name.clone(),
        workload,
        bytes,
        flops,
        arithmetic_intensity: if bytes > 0.0 { flops / bytes } else { 0.0 },
        compute_seconds,
        memory_seconds,
        seconds,
        roof,
    }
}
