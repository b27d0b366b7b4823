//! A small harness for elementwise cases: input buffers of any scalar type
//! given as raw bits, and output "columns", each an expression of the loaded
//! inputs with the exact expected bits of every element. One kernel per
//! table: `out_j[tid] = f_j(in_0[tid], in_1[tid], …)`.

use crate::util::*;
use enigma_ir::builder::*;
use enigma_ir::{Access, Scalar, Type};
use enigma_runtime::{Arg, Runtime};

/// Raw little-endian bits of a scalar, zero-extended to 64 bits.
pub(crate) trait Bits: Copy {
    const SCALAR: Scalar;
    fn bits(self) -> u64;
}

macro_rules! int_bits {
    ($($t:ty => $s:ident, $u:ty);* $(;)?) => {$(
        impl Bits for $t {
            const SCALAR: Scalar = Scalar::$s;
            fn bits(self) -> u64 {
                self as $u as u64
            }
        }
    )*};
}

int_bits! {
    i8 => I8, u8; u8 => U8, u8; i16 => I16, u16; u16 => U16, u16;
    i32 => I32, u32; u32 => U32, u32; i64 => I64, u64; u64 => U64, u64;
}

impl Bits for f32 {
    const SCALAR: Scalar = Scalar::F32;
    fn bits(self) -> u64 {
        self.to_bits() as u64
    }
}

impl Bits for bool {
    const SCALAR: Scalar = Scalar::Bool;
    fn bits(self) -> u64 {
        self as u64
    }
}

pub(crate) fn bits_of<T: Bits>(v: &[T]) -> Vec<u64> {
    v.iter().map(|x| x.bits()).collect()
}

/// Whether raw bits of `ty` are a NaN.
pub(crate) fn is_nan_bits(ty: Scalar, b: u64) -> bool {
    match ty {
        Scalar::F32 => f32::from_bits(b as u32).is_nan(),
        Scalar::F16 => b & 0x7c00 == 0x7c00 && b & 0x3ff != 0,
        Scalar::BF16 => b & 0x7f80 == 0x7f80 && b & 0x7f != 0,
        _ => false,
    }
}

/// A value of `ty` from its raw bits, for messages.
pub(crate) fn show(ty: Scalar, b: u64) -> String {
    match ty {
        Scalar::Bool => (b != 0).to_string(),
        Scalar::I8 => (b as u8 as i8).to_string(),
        Scalar::I16 => (b as u16 as i16).to_string(),
        Scalar::I32 => (b as u32 as i32).to_string(),
        Scalar::I64 => (b as i64).to_string(),
        Scalar::U8 | Scalar::U16 | Scalar::U32 | Scalar::U64 => b.to_string(),
        Scalar::F32 => format!("{:e} ({:#010x})", f32::from_bits(b as u32), b),
        Scalar::F16 => format!("{:e} (half {:#06x})", f16_to_f32(b as u16), b),
        Scalar::BF16 => format!("{:e} (bfloat {:#06x})", bf16_to_f32(b as u16), b),
    }
}

/// An input buffer: its scalar type and the raw bits of each element.
pub(crate) struct Input {
    pub ty: Scalar,
    pub bits: Vec<u64>,
}

impl Input {
    pub fn new<T: Bits>(v: &[T]) -> Input {
        Input {
            ty: T::SCALAR,
            bits: bits_of(v),
        }
    }
    pub fn half(v: &[u16]) -> Input {
        Input {
            ty: Scalar::F16,
            bits: v.iter().map(|&b| b as u64).collect(),
        }
    }
    pub fn bfloat(v: &[u16]) -> Input {
        Input {
            ty: Scalar::BF16,
            bits: v.iter().map(|&b| b as u64).collect(),
        }
    }
}

type ColumnFn = Box<dyn Fn(&[Ex]) -> Ex>;

/// An output: a name for messages, its type, the expression, and the
/// expected raw bits per element.
pub(crate) struct Column {
    pub name: String,
    pub ty: Scalar,
    pub f: ColumnFn,
    pub want: Vec<u64>,
}

impl Column {
    pub fn new(
        name: impl Into<String>,
        ty: Scalar,
        f: impl Fn(&[Ex]) -> Ex + 'static,
        want: Vec<u64>,
    ) -> Column {
        Column {
            name: name.into(),
            ty,
            f: Box::new(f),
            want,
        }
    }

    /// The same column computed by another expression.
    pub fn with(mut self, f: impl Fn(&[Ex]) -> Ex + 'static) -> Column {
        self.f = Box::new(f);
        self
    }
}

fn to_bytes(ty: Scalar, bits: &[u64]) -> Vec<u8> {
    let size = ty.size_bytes() as usize;
    bits.iter()
        .flat_map(|b| b.to_le_bytes()[..size].to_vec())
        .collect()
}

/// Builds and runs the table's kernel (one thread per element) and compares
/// every column exactly (every NaN matching every NaN).
pub(crate) fn run_table(
    rt: &Runtime,
    name: &str,
    inputs: &[Input],
    columns: Vec<Column>,
) -> CaseResult {
    let n = inputs[0].bits.len();
    ensure!(
        inputs.iter().all(|i| i.bits.len() == n),
        "conformance test bug: inputs of {name} differ in length"
    );
    let mut k = KernelBuilder::new(name);
    let ins: Vec<Mem> = inputs
        .iter()
        .enumerate()
        .map(|(i, inp)| k.buffer(&format!("in{i}"), inp.ty, Access::Read))
        .collect();
    let outs: Vec<Mem> = columns
        .iter()
        .enumerate()
        .map(|(j, c)| k.buffer(&format!("out{j}"), c.ty, Access::ReadWrite))
        .collect();
    let tid = k.let_("tid", thread_position_in_grid().x());
    let xs: Vec<Ex> = ins
        .iter()
        .enumerate()
        .map(|(i, m)| k.let_(&format!("x{i}"), m.get(tid)))
        .collect();
    for (c, out) in columns.iter().zip(&outs) {
        k.store(out.at(tid), (c.f)(&xs));
    }
    let kernel = finish(k)?;
    let p = pipeline(rt, &kernel)?;
    let in_bufs = inputs
        .iter()
        .map(|i| {
            rt.buffer_from_bytes(Type::scalar(i.ty), &to_bytes(i.ty, &i.bits))
                .ctx("allocating")
        })
        .collect::<Result<Vec<_>, _>>()?;
    let out_bufs = columns
        .iter()
        .map(|c| rt.buffer_of_type(Type::scalar(c.ty), n).ctx("allocating"))
        .collect::<Result<Vec<_>, _>>()?;
    let args: Vec<Arg<'_>> = in_bufs.iter().chain(&out_bufs).map(Arg::from).collect();
    threads(rt, &p, &args, [n as u32, 1, 1], [64, 1, 1])?;
    let mut failures = vec![];
    for (c, buf) in columns.iter().zip(&out_bufs) {
        let bytes = buf.read_bytes().ctx("reading back")?;
        let size = c.ty.size_bytes() as usize;
        let got: Vec<u64> = bytes
            .chunks_exact(size)
            .map(|ch| {
                let mut b = [0u8; 8];
                b[..size].copy_from_slice(ch);
                u64::from_le_bytes(b)
            })
            .collect();
        let same = |a: &u64, b: &u64| a == b || (is_nan_bits(c.ty, *a) && is_nan_bits(c.ty, *b));
        let got_s: Vec<Shown> = got.iter().map(|&b| Shown(c.ty, b)).collect();
        let want_s: Vec<Shown> = c.want.iter().map(|&b| Shown(c.ty, b)).collect();
        let describe = |i: usize| {
            inputs
                .iter()
                .map(|inp| show(inp.ty, inp.bits[i]))
                .collect::<Vec<_>>()
                .join(", ")
        };
        if let Err(e) = check_with(
            &format!("{name}: {}", c.name),
            &got_s,
            &want_s,
            |a, b| same(&a.1, &b.1),
            describe,
        ) {
            failures.push(e);
        }
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("\n"))
    }
}

/// A value shown by its type in messages.
pub(crate) struct Shown(pub Scalar, pub u64);

impl std::fmt::Debug for Shown {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&show(self.0, self.1))
    }
}
