//! The fused decode's one selection ([`select`]): its whole plan for a
//! problem on a device, from the caller's overrides
//! ([`AttentionOptions`](crate::library::select::AttentionOptions)) and the
//! defaults of [`super::plan`]: the threads that fit the state and the
//! stages, the form (SIMD-group matrices or lanes that own keys), the load
//! width, lanes per key, keys per step, query heads per threadgroup, the
//! stages, the split over the sequence
//! ([`splits_for`], on a GPU) and who merges the splits.

use super::fused::fused_threads_that_fit;
use super::matrices::MatrixDecode;
use super::plan::*;
use super::shape::DecodeShape;
use crate::library::select::{argument, has_device_fences, Overrides, SelectError};
use crate::library::split::SplitSum;
use crate::library::{DType, ShapeError, SIMD_WIDTH};
use enigma_backend::{DeviceInfo, DeviceKind};
use enigma_ir::Feature;

/// A fused decode as the caller's buffers allow it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecodeProblem {
    pub dtype: DType,
    pub shape: DecodeShape,
    /// Elements per load the buffers allow: 4 (`float4`-style views of
    /// `q`, `K` and `V`) or 1.
    pub vec: u8,
    /// Whether the sizes of `q`, `K` and `V` are multiples of 16 bytes, as
    /// 16-byte words of f16/bf16 need.
    pub whole_words: bool,
    /// Per-sequence lengths are read ([`FusedConfig::ragged`](super::FusedConfig::ragged)).
    pub ragged: bool,
    /// The log-sum-exp of each row is written ([`FusedConfig::lse`](super::FusedConfig::lse)).
    pub lse: bool,
}

/// The fused decode of `problem` on `device`: on SIMD-group matrices
/// where they can run and the caller left them on
/// ([`AttentionOptions::matrices`](crate::library::select::AttentionOptions::matrices):
/// f16/bf16, `d` a multiple of 16 up to 256; [`DEFAULT_MATRIX_THREADS`]
/// and [`DEFAULT_MATRIX_STAGES`] shrunk to the device's threadgroup
/// memory), else on lanes that own keys (threadgroups of
/// `overrides.threads`, else of `default_threads` shrunk until the state
/// ([`fused_threads_that_fit`]) and the stages
/// ([`AttentionPlan::fitting_threads`]) fit; the defaults of
/// [`super::plan`] for every choice the caller left open); the keys split
/// [`splits_for`] ways on a GPU (1 on the
/// simulator, which gains nothing from splitting) and the splits merged by
/// the kernel where the device has device-scope fences, else by
/// [`combine`](super::combine()).
pub fn select(problem: &DecodeProblem, device: &DeviceInfo, overrides: &Overrides, default_threads: u32) -> Result<AttentionPlan, SelectError> {
    let plan = match uses_matrices(problem, device, overrides)? {
        // Asked for: its errors are the caller's.
        Some(true) => matrix_plan(problem, device, overrides)?,
        // By default, where the caller's threads leave it room.
        Some(false) => match matrix_plan(problem, device, overrides) {
            Ok(plan) => plan,
            Err(_) => lane_plan(problem, overrides, default_threads)?,
        },
        None => lane_plan(problem, overrides, default_threads)?,
    };
    let asked = overrides.attention;
    let fences = has_device_fences(device);
    let sum = match asked.split_sum {
        Some(SplitSum::LastThreadgroup) if !fences => {
            return Err(argument(
                "attention_decode",
                format!("the fused decode merges its splits with device-scope fences, which {} does not have (on Metal they need MSL 3.2); use split_sum Reduction", device.name),
            ))
        }
        Some(sum) => sum,
        None if fences => SplitSum::LastThreadgroup,
        None => SplitSum::Reduction,
    };
    let splits = match (asked.splits, device.kind) {
        (Some(s), _) => s.max(1),
        (None, DeviceKind::Simulator) => 1,
        (None, _) => splits_for(&plan, device.compute_units, threadgroups_per_compute_unit(&plan, device.max_threadgroup_memory_bytes), sum == SplitSum::LastThreadgroup),
    };
    Ok(plan.with_splits(splits).with_split_sum(sum))
}

/// Whether the fused decode of `problem` runs on SIMD-group matrices
/// (`Some(true)`: asked for; `Some(false)`: by default, where its plan
/// fits the caller's threads), or on lanes (`None`): as
/// `overrides.attention.matrices` says (asking for it where it cannot run
/// is an error), else where it can run and the caller set none of the
/// options of the lane form (lanes per key, keys per step, prefetch). It
/// runs f16 and bf16 with `d` a multiple of 16 up to 256 on 16-byte
/// aligned rows ([`MatrixDecode::fits`], vector loads, whole 16-byte
/// words) on a device with SIMD-group matrices.
fn uses_matrices(problem: &DecodeProblem, device: &DeviceInfo, overrides: &Overrides) -> Result<Option<bool>, SelectError> {
    let asked = overrides.attention;
    let possible = MatrixDecode::fits(problem.dtype, problem.shape.d) && problem.vec == 4 && problem.whole_words && device.features.contains(&Feature::SimdgroupMatrix);
    match asked.matrices {
        Some(true) if !possible => Err(argument(
            "attention_decode",
            format!(
                "the decode on SIMD-group matrices takes f16 or bf16 with d a multiple of 16 up to 256, vector loads and buffers of whole 16-byte words on a device with SIMD-group matrices; this one is {} with d = {} on {}",
                problem.dtype, problem.shape.d, device.name
            ),
        )),
        Some(true) => Ok(Some(true)),
        Some(false) => Ok(None),
        None => Ok((possible && asked.lanes_per_key.is_none() && asked.keys_per_step.is_none() && asked.prefetch.is_none()).then_some(false)),
    }
}

/// The matrix form: `overrides.threads` (else [`DEFAULT_MATRIX_THREADS`]),
/// the asked stages (else [`DEFAULT_MATRIX_STAGES`]), keys per SIMD group
/// and step (`keys_per_step`, 16 or 32, else [`DEFAULT_MATRIX_BLOCK`]) and
/// query heads per threadgroup (else [`default_matrix_heads`]); where the device's
/// threadgroup memory does not hold them, fewer stages (down to 1), then
/// fewer SIMD groups, among the choices the caller left open.
fn matrix_plan(problem: &DecodeProblem, device: &DeviceInfo, overrides: &Overrides) -> Result<AttentionPlan, SelectError> {
    let DecodeProblem { dtype, shape, vec, ragged, lse, .. } = *problem;
    let asked = overrides.attention;
    let heads = asked.heads_per_threadgroup.unwrap_or(default_matrix_heads(shape.group()));
    let threads = overrides.threads.unwrap_or(DEFAULT_MATRIX_THREADS);
    let mut plan = plan(dtype, &shape, vec, threads)?.with_outputs(ragged, lse).with_heads_per_threadgroup(heads, false)?.with_matrices(asked.keys_per_step.unwrap_or(DEFAULT_MATRIX_BLOCK))?;
    plan = plan.with_stages(asked.stages.unwrap_or(DEFAULT_MATRIX_STAGES).max(1))?;
    let limit = device.max_threadgroup_memory_bytes;
    while plan.fused_threadgroup_memory() > limit {
        let t = plan.fused.threads[0];
        if asked.stages.is_none() && plan.stages > 1 {
            plan = plan.with_stages(plan.stages - 1)?;
        } else if overrides.threads.is_none() && t > SIMD_WIDTH {
            plan = plan.with_fused_threads(t - SIMD_WIDTH);
        } else {
            let name = plan.fused_config().name();
            return Err(ShapeError::new(name, format!("needs {} bytes of threadgroup memory (limit {limit})", plan.fused_threadgroup_memory())).into());
        }
    }
    Ok(plan)
}

/// The form on lanes that own keys: threadgroups of `overrides.threads`
/// (kept, and checked), else of `default_threads` shrunk until the state
/// ([`fused_threads_that_fit`]) and the stages
/// ([`AttentionPlan::fitting_threads`]) fit; every choice of
/// `overrides.attention` that is set, the defaults of [`super::plan`]
/// otherwise.
fn lane_plan(problem: &DecodeProblem, overrides: &Overrides, default_threads: u32) -> Result<AttentionPlan, SelectError> {
    let DecodeProblem { dtype, shape, vec, whole_words, ragged, lse } = *problem;
    let asked = overrides.attention;
    let group = shape.q_heads.checked_div(shape.kv_heads).unwrap_or(1).max(1);
    let threads = match overrides.threads {
        Some(t) => t,
        None => {
            let heads = asked.heads_per_threadgroup.unwrap_or(default_heads_per_threadgroup(group)).max(1);
            default_threads.min(fused_threads_that_fit(shape.d, vec, heads))
        }
    };
    let plan = plan(dtype, &shape, vec, threads)?;
    let heads = asked.heads_per_threadgroup.unwrap_or(plan.heads_per_threadgroup);
    let prefetch = asked.prefetch.unwrap_or(DEFAULT_PREFETCH);
    let keys = asked.keys_per_step.unwrap_or(DEFAULT_KEYS_PER_STEP);
    let mut plan = plan.with_keys_per_step(keys).with_outputs(ragged, lse).with_heads_per_threadgroup(heads, prefetch)?;
    if !whole_words {
        plan = plan.without_wide_words();
    }
    if let Some(lanes) = asked.lanes_per_key {
        plan = plan.with_lanes_per_key(lanes)?;
    }
    let stages = asked.stages.unwrap_or_else(|| default_stages(&plan, overrides.threads.is_some()));
    plan = plan.with_stages(stages)?;
    if overrides.threads.is_none() {
        plan = plan.fitting_threads();
    }
    plan.check_fused()?;
    Ok(plan)
}
