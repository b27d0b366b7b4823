//! The kernel library's checked runs (`enigma_ops::Entry::run_with`: random
//! inputs from `enigma_kernels::TestRng`, the f64 reference each registry
//! entry carries, its tolerance) on awkward shapes, for every backend: the
//! simulator in `enigma-ops/tests/registry_sizes.rs`, a CUDA GPU in
//! `enigma-cuda/tests/library.rs`.

use enigma_ops::{AttentionOptions, CheckOutcome, Entry, GemmOptions, Options, QmatmulOptions, SplitSum};
use enigma_runtime::Runtime;

/// Flat vectors: one element, around one SIMD group, not a multiple of 4,
/// and just past 4096.
pub const FLAT: [usize; 6] = [1, 31, 33, 1000, 4096, 4097];
/// `[rows, d]` (and GEMV's `[m, k]`): a column, odd widths, a long odd row,
/// a long row of whole vectors, and more rows than one GEMV threadgroup.
pub const ROWS: [[usize; 2]; 6] = [[3, 1], [5, 33], [2, 1000], [1, 4097], [2, 4096], [37, 64]];
/// `[heads, s_len, d]` with seed 000's D = 128: one key, one SIMD group and
/// one more, more keys than a 256-thread scores threadgroup; d = 36
/// (vectors, fewer than 32 per row), 33 (scalar only) and the largest head
/// dimension, 1024 (8 register slots per lane with vectors, 32 without).
pub const ATTENTION: [[usize; 3]; 6] = [[1, 1, 128], [2, 33, 128], [3, 300, 128], [2, 40, 36], [1, 7, 33], [1, 3, 1024]];

/// Batched attention decode `[batch, q_heads, kv_heads, s_len, d]`: one of
/// everything, grouped heads at odd lengths and dimensions, a dimension that
/// is no multiple of 4, a long sequence over one K/V head, and a batch of
/// grouped heads at D = 64 (on SIMD-group matrices in f16/bf16).
pub const ATTENTION_BATCH: [[usize; 5]; 5] = [[1, 1, 1, 1, 1], [3, 6, 2, 77, 40], [2, 4, 4, 33, 7], [1, 8, 1, 300, 128], [2, 8, 2, 45, 64]];
/// Quantized matmul `[m, n, k]`: one column, odd widths and a partial tile,
/// one group of 32 (k = 32, 96) or 64, eight rows and two blocks of 8.
pub const QMATMUL: [[usize; 3]; 6] = [[1, 1, 32], [3, 7, 64], [8, 33, 128], [1, 100, 96], [16, 12, 256], [2, 130, 32]];

/// Quantized matmul on fragment-ordered weights (N a multiple of 16, K of
/// 64): one unit, rows past a 16-row tile, column counts the 128-column
/// tile does not divide (48, 112, 144: down to one unit per SIMD group),
/// three units deep, and 17 rows (a 32-row tile, half of it past M).
pub const QMATMUL_FRAGMENTS: [[usize; 3]; 6] = [[1, 16, 64], [3, 48, 128], [8, 32, 192], [16, 112, 256], [2, 144, 64], [17, 16, 128]];

/// Matrix multiply `[m, n, k]`: one element, odd sizes, partial tiles along
/// every side, and more than one tile of K.
pub const MATMUL: [[usize; 3]; 5] = [[1, 1, 1], [7, 7, 7], [33, 100, 7], [65, 64, 33], [2, 130, 100]];

/// Attention prefill `[batch, heads, kv_heads, s_q, s_kv, d]`: one query and
/// one key, a partial block each way, fewer queries than keys and more,
/// grouped heads, both head dimensions.
pub const ATTENTION_PREFILL: [[usize; 6]; 5] = [[1, 1, 1, 1, 1, 64], [2, 2, 1, 7, 40, 128], [1, 4, 2, 70, 33, 64], [1, 2, 2, 65, 65, 128], [1, 8, 2, 3, 100, 64]];

/// Running sums and products over the middle axis `[outer, axis, inner]`:
/// by chunks of the axis with 4-wide columns (a last chunk short, several
/// outer slices, two threadgroups across a row), with scalar columns (a
/// row not a multiple of 4), an axis of two chunks; a thread per column
/// (an axis too short to cut).
pub const AXIS_SCAN: [[usize; 3]; 6] = [[1, 1000, 8], [2, 257, 36], [1, 1000, 37], [3, 64, 5], [1, 70, 1100], [64, 7, 13]];

/// Depthwise 3×3 convolution `[batch, channels, h, w]`: rows of whole
/// 16-byte words in every type (a last block of rows short), in f32 only
/// (rows of 12 and 20: the tiled kernel in f16/bf16), a plane wider than
/// a tile, a single row.
pub const DEPTHWISE: [[usize; 4]; 5] = [[2, 4, 7, 16], [1, 3, 5, 12], [2, 3, 10, 20], [1, 2, 40, 40], [1, 3, 1, 8]];

/// Dense 3×3 convolution `[batch, in_channels, out_channels, h, w]`: a
/// few channels (the unfolding and the GEMM), and 64 and 128 input
/// channels (the implicit GEMM where the device's products are `wgmma`)
/// with output channels and pixels that fill no whole tile, more than
/// one tile of each.
pub const CONV: [[usize; 5]; 4] = [[2, 3, 5, 10, 16], [2, 64, 24, 7, 9], [1, 128, 70, 12, 12], [3, 64, 64, 16, 16]];

/// The awkward shapes `entry` is checked at: by its operation (quantized
/// and plain matrix multiply) or by the number of its shape dimensions.
pub fn shapes(entry: &Entry) -> Vec<Vec<usize>> {
    if entry.name.starts_with("qmatmul_fragments_") {
        return QMATMUL_FRAGMENTS.iter().map(|s| s.to_vec()).collect();
    }
    if entry.name.starts_with("attention_prefill_") {
        return ATTENTION_PREFILL.iter().map(|s| s.to_vec()).collect();
    }
    if entry.name.starts_with("qmatmul_") {
        return QMATMUL.iter().map(|s| s.to_vec()).collect();
    }
    if entry.name.starts_with("matmul_") {
        return MATMUL.iter().map(|s| s.to_vec()).collect();
    }
    if entry.name.starts_with("cumsum_axis_") || entry.name.starts_with("cumprod_axis_") {
        return AXIS_SCAN.iter().map(|s| s.to_vec()).collect();
    }
    if entry.name.starts_with("conv2d_depthwise_") {
        return DEPTHWISE.iter().map(|s| s.to_vec()).collect();
    }
    if entry.name.starts_with("conv2d_") {
        return CONV.iter().map(|s| s.to_vec()).collect();
    }
    match entry.shape_names.len() {
        1 => FLAT.iter().map(|&n| vec![n]).collect(),
        2 => ROWS.iter().map(|s| s.to_vec()).collect(),
        5 => ATTENTION_BATCH.iter().map(|s| s.to_vec()).collect(),
        _ => ATTENTION.iter().map(|s| s.to_vec()).collect(),
    }
}

/// Whether the shape allows the vector kernels: any length for flat
/// vectors, a last dimension that is a multiple of 4 otherwise.
pub fn vector_shape(shape: &[usize]) -> bool {
    shape.len() == 1 || shape.last().is_some_and(|d| d % 4 == 0)
}

/// One checked run of `entry` at `shape` with `options`; panics, naming the
/// entry, the shape and the options, when it fails or leaves its tolerance,
/// and when it compares a number of elements other than the operation
/// produces.
pub fn check(rt: &Runtime, entry: &Entry, shape: &[usize], options: &Options) -> CheckOutcome {
    let outcome = entry.run_with(rt, shape, options).unwrap_or_else(|e| panic!("{} {shape:?} {options:?}: {e}", entry.name));
    assert!(outcome.passed, "{outcome}");
    let elems = match entry.name.as_str() {
        n if n.starts_with("sum_") || n.starts_with("max_") || n.starts_with("min_") => {
            if n.contains("_rows_") {
                shape[0]
            } else {
                1
            }
        }
        n if n.starts_with("gemv_") => shape[0],
        n if n.starts_with("qmatmul_") || n.starts_with("matmul_") => shape[0] * shape[1],
        n if n.starts_with("attention_decode_batch_") || n.starts_with("attention_decode_ragged_") => shape[0] * shape[1] * shape[4],
        n if n.starts_with("attention_prefill_") => shape[0] * shape[1] * shape[3] * shape[5],
        n if n.starts_with("attention_") => shape[0] * shape[2],
        // [batch, in_channels, out_channels, h, w] to [batch, out_channels, h, w].
        n if n.starts_with("conv2d_") && !n.starts_with("conv2d_depthwise_") => shape[0] * shape[2] * shape[3] * shape[4],
        _ => shape.iter().product(),
    };
    assert_eq!(outcome.checked, elems, "{outcome}");
    outcome
}

/// The kernel of the run's first dispatch.
pub fn first_kernel(outcome: &CheckOutcome) -> &str {
    &outcome.launches.first().expect("at least one dispatch").kernel
}

/// The options every entry is checked with at `shape`: scalar kernels
/// (except `scale_vec4` entries, which insist on vector loads), then the
/// entry's own choice (vector loads where the shape allows), then
/// [`k_split_options`] where there are some, then for the FP4/INT4 decode
/// kernel two chunks staged ahead by asynchronous copies
/// (`QmatmulOptions::stages`; by default it loads into registers), and for
/// the fused attention decode its keys split three ways, merged by the
/// combine and by the kernel ([`attention_split_options`]).
pub fn option_sets(entry: &Entry, shape: &[usize]) -> Vec<Options> {
    let mut sets = vec![];
    if !entry.name.starts_with("scale_vec4") {
        sets.push(Options { vectorize: Some(false), ..Options::default() });
    }
    sets.push(Options::default());
    sets.extend(k_split_options(entry, shape));
    if matches!(entry.name.as_str(), "qmatmul_fp4" | "qmatmul_int4") {
        sets.push(Options { qmatmul: QmatmulOptions { stages: Some(2), ..QmatmulOptions::default() }, ..Options::default() });
    }
    sets.extend(attention_split_options(entry));
    sets
}

/// For the fused attention decode (`attention_decode_fused_*`,
/// `attention_decode_batch_*`, `attention_decode_ragged_*`), its keys split
/// three ways (`AttentionOptions::splits`; by default a GPU splits only
/// long sequences, and the simulator never), merged by the combine's
/// second dispatch and by the split kernel's last threadgroup
/// (`AttentionOptions::split_sum`).
pub fn attention_split_options(entry: &Entry) -> Vec<Options> {
    let fused = ["attention_decode_fused_", "attention_decode_batch_", "attention_decode_ragged_"].iter().any(|p| entry.name.starts_with(p));
    if !fused {
        return vec![];
    }
    [SplitSum::Reduction, SplitSum::LastThreadgroup]
        .map(|sum| Options { attention: AttentionOptions { splits: Some(3), split_sum: Some(sum), ..AttentionOptions::default() }, ..Options::default() })
        .to_vec()
}

/// For a quantized matmul `[m, n, k]` of at least two quantization groups
/// (the registry's group: the largest of 128, 64, 32 dividing `k`), K split
/// two ways over threadgroups (`Options::k_splits`; by default a GPU splits
/// only shapes far larger than these, and the simulator never): the decode
/// kernel's split-K pass and the reduction (the tensor-core kernel's above
/// 8 rows). 3 groups split 2 + 1. None for MLX's affine format, whose
/// kernel splits K over the lanes of a SIMD group only.
pub fn k_split_options(entry: &Entry, shape: &[usize]) -> Option<Options> {
    let k = *shape.get(2)?;
    let group = enigma_kernels::library::quant::GROUPS.iter().rev().copied().find(|g| k % g == 0)?;
    (entry.name.starts_with("qmatmul_") && entry.name != "qmatmul_mlx_affine" && k / group >= 2).then(|| Options { gemm: GemmOptions { k_splits: Some(2), ..GemmOptions::default() }, ..Options::default() })
}
