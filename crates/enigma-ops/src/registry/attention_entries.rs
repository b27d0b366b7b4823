//! Registry entries of attention: decode (one sequence, batches with grouped
//! heads and per-sequence lengths) and prefill.

use super::entry::{entry, input, rounded, size, Case, Entry, PREFILL_DIMS};
use crate::check::Tolerance;
use crate::{upload, Mask, PrefillShape};
use enigma_kernels::library::{attention, attention_prefill, DType};
use enigma_kernels::TestRng;
use enigma_runtime::DeviceKind;
use std::cell::Cell;

pub(super) fn attention_entry(dtype: DType, fused: bool) -> Entry {
    let (name, description) = if fused {
        (format!("attention_decode_fused_{dtype}"), format!("attention decode over {dtype} K/V, one threadgroup per head (online softmax)"))
    } else {
        (format!("attention_decode_{dtype}"), format!("attention decode over {dtype} K/V: scores, softmax, weighted sum (seed 000 geometry)"))
    };
    entry(name, description, dtype.scalar(), &["heads", "s_len", "d"], &[4, 300, 128], &[32, 2048, 128], move |rt, shape, seed| {
        let (h, s, d) = (shape[0], shape[1], shape[2]);
        let mut rng = TestRng::new(seed);
        let (q, qb) = input(rt, dtype, &mut rng, h * d, -1.0, 1.0)?;
        let (k, kb) = input(rt, dtype, &mut rng, h * s * d, -1.0, 1.0)?;
        let (v, vb) = input(rt, dtype, &mut rng, h * s * d, -1.0, 1.0)?;
        let scale = 1.0 / (d as f32).sqrt();
        let want = attention::reference(&q, &k, &v, h, s, d, scale);
        let abs = 2e-6 * (1.0 + (s as f64).log2());
        Ok(Case {
            run: Box::new(move |ops| {
                if fused {
                    ops.attention_decode_fused(&qb, &kb, &vb, h, s, d, scale)
                } else {
                    ops.attention_decode(&qb, &kb, &vb, h, s, d, scale)
                }
            }),
            out_elem: dtype.scalar(),
            want,
            tol: Box::new(move |_| decode_tolerance(dtype, abs)),
            bytes: (2 * h * s * d + 2 * h * d) as u64 * size(dtype),
        })
    })
}

pub(super) fn attention_prefill_entry(dtype: DType, mask: Mask) -> Entry {
    let (name, kind) = match mask {
        Mask::None => (format!("attention_prefill_{dtype}"), ""),
        _ => (format!("attention_prefill_causal_{dtype}"), ", causal (torch's is_causal: aligned to the top left)"),
    };
    let description = format!("attention over whole sequences in {dtype}{kind}: FlashAttention-2 structure on SIMD-group matrices, grouped-query heads");
    entry(name, description, dtype.scalar(), &PREFILL_DIMS, &[1, 2, 1, 100, 100, 64], &[1, 8, 8, 1024, 1024, 128], move |rt, shape, seed| {
        let shape = PrefillShape { batch: shape[0], heads: shape[1], kv_heads: shape[2], s_q: shape[3], s_kv: shape[4], d: shape[5] };
        let mut rng = TestRng::new(seed);
        let (q, qb) = input(rt, dtype, &mut rng, shape.q_len(), -1.0, 1.0)?;
        let (k, kb) = input(rt, dtype, &mut rng, shape.kv_len(), -1.0, 1.0)?;
        let (v, vb) = input(rt, dtype, &mut rng, shape.kv_len(), -1.0, 1.0)?;
        let want = attention_prefill::reference(&q, &k, &v, shape, mask, 1.0 / (shape.d as f32).sqrt()).0;
        Ok(Case {
            run: Box::new(move |ops| ops.attention_prefill(&qb, &kb, &vb, shape, mask, None)),
            out_elem: dtype.scalar(),
            want,
            tol: Box::new(move |_| prefill_tolerance(dtype)),
            bytes: (2 * shape.q_len() + 2 * shape.kv_len()) as u64 * size(dtype),
        })
    })
}

/// The key count of sequence `b` of the registry's ragged decode: the
/// whole cache for even `b`, 5/8 of it (at least 1) for odd `b`.
pub(super) fn ragged_len(b: usize, s_len: usize) -> u32 {
    if b.is_multiple_of(2) { s_len as u32 } else { (s_len * 5 / 8).max(1) as u32 }
}

pub(super) fn attention_batch_entry(dtype: DType, ragged: bool) -> Entry {
    let (name, lens) = if ragged { ("attention_decode_ragged", "per-sequence lengths (odd sequences 5/8 of the cache)") } else { ("attention_decode_batch", "whole sequences") };
    let description = format!("attention decode of a batch over {dtype} K/V, grouped query heads, {lens}: one fused kernel per K/V head (online softmax), keys split over threadgroups for the GPU, then combined; on a GPU each run reads the next of 200 MB of K/V copies");
    entry(format!("{name}_{dtype}"), description, dtype.scalar(), &["batch", "q_heads", "kv_heads", "s_len", "d"], &[3, 6, 2, 77, 40], &[1, 32, 8, 8192, 128], move |rt, shape, seed| {
        let decode = crate::decode_shape(shape[0], shape[1], shape[2], shape[3], shape[4])?;
        let (b, hq, hkv, s, d) = (shape[0], shape[1], shape[2], shape[3], shape[4]);
        let mut rng = TestRng::new(seed);
        let (q, qb) = input(rt, dtype, &mut rng, b * hq * d, -1.0, 1.0)?;
        let (k, kb) = input(rt, dtype, &mut rng, b * hkv * s * d, -1.0, 1.0)?;
        let (v, vb) = input(rt, dtype, &mut rng, b * hkv * s * d, -1.0, 1.0)?;
        // On a GPU, copies of K and V spanning four times a 50 MB L2, one
        // pair per run in turn, so that timed runs read the cache from DRAM
        // as a decode step does.
        let cache_bytes = 2 * b * hkv * s * d * size(dtype) as usize;
        let copies = if rt.device().kind == DeviceKind::Simulator { 1 } else { (200usize << 20).div_ceil(cache_bytes).clamp(1, 64) };
        let mut caches = vec![(kb, vb)];
        for _ in 1..copies {
            caches.push((upload(rt, dtype.scalar(), &k)?, upload(rt, dtype.scalar(), &v)?));
        }
        let next = Cell::new(0usize);
        let lens: Option<Vec<u32>> = ragged.then(|| (0..b).map(|i| ragged_len(i, s)).collect());
        let lens_buf = lens.as_ref().map(|l| crate::upload_bytes(rt, l.iter().flat_map(|x| x.to_le_bytes()).collect())).transpose()?;
        let scale = 1.0 / (d as f32).sqrt();
        let want = attention::reference_batch(&q, &k, &v, &decode, lens.as_deref(), scale).0;
        let abs = 2e-6 * (1.0 + (s as f64).log2());
        let read: usize = lens.as_ref().map_or(b * s, |l| l.iter().map(|&x| x as usize).sum());
        Ok(Case {
            run: Box::new(move |ops| {
                let (kb, vb) = &caches[next.get() % caches.len()];
                next.set(next.get() + 1);
                Ok(ops.attention_decode_batch(&qb, kb, vb, &decode, lens_buf.as_ref(), scale, false)?.out)
            }),
            out_elem: dtype.scalar(),
            want,
            tol: Box::new(move |_| decode_tolerance(dtype, abs)),
            bytes: (2 * read * hkv * d + 2 * b * hq * d) as u64 * size(dtype),
        })
    })
}

/// The tolerance of a decode output whose values lie in [-1, 1], `abs`
/// for the f32 arithmetic: on SIMD-group matrices (f16 and bf16) the
/// weights are rounded to `dtype` before `P·V`, as in the prefill
/// ([`prefill_tolerance`]); the output is rounded once.
fn decode_tolerance(dtype: DType, abs: f64) -> Tolerance {
    let weights = if dtype == DType::F32 { 0.0 } else { 2.0 * dtype.unit_roundoff() };
    rounded(dtype, abs + weights, 1e-5)
}

/// The tolerance of an attention prefill output whose values lie in
/// [-1, 1]: the weights are rounded to `dtype` before `P·V` (at most one
/// unit roundoff of the weighted sum, which is at most 1 in magnitude,
/// twice for the sum of weights kept unrounded), and the output once.
pub(crate) fn prefill_tolerance(dtype: DType) -> Tolerance {
    rounded(dtype, 2.0 * dtype.unit_roundoff() + 1e-5, 1e-5)
}
