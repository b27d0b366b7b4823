//! The vector reduction ([`reduce()`], [`plan`]): two passes over a vector
//! of any length (module docs of `reduce`), and its f64 reference.

use crate::library::*;
use enigma_ir::{Access, Kernel, Type};

/// Default loads in flight per thread in the vector reduction.
pub const DEFAULT_UNROLL: u32 = 4;
/// Default cap on pass-1 threadgroups (each then loops over its share).
pub const DEFAULT_MAX_GROUPS: u32 = 1024;

crate::kernel_args! {
    /// The arguments of [`reduce()`]'s passes: `x` (and its vector view `x4`
    /// in the vector kernels), `n` elements, a partial per threadgroup in
    /// `out`.
    pub struct ReduceArgs {
        X x: buffer,
        X4 x4: buffer,
        OUT out: buffer,
        N n: u32,
    }
}

/// Pass-1 / pass-2 kernel of the vector reduction: `{op}_reduce_{dtype}[_vec4][_u{unroll}]`.
///
/// # Panics
/// When `vec` is not 1 or 4 or `unroll` is 0.
pub fn reduce(op: ReduceOp, dtype: DType, vec: u8, unroll: u32) -> Kernel {
    assert_vec(vec);
    assert!(unroll >= 1, "unroll must be at least 1");
    let unroll_suffix = if unroll > 1 { format!("_u{unroll}") } else { String::new() };
    let mut k = KernelBuilder::new(format!("{}_reduce_{}{}{}", op.name(), dtype, vec_suffix(vec), unroll_suffix));
    let x4 = (vec == 4).then(|| k.buffer(ReduceArgs::X4, dtype.ty(4), Access::Read));
    let x = k.buffer(ReduceArgs::X, dtype.ty(1), Access::Read);
    let out = k.buffer(ReduceArgs::OUT, Type::F32, Access::ReadWrite);
    let n = k.value(ReduceArgs::N, Type::U32);
    let tid = k.let_("tid", thread_index_in_threadgroup());
    let group = k.let_("group", threadgroup_position_in_grid().x());
    let tpg = k.let_("tpg", threads_per_threadgroup().x());
    let stride = k.let_("stride", threadgroups_per_grid().x() * tpg);
    let src = x4.unwrap_or(x);
    let nv = k.let_("nv", if vec == 4 { n / 4u32 } else { n });
    let accs: Vec<Var> = (0..unroll).map(|u| k.var(&format!("acc{u}"), splat(op.identity(), vec))).collect();
    k.for_range("i", group * tpg + tid, nv, stride * unroll, |k, i| {
        for (u, acc) in accs.iter().enumerate() {
            if u == 0 {
                k.assign(*acc, op.combine(acc.get(), load_f32(src, i)));
            } else {
                let j = k.let_(&format!("j{u}"), i + stride * (u as u32));
                k.if_(j.lt(nv), |k| k.assign(*acc, op.combine(acc.get(), load_f32(src, j))));
            }
        }
    });
    let mut combined = accs[0].get();
    for acc in &accs[1..] {
        combined = op.combine(combined, acc.get());
    }
    let value = k.var("value", op.horizontal(combined));
    if vec == 4 {
        // The tail of n % 4 elements, read through the scalar view.
        let tail = k.let_("tail", nv * 4u32 + tid);
        k.if_(group.eq(0u32).and(tail.lt(n)), |k| k.assign(value, op.combine(value.get(), load_f32(x, tail))));
    }
    let total = threadgroup_reduce(&mut k, "tg", &[(op, value.get())])[0];
    k.if_(tid.eq(0u32), |k| k.store(out.at(group), total));
    finish(k)
}

/// One launch of the vector reduction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReducePass {
    pub op: ReduceOp,
    pub dtype: DType,
    pub vec: u8,
    pub unroll: u32,
    /// Elements this pass reduces (its `n` parameter).
    pub n: u32,
    pub dispatch: Dispatch,
}

impl ReducePass {
    pub fn kernel(&self) -> Kernel {
        reduce(self.op, self.dtype, self.vec, self.unroll)
    }

    /// Partials (outputs) this pass writes: one per threadgroup.
    pub fn outputs(&self) -> u32 {
        self.dispatch.size[0]
    }
}

/// The vector reduction: pass 1, and pass 2 when pass 1 has more than one
/// threadgroup.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReducePlan {
    pub pass1: ReducePass,
    pub pass2: Option<ReducePass>,
}

/// Options of [`plan`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReduceOptions {
    /// Cap on pass-1 threadgroups (default [`DEFAULT_MAX_GROUPS`]).
    pub max_groups: Option<u32>,
    /// Loads in flight per thread (default [`DEFAULT_UNROLL`]).
    pub unroll: Option<u32>,
}

/// Plans the reduction of `n` elements with pass-1 threadgroups of
/// `threads`; `vec` 4 when the caller can bind the vector view.
pub fn plan(op: ReduceOp, dtype: DType, n: usize, vec: u8, threads: u32, options: ReduceOptions) -> Result<ReducePlan, ShapeError> {
    let name = format!("{}_reduce_{}", op.name(), dtype);
    check_vec(&name, vec)?;
    nonzero(&name, "n", n)?;
    let n = to_u32(&name, "n", n)?;
    let t = check_threads(&name, threads)?;
    let unroll = options.unroll.unwrap_or(DEFAULT_UNROLL);
    if !(1..=16).contains(&unroll) {
        return Err(ShapeError::new(name, format!("unroll {unroll} is not between 1 and 16")));
    }
    let max_groups = options.max_groups.unwrap_or(DEFAULT_MAX_GROUPS).max(1);
    let nv = if vec == 4 { n / 4 } else { n };
    let groups = nv.div_ceil(t).clamp(1, max_groups);
    let pass1 = ReducePass { op, dtype, vec, unroll, n, dispatch: Dispatch::threadgroups([groups, 1, 1], t) };
    let pass2 = (groups > 1).then(|| {
        let t2 = groups.div_ceil(SIMD_WIDTH).saturating_mul(SIMD_WIDTH).min(MAX_THREADS_PER_THREADGROUP);
        ReducePass { op, dtype: DType::F32, vec: 1, unroll: 1, n: groups, dispatch: Dispatch::threadgroups([1, 1, 1], t2) }
    });
    Ok(ReducePlan { pass1, pass2 })
}

/// The f64 reference of a vector reduction.
pub fn reference(op: ReduceOp, x: &[f32]) -> f64 {
    op.reference(x.iter().map(|&v| v as f64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_cap_the_threadgroups_and_add_a_second_pass() {
        let p = plan(ReduceOp::Sum, DType::F32, 1 << 28, 4, 256, ReduceOptions::default()).unwrap();
        assert_eq!(p.pass1.dispatch, Dispatch::threadgroups([1024, 1, 1], 256));
        assert_eq!(p.pass2.unwrap().dispatch, Dispatch::threadgroups([1, 1, 1], 1024));
        let p = plan(ReduceOp::Max, DType::F16, 1000, 1, 256, ReduceOptions::default()).unwrap();
        assert_eq!(p.pass1.dispatch.size[0], 4);
        assert_eq!(p.pass2.unwrap().dispatch.threads[0], 32);
        let p = plan(ReduceOp::Min, DType::F32, 3, 4, 32, ReduceOptions::default()).unwrap();
        assert_eq!(p.pass1.dispatch.size[0], 1);
        assert!(p.pass2.is_none());
        assert!(plan(ReduceOp::Min, DType::F32, 3, 4, 256, ReduceOptions { unroll: Some(0), max_groups: None }).is_err());
    }
}
