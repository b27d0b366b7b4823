//! RMSNorm and LayerNorm over rows, in two forms that [`plan`] chooses
//! between from the row's length and element type:
//!
//! * **threadgroup per row** ([`rms_norm`], [`layer_norm`]): the same
//!   cached / streaming forms as [`super::softmax`] (planned by
//!   [`super::softmax::plan_rows`]), the reductions across the threadgroup
//!   with a barrier. For long rows.
//! * **lanes per row** ([`norm_lanes`]): rows of at most
//!   [`LANE_ROW_BYTES`] bytes held in registers by `lanes` lanes of a SIMD
//!   group (32, or the smallest power of two covering the row's vectors,
//!   so one SIMD group holds several short rows), at most
//!   [`MAX_CACHED_ITEMS`] vector loads each; a threadgroup holds
//!   `threads / lanes` rows. The reductions are butterflies of
//!   `simd_shuffle_xor` within the row's lanes (`simd_sum` for 32 lanes):
//!   no threadgroup memory, no barrier. f16 and bf16 rows whose length is
//!   a multiple of 8 move 16-byte words (8 elements, bound as `uint4`);
//!   rows that are multiples of 4 move `float4` / `half4` vectors.
//!
//! * RMSNorm: `y = x · rsqrt(mean(x²) + eps) · w`. One reduction (in the
//!   threadgroup form, one barrier).
//! * LayerNorm: `y = (x - mean) · rsqrt(var + eps) · w + b`. Cached (and in
//!   the lanes form): the mean, then the centred sum of squares from
//!   registers (two reductions, one read of the row). Streaming: sums of `x - K` and `(x - K)²` with the
//!   shift `K = x[row, 0]` (the shifted-data variance, stable when `K` is
//!   close to the mean) in one reduction, then the normalising pass.
//!
//! Parameters: `x, w, [b,] y, d, eps` (vector views `x4, w4, [b4,] y4` when
//! `vec = 4`, `uint4` views `x8, w8, [b8,] y8` when `vec = 8`), `eps` an
//! f32 by-value parameter, and `rows` for the lanes form; `w` and `b` have
//! `d` elements of the same type as `x`.

use super::softmax::{load_cached, plan_rows, row_ctx, RowConfig, RowOptions, RowPlan};
use super::*;
use enigma_ir::{Access, Kernel, Scalar, Type};

/// The longest row (in bytes) the lanes form takes: 64 bytes (four
/// 16-byte words) for each of a SIMD group's 32 lanes. Longer rows run a
/// threadgroup per row.
pub const LANE_ROW_BYTES: usize = 64 * SIMD_WIDTH as usize;

crate::kernel_args! {
    /// The arguments of [`rms_norm`], [`layer_norm`] and [`norm_lanes`]
    /// (module docs); `b`, `b4`, `b8` for LayerNorm only, the `uint4` views
    /// `x8`, `w8`, `b8`, `y8` and `rows` for the lanes form only.
    pub struct NormArgs {
        X x: buffer,
        X4 x4: buffer,
        W w: buffer,
        W4 w4: buffer,
        W8 w8: optional,
        X8 x8: optional,
        B b: optional,
        B4 b4: optional,
        B8 b8: optional,
        Y y: buffer,
        Y4 y4: buffer,
        Y8 y8: optional,
        D d: u32,
        ROWS rows: u32,
        EPS eps: f32,
    }
}

fn params(k: &mut KernelBuilder, dtype: DType, vec: u8, bias: bool) -> (Mem, Mem, Option<Mem>, Mem, Ex, Ex) {
    type P = NormArgs;
    let [xn, wn, bn, yn] = if vec == 4 { [P::X4, P::W4, P::B4, P::Y4] } else { [P::X, P::W, P::B, P::Y] };
    let x = k.buffer(xn, dtype.ty(vec), Access::Read);
    let w = k.buffer(wn, dtype.ty(vec), Access::Read);
    let b = bias.then(|| k.buffer(bn, dtype.ty(vec), Access::Read));
    let y = k.buffer(yn, dtype.ty(vec), Access::ReadWrite);
    let d = k.value(P::D, Type::U32);
    let eps = k.value(P::EPS, Type::F32);
    (x, w, b, y, d, eps)
}

/// `rms_norm_{dtype}[_vec4]_{c<items>|online}`.
///
/// # Panics
/// When `vec` is not 1 or 4.
pub fn rms_norm(dtype: DType, vec: u8, items: u32) -> Kernel {
    assert_vec(vec);
    let cfg = RowConfig { dtype, vec, items };
    let mut k = KernelBuilder::new(format!("rms_norm_{}", cfg.suffix()));
    let (x, w, _, y, d, eps) = params(&mut k, dtype, vec, false);
    let ctx = row_ctx(&mut k, d, vec);
    let inv_d = k.let_("inv_d", 1.0f32 / d.cast(Type::F32));
    if items > 0 {
        let regs = load_cached(&mut k, ctx, x, vec, items, 0.0);
        let mut ss = hsum(regs[0].0.get() * regs[0].0.get());
        for &(v, _) in &regs[1..] {
            ss = ss + hsum(v.get() * v.get());
        }
        let total = threadgroup_reduce(&mut k, "ss", &[(ReduceOp::Sum, ss)])[0];
        let r = k.let_("r", rsqrt(total * inv_d + eps));
        for &(v, idx) in &regs {
            k.if_(idx.lt(ctx.dv), |k| store_f32(k, y, ctx.base + idx, v.get() * r * load_f32(w, idx)));
        }
    } else {
        let ss = k.var("ss", splat(0.0, vec));
        k.for_range("j", ctx.tid, ctx.dv, ctx.tpg, |k, j| {
            let v = k.let_("v", load_f32(x, ctx.base + j));
            k.assign(ss, fma(v, v, ss.get()));
        });
        let total = threadgroup_reduce(&mut k, "ss", &[(ReduceOp::Sum, hsum(ss.get()))])[0];
        let r = k.let_("r", rsqrt(total * inv_d + eps));
        k.for_range("j2", ctx.tid, ctx.dv, ctx.tpg, |k, j| {
            store_f32(k, y, ctx.base + j, load_f32(x, ctx.base + j) * r * load_f32(w, j));
        });
    }
    finish(k)
}

/// `layer_norm_{dtype}[_vec4]_{c<items>|online}`.
///
/// # Panics
/// When `vec` is not 1 or 4.
pub fn layer_norm(dtype: DType, vec: u8, items: u32) -> Kernel {
    assert_vec(vec);
    let cfg = RowConfig { dtype, vec, items };
    let mut k = KernelBuilder::new(format!("layer_norm_{}", cfg.suffix()));
    let (x, w, b, y, d, eps) = params(&mut k, dtype, vec, true);
    let b = b.expect("layer norm has a bias");
    let ctx = row_ctx(&mut k, d, vec);
    let inv_d = k.let_("inv_d", 1.0f32 / d.cast(Type::F32));
    if items > 0 {
        let regs = load_cached(&mut k, ctx, x, vec, items, 0.0);
        let mut s = hsum(regs[0].0.get());
        for &(v, _) in &regs[1..] {
            s = s + hsum(v.get());
        }
        let total = threadgroup_reduce(&mut k, "sum", &[(ReduceOp::Sum, s)])[0];
        let mean = k.let_("mean", total * inv_d);
        // Centred squares; slots past the row's end hold 0, so mask them.
        let mut sq: Option<Ex> = None;
        for (it, &(v, idx)) in regs.iter().enumerate() {
            let c = k.let_(&format!("c{it}"), select(v.get() - mean, splat(0.0, vec), idx.ge(ctx.dv)));
            let term = hsum(c * c);
            sq = Some(sq.map_or(term, |s| s + term));
        }
        let var_sum = threadgroup_reduce(&mut k, "sq", &[(ReduceOp::Sum, sq.expect("items > 0"))])[0];
        let rstd = k.let_("rstd", rsqrt(var_sum * inv_d + eps));
        for &(v, idx) in &regs {
            k.if_(idx.lt(ctx.dv), |k| {
                let out = fma((v.get() - mean) * rstd, load_f32(w, idx), load_f32(b, idx));
                store_f32(k, y, ctx.base + idx, out);
            });
        }
        return finish(k);
    }
    // Streaming: shifted sums with K = x[row, 0], then the normalising pass.
    let (mean, rstd) = {
        let first = load_f32(x, ctx.base);
        let shift = k.let_("shift", if vec == 4 { first.x() } else { first });
        let s1 = k.var("s1", splat(0.0, vec));
        let s2 = k.var("s2", splat(0.0, vec));
        k.for_range("j", ctx.tid, ctx.dv, ctx.tpg, |k, j| {
            let c = k.let_("c", load_f32(x, ctx.base + j) - shift);
            k.assign(s1, s1.get() + c);
            k.assign(s2, fma(c, c, s2.get()));
        });
        let totals = threadgroup_reduce(&mut k, "sums", &[(ReduceOp::Sum, hsum(s1.get())), (ReduceOp::Sum, hsum(s2.get()))]);
        let m1 = k.let_("m1", totals[0] * inv_d);
        let var = k.let_("var", max(totals[1] * inv_d - m1 * m1, f(0.0)));
        (k.let_("mean", shift + m1), k.let_("rstd", rsqrt(var + eps)))
    };
    k.for_range("j2", ctx.tid, ctx.dv, ctx.tpg, |k, j| {
        let out = fma((load_f32(x, ctx.base + j) - mean) * rstd, load_f32(w, j), load_f32(b, j));
        store_f32(k, y, ctx.base + j, out);
    });
    finish(k)
}

/// The lanes form's shape ([`norm_lanes`]): element type, vector width
/// (1, 4, or 8 for 16-byte words of f16/bf16), lanes per row (a power of
/// two up to 32) and vector loads per lane.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LanesConfig {
    pub dtype: DType,
    pub vec: u8,
    pub lanes: u32,
    pub items: u32,
}

impl LanesConfig {
    fn suffix(&self) -> String {
        let vec = if self.vec == 8 { "_vec8" } else { vec_suffix(self.vec) };
        format!("{}{vec}_l{}_c{}", self.dtype, self.lanes, self.items)
    }
}

/// Which kernel a planned norm runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NormForm {
    /// A threadgroup per row ([`rms_norm`], [`layer_norm`]).
    Threadgroup(RowConfig),
    /// `lanes` lanes per row ([`norm_lanes`]).
    Lanes(LanesConfig),
}

/// A planned RMSNorm or LayerNorm over `[rows, d]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NormPlan {
    pub form: NormForm,
    pub rows: u32,
    pub d: u32,
    pub dispatch: Dispatch,
}

impl NormPlan {
    /// The kernel: LayerNorm when `layer`, else RMSNorm.
    pub fn kernel(&self, layer: bool) -> Kernel {
        match self.form {
            NormForm::Threadgroup(c) if layer => layer_norm(c.dtype, c.vec, c.items),
            NormForm::Threadgroup(c) => rms_norm(c.dtype, c.vec, c.items),
            NormForm::Lanes(c) => norm_lanes(c, layer),
        }
    }

    /// The vector width the kernel reads (which views the launch binds).
    pub fn vec(&self) -> u8 {
        match self.form {
            NormForm::Threadgroup(c) => c.vec,
            NormForm::Lanes(c) => c.vec,
        }
    }
}

/// Plans RMSNorm (or LayerNorm, `layer`) over `[rows, d]`. `vec` is the
/// widest access the caller can bind: 1, 4 (`float4` views, `d % 4 == 0`)
/// or 8 (`uint4` views of f16/bf16, `d % 8 == 0`). The one place the form
/// is chosen: the lanes form where the row fits [`LANE_ROW_BYTES`] and
/// [`MAX_CACHED_ITEMS`] loads per lane (and `options.cache`), in
/// threadgroups of `options.threads`; else a threadgroup per row, with
/// `float4` vectors at most.
pub fn plan(layer: bool, dtype: DType, rows: usize, d: usize, vec: u8, options: RowOptions) -> Result<NormPlan, ShapeError> {
    let kernel = if layer { "layer_norm" } else { "rms_norm" };
    if vec == 8 && (dtype == DType::F32 || !d.is_multiple_of(8)) {
        return Err(ShapeError::new(format!("{kernel}_{dtype}_vec8"), format!("16-byte words of 8 elements need f16 or bf16 rows whose length is a multiple of 8, not {d} of {dtype}")));
    }
    // The threadgroup form checks the widths (8 as 4), sizes and threads
    // for both.
    let row_plan = plan_rows(kernel, dtype, rows, d, if vec == 8 { 4 } else { vec }, options)?;
    let dv = d / vec as usize;
    let lanes = dv.next_power_of_two().min(SIMD_WIDTH as usize);
    let items = dv.div_ceil(lanes);
    let fits = d * dtype.size_bytes() as usize <= LANE_ROW_BYTES && items <= MAX_CACHED_ITEMS as usize;
    if !(options.cache && fits) {
        let RowPlan { config, rows, d, dispatch } = row_plan;
        return Ok(NormPlan { form: NormForm::Threadgroup(config), rows, d, dispatch });
    }
    let threads = row_plan.dispatch.threads[0];
    let name = format!("{kernel}_{dtype}");
    let groups = rows.div_ceil(threads as usize / lanes);
    // Thread positions in the grid are u32.
    to_u32(&name, "threads in the grid", groups * threads as usize)?;
    let groups = to_u32(&name, "threadgroups", groups)?;
    let config = LanesConfig { dtype, vec, lanes: lanes as u32, items: items as u32 };
    Ok(NormPlan { form: NormForm::Lanes(config), rows: row_plan.rows, d: row_plan.d, dispatch: Dispatch::threadgroups([groups, 1, 1], threads) })
}

/// How the lanes form reads and writes one vector of its width: `float`s,
/// `float4`s, or 16-byte words of 8 f16/bf16 elements seen as four f32
/// pairs.
#[derive(Clone, Copy)]
struct Lanes {
    dtype: DType,
    vec: u8,
}

impl Lanes {
    fn words() -> Type {
        Type::vector(Scalar::U32, 4)
    }

    fn zero(self) -> Ex {
        if self.vec == 8 {
            vector(Lanes::words(), &[lit(Scalar::U32, 0.0)])
        } else {
            splat(0.0, self.vec)
        }
    }

    fn load(self, mem: Mem, index: Ex) -> Ex {
        if self.vec == 8 {
            mem.get(index)
        } else {
            load_f32(mem, index)
        }
    }

    /// A register's elements as f32 parts (four pairs of a word, or the
    /// register itself).
    fn parts(self, k: &mut KernelBuilder, name: &str, reg: Ex) -> Vec<Ex> {
        if self.vec != 8 {
            return vec![reg];
        }
        let pair = self.dtype.ty(2);
        let word = k.let_(name, reg);
        (0..4u8).map(|c| k.let_(&format!("{name}_{c}"), to_f32(word.component(c).bitcast(pair)))).collect()
    }

    fn store(self, k: &mut KernelBuilder, mem: Mem, index: Ex, parts: &[Ex]) {
        if self.vec != 8 {
            return store_f32(k, mem, index, parts[0]);
        }
        let pair = self.dtype.ty(2);
        let words: Vec<Ex> = parts.iter().map(|&p| p.cast(pair).bitcast(Type::U32)).collect();
        k.store(mem.at(index), vector(Lanes::words(), &words));
    }
}

/// The sum of `v` over the row's `lanes` lanes (aligned groups of a power
/// of two), the same in every one of them: `simd_sum` for a whole SIMD
/// group, else a butterfly of `simd_shuffle_xor` (each step adds the same
/// two values in every lane, so every lane ends with the same bits).
fn lanes_sum(k: &mut KernelBuilder, name: &str, v: Ex, lanes: u32) -> Ex {
    if lanes == SIMD_WIDTH {
        return k.let_(name, simd_sum(v));
    }
    let mut s = v;
    let mut mask = lanes / 2;
    while mask > 0 {
        s = k.let_(&format!("{name}{mask}"), s + simd_shuffle_xor(s, mask));
        mask /= 2;
    }
    k.let_(name, s)
}

/// One vector slot of a lane in the lanes form: the row's, the weight's and
/// the bias's elements as f32 parts, the slot's vector index and whether
/// it lies in the row.
struct LaneItem {
    xs: Vec<Ex>,
    ws: Vec<Ex>,
    bs: Option<Vec<Ex>>,
    idx: Ex,
    inside: Ex,
}

/// The sum of `terms` as a balanced tree (short dependency chains).
fn pairwise_sum(mut terms: Vec<Ex>) -> Ex {
    while terms.len() > 1 {
        terms = terms.chunks(2).map(|pair| if let [a, b] = pair { *a + *b } else { pair[0] }).collect();
    }
    terms.pop().expect("at least one term")
}

/// The lanes form (module docs): `{rms_norm|layer_norm}_{dtype}[_vec4|_vec8]_l<lanes>_c<items>`,
/// LayerNorm when `layer`. Lane `i` of row `r`'s group holds vectors `i,
/// i + lanes, …`; threads of rows past `rows` take part in the
/// reductions and load and store nothing.
///
/// # Panics
/// When the width is not 1, 4 or 8 (8 for f16/bf16 only), or `lanes` is not
/// a power of two up to 32, or `items` is 0.
pub fn norm_lanes(c: LanesConfig, layer: bool) -> Kernel {
    assert!(c.vec == 1 || c.vec == 4 || (c.vec == 8 && c.dtype != DType::F32), "vector width {} of {}", c.vec, c.dtype);
    assert!(c.lanes.is_power_of_two() && c.lanes <= SIMD_WIDTH && c.items > 0, "{} lanes, {} items", c.lanes, c.items);
    let prefix = if layer { "layer_norm" } else { "rms_norm" };
    let mut k = KernelBuilder::new(format!("{prefix}_{}", c.suffix()));
    type P = NormArgs;
    let names = match c.vec {
        8 => [P::X8, P::W8, P::B8, P::Y8],
        4 => [P::X4, P::W4, P::B4, P::Y4],
        _ => [P::X, P::W, P::B, P::Y],
    };
    let ty = if c.vec == 8 { Lanes::words() } else { c.dtype.ty(c.vec) };
    let x = k.buffer(names[0], ty, Access::Read);
    let w = k.buffer(names[1], ty, Access::Read);
    let b = layer.then(|| k.buffer(names[2], ty, Access::Read));
    let y = k.buffer(names[3], ty, Access::ReadWrite);
    let d = k.value(P::D, Type::U32);
    let rows = k.value(P::ROWS, Type::U32);
    let eps = k.value(P::EPS, Type::F32);
    let io = Lanes { dtype: c.dtype, vec: c.vec };
    let gid = k.let_("gid", thread_position_in_grid().x());
    let row = k.let_("row", gid / c.lanes);
    let lane = k.let_("lane", gid % c.lanes);
    let active = k.let_("active", row.lt(rows));
    let dv = k.let_("dv", d / c.vec as u32);
    let base = k.let_("base", min(row, rows - 1u32) * dv);
    let inv_d = k.let_("inv_d", 1.0f32 / d.cast(Type::F32));
    // Registers: this lane's vectors of the row, the weight and the bias
    // (all loaded before the reductions), zero past the row's end.
    let mut regs = vec![];
    for it in 0..c.items {
        let idx = k.let_(&format!("idx{it}"), lane + c.lanes * it);
        let inside = k.let_(&format!("inside{it}"), active.and(idx.lt(dv)));
        let vx = k.var(&format!("vx{it}"), io.zero());
        let vw = k.var(&format!("vw{it}"), io.zero());
        let vb = b.map(|_| k.var(&format!("vb{it}"), io.zero()));
        k.if_(inside, |k| {
            k.assign(vx, io.load(x, base + idx));
            k.assign(vw, io.load(w, idx));
            if let (Some(vb), Some(b)) = (vb, b) {
                k.assign(vb, io.load(b, idx));
            }
        });
        let xs = io.parts(&mut k, &format!("x{it}"), vx.get());
        let ws = io.parts(&mut k, &format!("w{it}"), vw.get());
        let bs = vb.map(|vb| io.parts(&mut k, &format!("b{it}"), vb.get()));
        regs.push(LaneItem { xs, ws, bs, idx, inside });
    }
    let out = |k: &mut KernelBuilder, item: &LaneItem, value: &dyn Fn(usize, Ex) -> Ex| {
        k.if_(item.inside, |k| {
            let parts: Vec<Ex> = item.xs.iter().enumerate().map(|(j, &p)| value(j, p)).collect();
            io.store(k, y, base + item.idx, &parts);
        });
    };
    if layer {
        let total = lanes_sum(&mut k, "sum", pairwise_sum(regs.iter().flat_map(|r| r.xs.iter().map(|&p| hsum(p))).collect()), c.lanes);
        let mean = k.let_("mean", total * inv_d);
        // Centred squares; slots past the row's end hold 0, so mask them.
        let mut squares = vec![];
        for (it, item) in regs.iter().enumerate() {
            for (j, &p) in item.xs.iter().enumerate() {
                let zero = splat(0.0, p.ty().width());
                let centred = k.let_(&format!("c{it}_{j}"), select(zero, p - mean, item.inside));
                squares.push(hsum(centred * centred));
            }
        }
        let var_sum = lanes_sum(&mut k, "sq", pairwise_sum(squares), c.lanes);
        let rstd = k.let_("rstd", rsqrt(var_sum * inv_d + eps));
        for item in &regs {
            let bs = item.bs.as_ref().expect("layer norm has a bias");
            out(&mut k, item, &|j, p| fma((p - mean) * rstd, item.ws[j], bs[j]));
        }
    } else {
        let ss = lanes_sum(&mut k, "ss", pairwise_sum(regs.iter().flat_map(|r| r.xs.iter().map(|&p| hsum(p * p))).collect()), c.lanes);
        let r = k.let_("r", rsqrt(ss * inv_d + eps));
        for item in &regs {
            out(&mut k, item, &|j, p| p * r * item.ws[j]);
        }
    }
    finish(k)
}

/// The f64 RMSNorm reference.
pub fn reference_rms(x: &[f32], w: &[f32], d: usize, eps: f32) -> Vec<f64> {
    let mut out = Vec::with_capacity(x.len());
    for row in x.chunks(d) {
        let ms: f64 = row.iter().map(|&v| (v as f64) * (v as f64)).sum::<f64>() / d as f64;
        let r = 1.0 / (ms + eps as f64).sqrt();
        out.extend(row.iter().zip(w).map(|(&v, &w)| v as f64 * r * w as f64));
    }
    out
}

/// The f64 LayerNorm reference (biased variance, as PyTorch).
pub fn reference_layer(x: &[f32], w: &[f32], b: &[f32], d: usize, eps: f32) -> Vec<f64> {
    let mut out = Vec::with_capacity(x.len());
    for row in x.chunks(d) {
        let mean: f64 = row.iter().map(|&v| v as f64).sum::<f64>() / d as f64;
        let var: f64 = row.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / d as f64;
        let r = 1.0 / (var + eps as f64).sqrt();
        out.extend(row.iter().zip(w.iter().zip(b)).map(|(&v, (&w, &b))| (v as f64 - mean) * r * w as f64 + b as f64));
    }
    out
}
