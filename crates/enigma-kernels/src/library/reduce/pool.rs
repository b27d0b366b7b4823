//! 2-D pooling ([`pool2d`]): the maximum or mean of each window of each
//! NCHW plane, one thread per output element.

use crate::library::*;
use enigma_ir::{Access, Kernel, Type};

crate::kernel_args! {
    /// The buffers and count of [`pool2d`], bound beside [`PoolDims`].
    pub struct PoolArgs {
        X x: buffer,
        Y y: buffer,
        TOTAL total: u32,
    }
}

crate::kernel_args! {
    /// The sizes [`pool2d`] takes by value, in the kernel's order.
    pub struct PoolDims(values) {
        H h: u32,
        W w: u32,
        OH oh: u32,
        OW ow: u32,
        KH kh: u32,
        KW kw: u32,
        SH sh: u32,
        SW sw: u32,
        PH ph: u32,
        PW pw: u32,
    }
}

/// What a 2-D pooling window gives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pool {
    Max,
    /// The mean; `count_pad`: padding counts in the divisor (PyTorch's
    /// `count_include_pad`).
    Avg { count_pad: bool },
}

impl Pool {
    pub fn name(self) -> &'static str {
        match self {
            Pool::Max => "max_pool2d",
            Pool::Avg { count_pad: true } => "avg_pool2d",
            Pool::Avg { count_pad: false } => "avg_pool2d_valid",
        }
    }
}

/// 2-D pooling over NCHW planes: `{max_pool2d,avg_pool2d[_valid]}_{dtype}`
/// (module docs).
pub fn pool2d(pool: Pool, dtype: DType) -> Kernel {
    let mut k = KernelBuilder::new(format!("{}_{}", pool.name(), dtype));
    let x = k.buffer(PoolArgs::X, dtype.ty(1), Access::Read);
    let y = k.buffer(PoolArgs::Y, dtype.ty(1), Access::ReadWrite);
    let d: Vec<Ex> = PoolDims::NAMES.iter().map(|n| k.value(n, Type::U32)).collect();
    let (h, w, oh, ow, kh, kw, sh, sw, ph, pw) = (d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7], d[8], d[9]);
    let total = k.value(PoolArgs::TOTAL, Type::U32);
    let tid = k.let_("tid", thread_position_in_grid().x());
    k.if_(tid.lt(total), |k| {
        let ox = k.let_("ox", tid % ow);
        let oy = k.let_("oy", tid / ow % oh);
        let plane = k.let_("plane", tid / ow / oh);
        let i32 = |e: Ex| e.cast(Type::I32);
        let y0 = k.let_("y0", i32(oy * sh) - i32(ph));
        let x0 = k.let_("x0", i32(ox * sw) - i32(pw));
        let acc = k.var("acc", f(if pool == Pool::Max { f64::NEG_INFINITY } else { 0.0 }));
        let inside = k.var("inside", lit(Scalar::U32, 0.0));
        k.for_range("ky", 0u32, kh, 1u32, |k, ky| {
            let iy = k.let_("iy", y0 + i32(ky));
            k.for_range("kx", 0u32, kw, 1u32, |k, kx| {
                let ix = k.let_("ix", x0 + i32(kx));
                let zero = lit(Scalar::I32, 0.0);
                let within = iy.ge(zero).and(iy.lt(i32(h))).and(ix.ge(zero)).and(ix.lt(i32(w)));
                k.if_(within, |k| {
                    let v = k.let_("v", load_f32(x, (plane * h + iy.cast(Type::U32)) * w + ix.cast(Type::U32)));
                    k.assign(acc, if pool == Pool::Max { max(acc.get(), v) } else { acc.get() + v });
                    k.assign(inside, inside.get() + 1u32);
                });
            });
        });
        let value = match pool {
            Pool::Max => acc.get(),
            Pool::Avg { count_pad: true } => acc.get() / (kh * kw).cast(Type::F32),
            Pool::Avg { count_pad: false } => acc.get() / inside.get().cast(Type::F32),
        };
        store_f32(k, y, tid, value);
    });
    finish(k)
}
