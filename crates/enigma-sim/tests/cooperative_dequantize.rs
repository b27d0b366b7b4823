//! `cooperative_dequantize` on the simulator: every element of an f32 or
//! f16 cooperative tensor from seed 002's packed 4-bit words and f16 group
//! scales, against a plain-Rust reference, at awkward shapes and scopes,
//! every code, group shifts 5 to 7, words and scales in device and
//! threadgroup memory, the words in seed 002's rows, in fragment order or
//! in MLX's columns (with f16 biases: `uint4 · scale + bias` rounded once);
//! the sanitizer sees each element's reads (an out-of-bounds word, a race
//! with a write before the barrier).

use enigma_backend::half::{f16_bits_to_f32, f32_to_f16_bits};
use enigma_backend::{ArgValue, Backend, DispatchMode, DispatchOptions, Finding, FindingKind, RuntimeError, SpecValues};
use enigma_ir::builder::*;
use enigma_ir::{validate, Access, ExecutionScope, Kernel, MemFlags, QuantCode, QuantLayout, Scalar, Type};
use enigma_sim::SimBackend;

/// A buffer's initial contents.
enum Data {
    Words(Vec<u32>),
    /// f16 values (given as f32, each exactly an f16).
    Halves(Vec<f32>),
    /// An output of this many f32 or f16 elements, filled with -7.
    Output(Scalar, usize),
}

impl Data {
    fn bytes(&self) -> Vec<u8> {
        match self {
            Data::Words(v) => v.iter().flat_map(|w| w.to_le_bytes()).collect(),
            Data::Halves(v) => v.iter().flat_map(|x| f32_to_f16_bits(*x).to_le_bytes()).collect(),
            Data::Output(Scalar::F16, n) => vec![f32_to_f16_bits(-7.0).to_le_bytes(); *n].concat(),
            Data::Output(_, n) => vec![(-7.0f32).to_le_bytes(); *n].concat(),
        }
    }
}

/// Runs `kernel` over `data` in one threadgroup of `threads` threads; the
/// output buffers' values afterwards (as f32), and the findings.
fn run(kernel: &Kernel, data: &[Data], threads: u32, sanitize: bool) -> Result<(Vec<Vec<f32>>, Vec<Finding>), RuntimeError> {
    let info = validate(kernel, &Default::default()).unwrap_or_else(|e| panic!("{e}"));
    let backend = SimBackend::new();
    let compiled = backend.compile(kernel, &info, &SpecValues::default())?;
    let mut storages = vec![];
    for d in data {
        let bytes = d.bytes();
        let s = backend.allocate(bytes.len())?;
        s.write(0, &bytes)?;
        storages.push(s);
    }
    let args: Vec<ArgValue<'_>> = storages.iter().map(|s| ArgValue::Buffer { storage: s.as_ref(), elem: None }).collect();
    let geometry = enigma_backend::check_dispatch(backend.info(), compiled.as_ref(), &args, DispatchMode::Threadgroups, [1, 1, 1], [threads, 1, 1])?;
    let report = backend.dispatch(compiled.as_ref(), &args, &geometry, &DispatchOptions { sanitize, ..Default::default() })?;
    let mut outputs = vec![];
    for (s, d) in storages.iter().zip(data) {
        if let Data::Output(elem, n) = d {
            let size = if *elem == Scalar::F16 { 2 } else { 4 };
            let mut bytes = vec![0u8; n * size];
            s.read(0, &mut bytes)?;
            outputs.push(match elem {
                Scalar::F16 => bytes.chunks(2).map(|c| f16_bits_to_f32(u16::from_le_bytes([c[0], c[1]]))).collect(),
                _ => bytes.chunks(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect(),
            });
        }
    }
    Ok((outputs, report.findings))
}

/// A pseudo-random u32 for `i` and `seed`.
fn hash(i: u32, seed: u32) -> u32 {
    let mut x = i.wrapping_mul(2_654_435_761) ^ seed.wrapping_mul(40_503);
    x ^= x >> 15;
    x = x.wrapping_mul(2_246_822_519);
    x ^ (x >> 13)
}

/// f16 scales of every kind: normal values with full mantissas (so f16
/// products round), small ones whose products are subnormal, and negatives.
fn scales(n: usize, seed: u32) -> Vec<f32> {
    (0..n)
        .map(|i| {
            let h = hash(i as u32, seed);
            let mantissa = (h & 0x3FF) as u16;
            let exponent = match h >> 30 {
                0 => 1,
                1 => 3,
                _ => 12 + ((h >> 12) % 6) as u16,
            };
            f16_bits_to_f32(((h >> 16) as u16 & 0x8000) | (exponent << 10) | mantissa)
        })
        .collect()
}

/// Where the weights lie: in `layout`, `offset` words before the first, a
/// row of words (of units, in fragment order; a column's, in MLX's
/// columns) every `stride` words, `scale_offset` and `scale_stride`
/// likewise; with `biased`, biases beside the scales.
#[derive(Clone, Copy, Debug)]
struct Packing {
    layout: QuantLayout,
    offset: u32,
    stride: u32,
    scale_offset: u32,
    scale_stride: u32,
    group_shift: u32,
    biased: bool,
}

impl Packing {
    fn words_len(&self, (rows, cols): (u32, u32)) -> usize {
        // The tensor's rows are N, its columns K.
        (self.offset + self.layout.rows_of_units(cols, rows) * self.stride) as usize
    }
    fn scales_len(&self, (rows, cols): (u32, u32)) -> usize {
        let groups = ((cols - 1) >> self.group_shift) + 1;
        (self.scale_offset + if self.layout == QuantLayout::Columns { rows } else { groups } * self.scale_stride) as usize
    }
}

/// `x` rounded to the nearest f16 (ties to the even one): the f16 of its
/// f32 rounding or a neighbour of it, whichever lies nearest `x` in f64.
fn nearest_f16(x: f64) -> f32 {
    let h = f32_to_f16_bits(x as f32);
    let mut best = h;
    for c in [h.wrapping_sub(1), h.wrapping_add(1)] {
        let (v, b) = (f64::from(f16_bits_to_f32(c)), f64::from(f16_bits_to_f32(best)));
        // Neighbouring bits are neighbouring values within one sign.
        if !v.is_finite() || (c ^ h) & 0x8000 != 0 {
            continue;
        }
        if (v - x).abs() < (b - x).abs() || ((v - x).abs() == (b - x).abs() && c % 2 == 0) {
            best = c;
        }
    }
    f16_bits_to_f32(best)
}

/// The reference: element (r, c) of a `rows × cols` tensor, row-major,
/// the exact value (the code's value times the scale, plus the bias where
/// there are biases), in f64, rounded once to `elem`.
fn reference(code: QuantCode, p: Packing, words: &[u32], (scales, biases): (&[f32], &[f32]), (rows, cols): (u32, u32), elem: Scalar) -> Vec<f32> {
    let mut out = vec![];
    for r in 0..rows {
        for c in 0..cols {
            // K row c, N column r of the packed words.
            let (unit_row, word, nibble) = p.layout.locate(c, r);
            let word = words[(p.offset + unit_row * p.stride + word) as usize];
            let at = (p.scale_offset + p.layout.scale_index(c >> p.group_shift, r, p.scale_stride)) as usize;
            let product = f64::from(code.value(word >> (4 * nibble))) * f64::from(scales[at]);
            let exact = if p.biased { product + f64::from(biases[at]) } else { product };
            out.push(if elem == Scalar::F16 { nearest_f16(exact) } else { exact as f32 });
        }
    }
    out
}

/// A kernel that dequantizes into a `rows × cols` tensor of `elem` over
/// `scope` and stores it row-major to `out`; with `staged`, the words and
/// scales are first copied into threadgroup arrays (`barrier`: with the
/// barrier that orders those copies before the reads).
fn dequantizer(code: QuantCode, p: Packing, (rows, cols): (u32, u32), elem: Scalar, scope: ExecutionScope, staged: Option<bool>, lens: (usize, usize)) -> Kernel {
    let mut k = KernelBuilder::new("dequantize");
    let words = k.buffer("words", Type::U32, Access::Read);
    let scales = k.buffer("scales", Type::F16, Access::Read);
    let biases = p.biased.then(|| k.buffer("biases", Type::F16, Access::Read));
    let out = k.buffer("out", Type::scalar(elem), Access::ReadWrite);
    let t = k.cooperative_tensor("weights", elem, rows, cols, scope);
    let (words, scales) = match staged {
        None => (words, scales),
        Some(barrier) => {
            let (tw, ts) = (k.threadgroup_array("tw", Type::U32, lens.0 as u32), k.threadgroup_array("ts", Type::F16, lens.1 as u32));
            let lid = k.let_("lid", thread_index_in_threadgroup());
            let threads = scope.threads();
            k.for_range("i", lid, lens.0 as u32, threads, |k, i| k.store(tw.at(i), words.get(i)));
            k.for_range("j", lid, lens.1 as u32, threads, |k, j| k.store(ts.at(j), scales.get(j)));
            if barrier {
                k.threadgroup_barrier(MemFlags::Threadgroup);
            }
            (tw, ts)
        }
    };
    match biases {
        Some(b) => k.cooperative_dequantize_with_biases(t, (code, p.layout), (words, p.offset, p.stride), (scales, p.scale_offset, p.scale_stride), b, p.group_shift),
        None => k.cooperative_dequantize(t, (code, p.layout), (words, p.offset, p.stride), (scales, p.scale_offset, p.scale_stride), p.group_shift),
    }
    k.cooperative_store(t, &Tensor::new(out, [cols, rows]));
    k.finish().unwrap()
}

/// Dequantizes on the simulator under the sanitizer and compares with the
/// reference.
fn check(code: QuantCode, p: Packing, shape: (u32, u32), elem: Scalar, scope: ExecutionScope, staged: bool, seed: u32) {
    let words: Vec<u32> = (0..p.words_len(shape)).map(|i| hash(i as u32, seed)).collect();
    let scale_values = scales(p.scales_len(shape), seed + 1);
    let bias_values = if p.biased { scales(p.scales_len(shape), seed + 2) } else { vec![] };
    let kernel = dequantizer(code, p, shape, elem, scope, staged.then_some(true), (words.len(), scale_values.len()));
    let want = reference(code, p, &words, (&scale_values, &bias_values), shape, elem);
    let mut data = vec![Data::Words(words), Data::Halves(scale_values)];
    if p.biased {
        data.push(Data::Halves(bias_values));
    }
    data.push(Data::Output(elem, want.len()));
    let (out, findings) = run(&kernel, &data, scope.threads(), true).unwrap();
    let what = format!("{code} {p:?} {shape:?} {elem} {scope} staged {staged}");
    assert!(findings.is_empty(), "{what}: {findings:#?}");
    for (i, (got, want)) in out[0].iter().zip(&want).enumerate() {
        assert_eq!(got.to_bits(), want.to_bits(), "{what}: element {i} ({}, {}) is {got}, not {want}", i as u32 / shape.1, i as u32 % shape.1);
    }
}

#[test]
fn every_element_is_the_weight_times_its_groups_scale_rounded_once() {
    let cases = [
        // (rows, cols), scope, group shift, element type, staged
        ((24, 40), ExecutionScope::Simdgroup, 5, Scalar::F32, false),
        ((24, 40), ExecutionScope::Simdgroups(2), 5, Scalar::F16, true),
        ((64, 64), ExecutionScope::Simdgroups(4), 5, Scalar::F16, true),
        ((64, 128), ExecutionScope::Simdgroups(4), 6, Scalar::F32, true),
        ((16, 136), ExecutionScope::Simdgroups(2), 7, Scalar::F16, false),
        ((8, 248), ExecutionScope::Simdgroup, 7, Scalar::F32, true),
        ((40, 72), ExecutionScope::Simdgroups(3), 6, Scalar::F16, false),
    ];
    for (seed, ((rows, cols), scope, group_shift, elem, staged)) in cases.into_iter().enumerate() {
        let p = Packing { layout: QuantLayout::Rows, offset: 3 + seed as u32, stride: rows + 5, scale_offset: 7, scale_stride: rows + 2, group_shift, biased: false };
        for code in QuantCode::ALL {
            check(code, p, (rows, cols), elem, scope, staged, seed as u32);
        }
    }
}

/// Words in fragment order (units of 64 K rows by 16 N columns, a row of
/// units every `stride` words): each element is the nibble the layout puts
/// at its K row and N column, also past the first unit row and column.
#[test]
fn fragment_ordered_words_decode_where_the_layout_puts_them() {
    let cases = [
        ((64, 64), ExecutionScope::Simdgroups(4), 6, Scalar::F16, true),
        ((32, 128), ExecutionScope::Simdgroups(2), 7, Scalar::F32, false),
        ((16, 64), ExecutionScope::Simdgroup, 5, Scalar::F16, false),
        ((48, 192), ExecutionScope::Simdgroups(3), 6, Scalar::F16, true),
    ];
    for (seed, ((rows, cols), scope, group_shift, elem, staged)) in cases.into_iter().enumerate() {
        let stride = u32::div_ceil(rows, 16) * 128 + 4 * seed as u32;
        let p = Packing { layout: QuantLayout::Fragments, offset: 4 * seed as u32, stride, scale_offset: 5, scale_stride: rows + 3, group_shift, biased: false };
        for code in QuantCode::ALL {
            check(code, p, (rows, cols), elem, scope, staged, 40 + seed as u32);
        }
    }
}

/// MLX's columns (`[N][K/8]` words, `[N][K/group]` scales and biases,
/// a column's words and groups `stride` apart): every code with and
/// without biases, the affine `uint4` with them as MLX stores it; the
/// scales and biases have full mantissas and subnormals, so f16 elements
/// round.
#[test]
fn mlx_columns_with_biases_decode_to_the_exact_value_rounded_once() {
    let cases = [
        ((24u32, 64u32), ExecutionScope::Simdgroups(2), 5u32, Scalar::F16, true),
        ((64, 128), ExecutionScope::Simdgroups(4), 6, Scalar::F32, false),
        ((16, 72), ExecutionScope::Simdgroup, 5, Scalar::F16, false),
        ((40, 136), ExecutionScope::Simdgroups(3), 7, Scalar::F32, true),
    ];
    for (seed, ((rows, cols), scope, group_shift, elem, staged)) in cases.into_iter().enumerate() {
        let stride = cols.div_ceil(8) + seed as u32;
        let scale_stride = ((cols - 1) >> group_shift) + 1 + 2 * seed as u32;
        for biased in [true, false] {
            let p = Packing { layout: QuantLayout::Columns, offset: 2 + seed as u32, stride, scale_offset: 3, scale_stride, group_shift, biased };
            for code in QuantCode::ALL {
                check(code, p, (rows, cols), elem, scope, staged, 80 + seed as u32);
            }
        }
    }
}

#[test]
fn the_sanitizer_sees_each_elements_reads() {
    let p = Packing { layout: QuantLayout::Rows, offset: 0, stride: 16, scale_offset: 0, scale_stride: 16, group_shift: 5, biased: false };
    let (rows, cols) = (16, 64);
    let (words_len, scales_len) = (p.words_len((rows, cols)), p.scales_len((rows, cols)));
    // Words one row short: the last row's reads fall outside the buffer.
    let kernel = dequantizer(QuantCode::Int4, p, (rows, cols), Scalar::F32, ExecutionScope::Simdgroups(2), None, (0, 0));
    let short = [Data::Words(vec![0x8888_8888; words_len - 16]), Data::Halves(vec![1.0; scales_len]), Data::Output(Scalar::F32, (rows * cols) as usize)];
    match run(&kernel, &short, 64, true) {
        Ok((_, findings)) => assert!(findings.iter().any(|f| f.kind == FindingKind::OutOfBounds && f.variable.as_deref() == Some("words")), "{findings:#?}"),
        Err(e) => assert!(e.to_string().contains("words"), "{e}"),
    }
    // Staged words and scales read by the other SIMD group before the
    // barrier that would order the copies: a race.
    let data = || [Data::Words(vec![0x8888_8888; words_len]), Data::Halves(vec![1.0; scales_len]), Data::Output(Scalar::F32, (rows * cols) as usize)];
    let racy = dequantizer(QuantCode::Int4, p, (rows, cols), Scalar::F32, ExecutionScope::Simdgroups(2), Some(false), (words_len, scales_len));
    let (_, findings) = run(&racy, &data(), 64, true).unwrap();
    assert!(findings.iter().any(|f| f.kind == FindingKind::ThreadgroupRace && f.variable.as_deref() == Some("tw")), "{findings:#?}");
    let ordered = dequantizer(QuantCode::Int4, p, (rows, cols), Scalar::F32, ExecutionScope::Simdgroups(2), Some(true), (words_len, scales_len));
    let (out, findings) = run(&ordered, &data(), 64, true).unwrap();
    assert!(findings.is_empty(), "{findings:#?}");
    assert!(out[0].iter().all(|&v| v == 0.0));
}
