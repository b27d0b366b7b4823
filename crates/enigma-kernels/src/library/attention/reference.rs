//! The decode's f64 references, which every test and the registry check
//! the kernels against.

use super::shape::DecodeShape;

/// The f64 reference of a batch: `out` (`[batch, q_heads, d]`) and the
/// natural log-sum-exp of each row's scaled scores (`-inf` for an empty
/// sequence, whose output is zeros); sequence `b` uses its first
/// `seq_lens[b]` keys (all `s_len` when `None`).
pub fn reference_batch(q: &[f32], k: &[f32], v: &[f32], shape: &DecodeShape, seq_lens: Option<&[u32]>, scale: f32) -> (Vec<f64>, Vec<f64>) {
    let (hq, hkv, s_len, d) = (shape.q_heads as usize, shape.kv_heads as usize, shape.s_len as usize, shape.d as usize);
    let group = hq / hkv;
    let rows = shape.batch as usize * hq;
    let mut out = vec![0.0; rows * d];
    let mut lse = vec![f64::NEG_INFINITY; rows];
    for r in 0..rows {
        let (b, h) = (r / hq, r % hq);
        let len = seq_lens.map_or(s_len, |l| (l[b] as usize).min(s_len));
        let seq = b * hkv + h / group;
        let qh = &q[r * d..(r + 1) * d];
        let scores: Vec<f64> = (0..len)
            .map(|s| {
                let kr = &k[(seq * s_len + s) * d..(seq * s_len + s + 1) * d];
                qh.iter().zip(kr).map(|(&a, &b)| a as f64 * b as f64).sum::<f64>() * scale as f64
            })
            .collect();
        if scores.is_empty() {
            continue;
        }
        let m = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let e: Vec<f64> = scores.iter().map(|s| (s - m).exp()).collect();
        let total: f64 = e.iter().sum();
        lse[r] = m + total.ln();
        for (s, &p) in e.iter().enumerate() {
            let vr = &v[(seq * s_len + s) * d..(seq * s_len + s + 1) * d];
            for (o, &vv) in out[r * d..(r + 1) * d].iter_mut().zip(vr) {
                *o += p / total * vv as f64;
            }
        }
    }
    (out, lse)
}

/// The f64 reference of one sequence with one K/V head per query head:
/// `out[h, :]` for every head.
pub fn reference(q: &[f32], k: &[f32], v: &[f32], heads: usize, s_len: usize, d: usize, scale: f32) -> Vec<f64> {
    let shape = DecodeShape::heads(heads as u32, s_len as u32, d as u32);
    reference_batch(q, k, v, &shape, None, scale).0
}
