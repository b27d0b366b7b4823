//! Cooperative tensor products on CUDA: a tiled GEMM written with
//! `matmul2d` over threadgroup tiles filled by asynchronous copies, with
//! row and column reductions of each tile's accumulator, in the
//! forms that run on `wgmma` on sm_90a (K-major and MN-major operands, one
//! and two warpgroups, f16 and bf16) and in forms that take the scalar path
//! (a pitch `wgmma` cannot read, a dynamic k that is not a multiple of 16 at
//! the edge). Inputs are small integers, so every product is exact in f32
//! and the simulator and the GPU must both match a plain-loop reference
//! exactly. A second kernel chains two products, the first's accumulator
//! the second's left operand (on sm_90a from registers: `wgmma` with A in
//! registers, rounded to the input type under relaxed precision, exact
//! here because every sum is an integer the type holds). The simulator
//! runs everywhere; the GPU part prints `skipped: <reason>` and passes
//! when CUDA is unavailable. A third kernel gives each SIMD group its own
//! product and reduces it along both axes.

use enigma_backend::half::f32_to_f16_bits;
use enigma_cuda::CudaBackend;
use enigma_ir::text::parse;
use enigma_ir::{Kernel, Type};
use enigma_runtime::{Arg, Device, Runtime};
use std::sync::Arc;

/// One GEMM tile configuration: `bm×bn` output tiles over `simdgroups`
/// SIMD groups, k tiles of 64.
#[derive(Clone, Copy, Debug)]
struct Tile {
    elem: &'static str,
    bm: u32,
    bn: u32,
    simdgroups: u32,
    /// B stored N×K (K-major: `transpose_right`) instead of K×N.
    b_k_major: bool,
    /// A dynamic k: the k tile's own extent (`min(64, K - kt)`).
    dynamic_k: bool,
}

const BK: u32 = 64;

/// `C = A·B` (A M×K row-major; B K×N row-major, or N×K when `b_k_major`),
/// each threadgroup one `bm×bn` tile of C, the k loop over 64-deep tiles
/// copied into threadgroup memory 16 bytes at a time; then each tile's
/// column sums (`S[tile row][N]`) and row maxima (`R[tile column][M]`,
/// over the whole tile: columns past N hold zeros).
fn gemm_kernel(t: Tile) -> Kernel {
    let Tile { elem, bm, bn, simdgroups, b_k_major, dynamic_k } = t;
    let threads = simdgroups * 32;
    let (b_len, b_pieces, b_copy, b_view) = if b_k_major {
        (
            bn * BK,
            bn * BK / 8,
            "r = (i / 8u32)\n            cc = ((i % 8u32) * 8u32)\n            async_copy(Bs[((r * 64u32) + cc)], B[((((col0 + r) * K) + kt) + cc)], 8, (((col0 + r) < N) && ((kt + cc) < K)))".to_string(),
            format!("tensor(Bs, 0u32, kx, {bn}u32, 1u32, 64u32)"),
        )
    } else {
        (
            BK * bn,
            BK * bn / 8,
            format!("r = (i / {q}u32)\n            cc = ((i % {q}u32) * 8u32)\n            async_copy(Bs[((r * {bn}u32) + cc)], B[((((kt + r) * N) + col0) + cc)], 8, (((col0 + cc) < N) && ((kt + r) < K)))", q = bn / 8),
            format!("tensor(Bs, 0u32, {bn}u32, kx, 1u32, {bn}u32)"),
        )
    };
    let k = if dynamic_k { "dynamic_extent".to_string() } else { BK.to_string() };
    let kx = if dynamic_k { "min(64u32, (K - kt))" } else { "64u32" };
    let text = format!(
        "kernel coop_gemm(A: device {elem} read, B: device {elem} read, C: device f32 read_write, S: device f32 read_write, R: device f32 read_write, M: u32, N: u32, K: u32) {{
    threadgroup As: {elem}[{a_len}]
    threadgroup Bs: {elem}[{b_len}]
    var lid: u32
    var row0: u32
    var col0: u32
    var kt: u32
    var kx: u32
    var i: u32
    var r: u32
    var cc: u32
    cooperative c: cooperative_tensor<f32, {bm}, {bn}, simdgroups({simdgroups})>
    cooperative sums: cooperative_tensor<f32, 1, {bn}, simdgroups({simdgroups})>
    cooperative maxes: cooperative_tensor<f32, {bm}, 1, simdgroups({simdgroups})>

    lid = thread_index_in_threadgroup
    row0 = (threadgroup_position_in_grid.y * {bm}u32)
    col0 = (threadgroup_position_in_grid.x * {bn}u32)
    for i in (0u32, get_capacity(c), 1u32) {{
        c[i] = 0.0f32
    }}
    for kt in (0u32, K, 64u32) {{
        kx = {kx}
        for i in (lid, {a_pieces}u32, {threads}u32) {{
            r = (i / 8u32)
            cc = ((i % 8u32) * 8u32)
            async_copy(As[((r * 64u32) + cc)], A[((((row0 + r) * K) + kt) + cc)], 8, (((row0 + r) < M) && ((kt + cc) < K)))
        }}
        for i in (lid, {b_pieces}u32, {threads}u32) {{
            {b_copy}
        }}
        async_commit()
        async_wait(0)
        threadgroup_barrier(mem_threadgroup)
        matmul2d(matmul2d_descriptor({bm}, {bn}, {k}, false, {b_k_major}, false, multiply_accumulate), simdgroups({simdgroups}), tensor(As, 0u32, kx, {bm}u32, 1u32, 64u32), {b_view}, c)
        threadgroup_barrier(mem_threadgroup)
    }}
    cooperative_store(c, tensor(C, ((row0 * N) + col0), min({bn}u32, (N - col0)), min({bm}u32, (M - row0)), 1u32, N))
    reduce_columns(c, sums, sum)
    reduce_rows(c, maxes, max)
    cooperative_store(sums, tensor(S, ((threadgroup_position_in_grid.y * N) + col0), min({bn}u32, (N - col0)), 1u32, 1u32, N))
    cooperative_store(maxes, tensor(R, ((threadgroup_position_in_grid.x * M) + row0), 1u32, min({bm}u32, (M - row0)), 1u32, 1u32))
}}
",
        a_len = bm * BK,
        a_pieces = bm * BK / 8,
    );
    parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

/// Small integers in [-2, 2]: every product and sum below is exact in f32.
fn values(n: usize, seed: usize) -> Vec<f32> {
    (0..n).map(|i| ((i * 7 + seed * 13 + i / 5) % 5) as f32 - 2.0).collect()
}

fn bytes(elem: &str, v: &[f32]) -> Vec<u8> {
    v.iter()
        .flat_map(|x| if elem == "bf16" { ((x.to_bits() >> 16) as u16).to_le_bytes() } else { f32_to_f16_bits(*x).to_le_bytes() })
        .collect()
}

/// Runs `t` at M×N×K on `rt` and compares C with the plain-loop reference.
fn check(rt: &Runtime, t: Tile, (m, n, k): (u32, u32, u32)) {
    let kernel = gemm_kernel(t);
    let a = values((m * k) as usize, 1);
    let b = values((k * n) as usize, 2);
    let mut want = vec![0f32; (m * n) as usize];
    for i in 0..m as usize {
        for j in 0..n as usize {
            let mut s = 0f32;
            for kk in 0..k as usize {
                let bv = if t.b_k_major { b[j * k as usize + kk] } else { b[kk * n as usize + j] };
                s += a[i * k as usize + kk] * bv;
            }
            want[i * n as usize + j] = s;
        }
    }
    let (tiles_x, tiles_y) = (n.div_ceil(t.bn) as usize, m.div_ceil(t.bm) as usize);
    let (mu, nu, bm, bn) = (m as usize, n as usize, t.bm as usize, t.bn as usize);
    let mut want_s = vec![0f32; tiles_y * nu];
    for (ty, rows) in want_s.chunks_mut(nu).enumerate() {
        for (j, s) in rows.iter_mut().enumerate() {
            // In row order, as the reduction sums; rows past M are zeros.
            *s = (ty * bm..((ty + 1) * bm).min(mu)).fold(0f32, |acc, i| acc + want[i * nu + j]);
        }
    }
    let mut want_r = vec![0f32; tiles_x * mu];
    for (tx, cols) in want_r.chunks_mut(mu).enumerate() {
        for (i, r) in cols.iter_mut().enumerate() {
            let last = if (tx + 1) * bn > nu { 0f32 } else { f32::NEG_INFINITY };
            *r = (tx * bn..((tx + 1) * bn).min(nu)).fold(last, |acc, j| acc.max(want[i * nu + j]));
        }
    }
    let elem = if t.elem == "bf16" { Type::BF16 } else { Type::F16 };
    let ab = rt.buffer_from_bytes(elem, &bytes(t.elem, &a)).unwrap();
    let bb = rt.buffer_from_bytes(elem, &bytes(t.elem, &b)).unwrap();
    let cb = rt.buffer_from(&vec![f32::NAN; (m * n) as usize]).unwrap();
    let sb = rt.buffer_from(&vec![f32::NAN; tiles_y * nu]).unwrap();
    let rb = rt.buffer_from(&vec![f32::NAN; tiles_x * mu]).unwrap();
    let p = rt.pipeline(&kernel).unwrap_or_else(|e| panic!("{t:?}: {e}"));
    let groups = [n.div_ceil(t.bn), m.div_ceil(t.bm), 1];
    rt.dispatch_threadgroups(&p, &[Arg::from(&ab), Arg::from(&bb), Arg::from(&cb), Arg::from(&sb), Arg::from(&rb), Arg::u32(m), Arg::u32(n), Arg::u32(k)], groups, [t.simdgroups * 32, 1, 1])
        .unwrap_or_else(|e| panic!("{t:?}: {e}"));
    let got = cb.to_vec::<f32>().unwrap();
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(g, w, "{t:?} at {m}×{n}×{k} on {:?}: C[{}][{}] is {g}, the reference {w}", rt.device().kind, i / n as usize, i % n as usize);
    }
    assert_eq!(sb.to_vec::<f32>().unwrap(), want_s, "{t:?} at {m}×{n}×{k} on {:?}: column sums", rt.device().kind);
    assert_eq!(rb.to_vec::<f32>().unwrap(), want_r, "{t:?} at {m}×{n}×{k} on {:?}: row maxima", rt.device().kind);
}

const F16_64: Tile = Tile { elem: "f16", bm: 64, bn: 64, simdgroups: 4, b_k_major: false, dynamic_k: false };

/// The forms checked, with the sizes (awkward M and N; K a multiple of 8,
/// as the 16-byte copies need), each within the simulator's 32 KiB of
/// threadgroup memory.
fn cases() -> Vec<(Tile, (u32, u32, u32))> {
    vec![
        (F16_64, (128, 128, 256)),
        (F16_64, (100, 72, 136)),
        (Tile { elem: "bf16", ..F16_64 }, (64, 192, 128)),
        (Tile { b_k_major: true, ..F16_64 }, (136, 64, 192)),
        (Tile { bm: 128, bn: 128, simdgroups: 8, ..F16_64 }, (256, 200, 128)),
        (Tile { bn: 192, elem: "bf16", ..F16_64 }, (130, 384, 192)),
        (Tile { bm: 128, bn: 64, simdgroups: 4, b_k_major: true, ..F16_64 }, (128, 128, 64)),
        (Tile { bn: 32, ..F16_64 }, (64, 64, 128)),
        (Tile { dynamic_k: true, ..F16_64 }, (64, 64, 200)),
    ]
}

/// `O = (A·B)·V` for one `bm`-row block of A per threadgroup: A M×64,
/// B 64×64 and V 64×64 row-major in `elem`; the product `S = A·B` is the
/// next product's left operand (relaxed precision), over `simdgroups`.
fn chained_kernel(elem: &str, bm: u32, simdgroups: u32) -> Kernel {
    let threads = simdgroups * 32;
    let text = format!(
        "kernel coop_chain(A: device {elem} read, B: device {elem} read, V: device {elem} read, O: device f32 read_write, M: u32) {{
    threadgroup As: {elem}[{a_len}]
    threadgroup Bs: {elem}[4096]
    threadgroup Vs: {elem}[4096]
    var row0: u32
    var i: u32
    var r: u32
    var cc: u32
    cooperative s: cooperative_tensor<f32, {bm}, 64, simdgroups({simdgroups})>
    cooperative o: cooperative_tensor<f32, {bm}, 64, simdgroups({simdgroups})>

    row0 = (threadgroup_position_in_grid.x * {bm}u32)
    for i in (thread_index_in_threadgroup, {a_pieces}u32, {threads}u32) {{
        r = (i / 8u32)
        cc = ((i % 8u32) * 8u32)
        async_copy(As[((r * 64u32) + cc)], A[(((row0 + r) * 64u32) + cc)], 8, ((row0 + r) < M))
    }}
    for i in (thread_index_in_threadgroup, 512u32, {threads}u32) {{
        r = (i / 8u32)
        cc = ((i % 8u32) * 8u32)
        async_copy(Bs[((r * 64u32) + cc)], B[((r * 64u32) + cc)], 8, true)
        async_copy(Vs[((r * 64u32) + cc)], V[((r * 64u32) + cc)], 8, true)
    }}
    async_commit()
    async_wait(0)
    threadgroup_barrier(mem_threadgroup)
    matmul2d(matmul2d_descriptor({bm}, 64, 64, false, false, false, multiply), simdgroups({simdgroups}), tensor(As, 0u32, 64u32, {bm}u32, 1u32, 64u32), tensor(Bs, 0u32, 64u32, 64u32, 1u32, 64u32), s)
    matmul2d(matmul2d_descriptor({bm}, 64, 64, false, false, true, multiply), simdgroups({simdgroups}), s, tensor(Vs, 0u32, 64u32, 64u32, 1u32, 64u32), o)
    cooperative_store(o, tensor(O, (row0 * 64u32), 64u32, min({bm}u32, (M - row0)), 1u32, 64u32))
}}
",
        a_len = bm * 64,
        a_pieces = bm * 64 / 8,
    );
    parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

/// Runs the chained kernel at M rows and compares O with a plain loop.
fn check_chained(rt: &Runtime, elem: &str, bm: u32, simdgroups: u32, m: u32) {
    let (a, b, v) = (values(m as usize * 64, 3), values(64 * 64, 4), values(64 * 64, 5));
    let mut want = vec![0f32; m as usize * 64];
    for i in 0..m as usize {
        let srow: Vec<f32> = (0..64).map(|j| (0..64).fold(0f32, |acc, kk| acc + a[i * 64 + kk] * b[kk * 64 + j])).collect();
        for j in 0..64 {
            want[i * 64 + j] = (0..64).fold(0f32, |acc, kk| acc + srow[kk] * v[kk * 64 + j]);
        }
    }
    let ty = if elem == "bf16" { Type::BF16 } else { Type::F16 };
    let ab = rt.buffer_from_bytes(ty, &bytes(elem, &a)).unwrap();
    let bb = rt.buffer_from_bytes(ty, &bytes(elem, &b)).unwrap();
    let vb = rt.buffer_from_bytes(ty, &bytes(elem, &v)).unwrap();
    let ob = rt.buffer_from(&vec![f32::NAN; m as usize * 64]).unwrap();
    let p = rt.pipeline(&chained_kernel(elem, bm, simdgroups)).unwrap_or_else(|e| panic!("{e}"));
    rt.dispatch_threadgroups(&p, &[Arg::from(&ab), Arg::from(&bb), Arg::from(&vb), Arg::from(&ob), Arg::u32(m)], [m.div_ceil(bm), 1, 1], [simdgroups * 32, 1, 1])
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(ob.to_vec::<f32>().unwrap(), want, "{elem} {bm} rows over {simdgroups} SIMD groups at M = {m} on {:?}", rt.device().kind);
}

/// Each SIMD group on its own (`execution_simdgroup`): group g multiplies
/// rows `32·g…` of A (M×16) by B (16×16), then reduces its 32×16
/// accumulator along rows (sums) and columns (maxima); on CUDA the
/// reductions gather with shuffles.
fn simdgroup_kernel() -> Kernel {
    let text = "kernel coop_one_simdgroup(A: device f16 read, B: device f16 read, C: device f32 read_write, S: device f32 read_write, X: device f32 read_write) {
    var row0: u32
    cooperative c: cooperative_tensor<f32, 32, 16, simdgroup>
    cooperative sums: cooperative_tensor<f32, 32, 1, simdgroup>
    cooperative maxes: cooperative_tensor<f32, 1, 16, simdgroup>

    row0 = (((threadgroup_position_in_grid.x * simdgroups_per_threadgroup) + simdgroup_index_in_threadgroup) * 32u32)
    matmul2d(matmul2d_descriptor(32, 16, 16, false, false, false, multiply), simdgroup, tensor(A, (row0 * 16u32), 16u32, 32u32, 1u32, 16u32), tensor(B, 0u32, 16u32, 16u32, 1u32, 16u32), c)
    reduce_rows(c, sums, sum)
    reduce_columns(c, maxes, max)
    cooperative_store(c, tensor(C, (row0 * 16u32), 16u32, 32u32, 1u32, 16u32))
    cooperative_store(sums, tensor(S, row0, 1u32, 32u32, 1u32, 1u32))
    cooperative_store(maxes, tensor(X, ((row0 / 32u32) * 16u32), 16u32, 1u32, 1u32, 16u32))
}
";
    parse(text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

/// Runs [`simdgroup_kernel`] over `groups` SIMD groups (two per threadgroup).
fn check_simdgroup(rt: &Runtime, groups: u32) {
    let m = groups as usize * 32;
    let (a, b) = (values(m * 16, 6), values(16 * 16, 7));
    let c: Vec<f32> = (0..m * 16).map(|e| (0..16).fold(0f32, |acc, kk| acc + a[e / 16 * 16 + kk] * b[kk * 16 + e % 16])).collect();
    let sums: Vec<f32> = (0..m).map(|r| (0..16).fold(0f32, |acc, j| acc + c[r * 16 + j])).collect();
    let maxes: Vec<f32> = (0..groups as usize * 16).map(|e| (0..32).fold(f32::NEG_INFINITY, |acc, r| acc.max(c[(e / 16 * 32 + r) * 16 + e % 16]))).collect();
    let ab = rt.buffer_from_bytes(Type::F16, &bytes("f16", &a)).unwrap();
    let bb = rt.buffer_from_bytes(Type::F16, &bytes("f16", &b)).unwrap();
    let cb = rt.buffer_from(&vec![f32::NAN; m * 16]).unwrap();
    let sb = rt.buffer_from(&vec![f32::NAN; m]).unwrap();
    let xb = rt.buffer_from(&vec![f32::NAN; groups as usize * 16]).unwrap();
    let p = rt.pipeline(&simdgroup_kernel()).unwrap_or_else(|e| panic!("{e}"));
    rt.dispatch_threadgroups(&p, &[Arg::from(&ab), Arg::from(&bb), Arg::from(&cb), Arg::from(&sb), Arg::from(&xb)], [groups / 2, 1, 1], [64, 1, 1]).unwrap_or_else(|e| panic!("{e}"));
    let kind = rt.device().kind;
    assert_eq!(cb.to_vec::<f32>().unwrap(), c, "products on {kind:?}");
    assert_eq!(sb.to_vec::<f32>().unwrap(), sums, "row sums on {kind:?}");
    assert_eq!(xb.to_vec::<f32>().unwrap(), maxes, "column maxima on {kind:?}");
}

/// The chained forms: one and two warpgroups, f16 and bf16, a partial last block.
const CHAINED: [(&str, u32, u32, u32); 3] = [("f16", 64, 4, 100), ("bf16", 64, 4, 64), ("f16", 128, 8, 200)];

#[test]
fn the_simulator_matches_the_reference() {
    let rt = Runtime::new(Device::Sim).unwrap();
    for (t, size) in cases() {
        check(&rt, t, size);
    }
    for (elem, bm, sg, m) in CHAINED {
        check_chained(&rt, elem, bm, sg, m);
    }
    check_simdgroup(&rt, 4);
}

#[test]
fn cuda_matches_the_reference() {
    let backend = match CudaBackend::new() {
        Ok(b) => b,
        Err(e) => return enigma_conformance::skip(env!("CARGO_PKG_NAME"), &e),
    };
    let rt = Runtime::with_backend(Arc::new(backend));
    assert!(rt.device().features.contains(&enigma_ir::Feature::CooperativeTensors));
    for (t, size) in cases() {
        check(&rt, t, size);
    }
    for (elem, bm, sg, m) in CHAINED {
        check_chained(&rt, elem, bm, sg, m);
    }
    check_simdgroup(&rt, 4);
}
