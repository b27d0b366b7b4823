//! SIMD-group matrices: one 8×8×8 product per element type (with the
//! accumulator in the input type and in f32), transposed and strided loads
//! and stores on device and threadgroup memory, filled and diagonal
//! matrices, a threadgroup of 4 SIMD groups computing a 64×64 tile (seed 002
//! §3.2's 2×2 partition), the per-lane view, and 4-bit tiles decoded on
//! load. Inputs are small multiples
//! of 1/2, so every product and sum is exact in f16, bf16 and f32 in any
//! order: results are compared exactly with an f64 reference.

use crate::util::*;
use enigma_ir::builder::*;
use enigma_ir::{Access, Feature, MatrixType, QuantCode, QuantLayout, Scalar, Type};
use enigma_runtime::{Arg, Buffer, Runtime};
use rand::rngs::SmallRng;
use rand::Rng;

/// Encodes `values` as a buffer of `elem`.
fn upload_as(rt: &Runtime, elem: Scalar, values: &[f32]) -> Result<Buffer, String> {
    let bytes: Vec<u8> = match elem {
        Scalar::F16 => values.iter().flat_map(|v| f32_to_f16(*v).to_le_bytes()).collect(),
        Scalar::BF16 => values.iter().flat_map(|v| f32_to_bf16(*v).to_le_bytes()).collect(),
        _ => values.iter().flat_map(|v| v.to_le_bytes()).collect(),
    };
    rt.buffer_from_bytes(Type::scalar(elem), &bytes).ctx("allocating a buffer")
}

/// Reads a buffer of `elem` back as f32.
fn download_as(buf: &Buffer, elem: Scalar) -> Result<Vec<f32>, String> {
    Ok(match elem {
        Scalar::F16 => download_u16_bits(buf)?.into_iter().map(f16_to_f32).collect(),
        Scalar::BF16 => download_u16_bits(buf)?.into_iter().map(bf16_to_f32).collect(),
        _ => download::<f32>(buf)?,
    })
}

/// Random multiples of 1/2 in [-4, 4]: exact in every element type.
fn halves(rng: &mut SmallRng, n: usize) -> Vec<f32> {
    (0..n).map(|_| rng.gen_range(-8i32..=8) as f32 / 2.0).collect()
}

/// `c + a·b` for row-major `a` (m×k), `b` (k×n), `c` (m×n), in f64.
fn reference(a: &[f32], b: &[f32], c: Option<&[f32]>, m: usize, k: usize, n: usize) -> Vec<f32> {
    (0..m * n)
        .map(|i| {
            let (r, col) = (i / n, i % n);
            let dot: f64 = (0..k).map(|j| a[r * k + j] as f64 * b[j * n + col] as f64).sum();
            (dot + c.map_or(0.0, |c| c[i] as f64)) as f32
        })
        .collect()
}

fn describe_rc(n: usize) -> impl Fn(usize) -> String {
    move |i| format!("row {}, column {}", i / n, i % n)
}

/// The element types `rt`'s device can multiply.
fn matrix_elems(rt: &Runtime) -> Vec<Scalar> {
    let bf16 = rt.device().features.contains(&Feature::Bfloat16);
    [Scalar::F16, Scalar::BF16, Scalar::F32].into_iter().filter(|s| *s != Scalar::BF16 || bf16).collect()
}

pub fn matrix_multiply_8x8x8(rt: &Runtime) -> CaseResult {
    seeded("matrix_multiply_8x8x8", |rng| {
        for elem in matrix_elems(rt) {
            for acc_elem in [elem, Scalar::F32] {
                let (ab, cd) = (MatrixType::new(elem, 8, 8), MatrixType::new(acc_elem, 8, 8));
                let mut k = KernelBuilder::new(format!("mma_{elem}_{acc_elem}"));
                let a = k.buffer("A", Type::scalar(elem), Access::Read);
                let b = k.buffer("B", Type::scalar(elem), Access::Read);
                let c = k.buffer("C", Type::scalar(acc_elem), Access::Read);
                let d = k.buffer("D", Type::scalar(acc_elem), Access::ReadWrite);
                let e = k.buffer("E", Type::scalar(elem), Access::ReadWrite);
                let ma = k.let_("a", matrix_load(ab, a, 0u32, 8u32, false));
                let mb = k.let_("b", matrix_load(ab, b, 0u32, 8u32, false));
                let mc = k.let_("c", matrix_load(cd, c, 0u32, 8u32, false));
                k.matrix_store(matrix_multiply_accumulate(ma, mb, mc), d, 0u32, 8u32, false);
                k.matrix_store(matrix_multiply(ma, mb), e, 0u32, 8u32, false);
                let kernel = finish(k)?;
                let p = pipeline(rt, &kernel)?;
                let (av, bv, cv) = (halves(rng, 64), halves(rng, 64), halves(rng, 64));
                let bufs = [
                    upload_as(rt, elem, &av)?,
                    upload_as(rt, elem, &bv)?,
                    upload_as(rt, acc_elem, &cv)?,
                    upload_as(rt, acc_elem, &[0.0; 64])?,
                    upload_as(rt, elem, &[0.0; 64])?,
                ];
                let args: Vec<Arg<'_>> = bufs.iter().map(Arg::from).collect();
                threads(rt, &p, &args, [32, 1, 1], [32, 1, 1])?;
                let what = format!("{elem} 8×8×8 accumulated in {acc_elem}");
                check_f32_exact(&what, &download_as(&bufs[3], acc_elem)?, &reference(&av, &bv, Some(&cv), 8, 8, 8), describe_rc(8))?;
                check_f32_exact(&format!("{elem} 8×8×8 product"), &download_as(&bufs[4], elem)?, &reference(&av, &bv, None, 8, 8, 8), describe_rc(8))?;
            }
        }
        Ok(())
    })
}

/// Loads with an offset and a stride wider than the tile, transposed and
/// not, from device memory and from threadgroup memory; stores likewise.
pub fn matrix_loads_and_stores(rt: &Runtime) -> CaseResult {
    seeded("matrix_loads_and_stores", |rng| {
        const STRIDE: u32 = 13;
        const OFFSET: u32 = 5;
        let t = MatrixType::new(Scalar::F32, 8, 16);
        let tt = MatrixType::new(Scalar::F32, 16, 8);
        let mut k = KernelBuilder::new("matrix_loads");
        let src = k.buffer("src", Type::F32, Access::Read);
        let out = k.buffer("out", Type::F32, Access::ReadWrite);
        let stage = k.threadgroup_array("stage", Type::F32, 128);
        let lane = k.let_("lane", thread_index_in_simdgroup());
        // Stage the 8×16 tile at (OFFSET, STRIDE) of src into threadgroup memory, row-major.
        k.for_range("i", 0u32, 4u32, 1u32, |k, i| {
            let e = k.let_("e", lane * 4u32 + i);
            k.store(stage.at(e), src.get(e / 16u32 * STRIDE + e % 16u32 + OFFSET));
        });
        k.threadgroup_barrier(enigma_ir::MemFlags::Threadgroup);
        let direct = k.let_("direct", matrix_load(t, src, OFFSET, STRIDE, false));
        let staged = k.let_("staged", matrix_load(t, stage, 0u32, 16u32, false));
        // Read transposed: element (r, c) of the 16×8 tile is src[OFFSET + c·STRIDE + r].
        let transposed = k.let_("transposed", matrix_load(tt, src, OFFSET, STRIDE, true));
        k.matrix_store(direct, out, 0u32, 16u32, false);
        k.matrix_store(staged, out, 128u32, 16u32, false);
        k.matrix_store(transposed, out, 256u32, 8u32, false);
        // Stored transposed with a stride: out[384 + c·20 + r] = direct(r, c).
        k.matrix_store(direct, out, 384u32, 20u32, true);
        let kernel = finish(k)?;
        let p = pipeline(rt, &kernel)?;
        let src_v = halves(rng, (OFFSET + 8 * STRIDE + 16) as usize);
        let bufs = [upload_as(rt, Scalar::F32, &src_v)?, upload_as(rt, Scalar::F32, &vec![-1.0; 384 + 16 * 20])?];
        let args: Vec<Arg<'_>> = bufs.iter().map(Arg::from).collect();
        threads(rt, &p, &args, [32, 1, 1], [32, 1, 1])?;
        let got = download_as(&bufs[1], Scalar::F32)?;
        let at = |r: u32, c: u32| src_v[(OFFSET + r * STRIDE + c) as usize];
        let tile: Vec<f32> = (0..128).map(|i| at(i / 16, i % 16)).collect();
        let tile_t: Vec<f32> = (0..128).map(|i| at(i % 8, i / 8)).collect();
        check_f32_exact("direct load", &got[..128], &tile, describe_rc(16))?;
        check_f32_exact("load from threadgroup memory", &got[128..256], &tile, describe_rc(16))?;
        check_f32_exact("transposed load", &got[256..384], &tile_t, describe_rc(8))?;
        let mut want = vec![-1.0f32; 16 * 20];
        for r in 0..8 {
            for c in 0..16 {
                want[(c * 20 + r) as usize] = at(r, c);
            }
        }
        check_f32_exact("transposed strided store", &got[384..], &want, |i| format!("offset {}", 384 + i))
    })
}

/// Matrix loads from memory of `f16x4` vectors read it as its scalars
/// (offset and stride count halves): a 16×16 tile straight from a device
/// buffer's vector view, and 16×16 tiles, plain and transposed, from a
/// threadgroup array filled by whole-vector stores with rows padded to 24
/// halves (on CUDA the `ldmatrix` path: 16-byte rows); their product
/// checks the values on the way to the tensor cores as well.
pub fn matrix_loads_from_vector_memory(rt: &Runtime) -> CaseResult {
    seeded("matrix_loads_from_vector_memory", |rng| {
        const LD: u32 = 24;
        let t = MatrixType::new(Scalar::F16, 16, 16);
        let f16x4 = Type::vector(Scalar::F16, 4);
        let mut k = KernelBuilder::new("matrix_vector_loads");
        let src4 = k.buffer("src4", f16x4, Access::Read);
        let out = k.buffer("out", Type::F16, Access::ReadWrite);
        let prod = k.buffer("prod", Type::F32, Access::ReadWrite);
        let stage = k.threadgroup_array("stage", f16x4, 16 * LD / 4);
        let lane = k.let_("lane", thread_index_in_simdgroup());
        // 16 rows of 16 halves = 64 vectors, 2 per lane, into rows of LD halves.
        k.for_range("i", 0u32, 2u32, 1u32, |k, i| {
            let v = k.let_("v", lane * 2u32 + i);
            k.store(stage.at(v / 4u32 * (LD / 4) + v % 4u32), src4.get(v));
        });
        k.threadgroup_barrier(enigma_ir::MemFlags::Threadgroup);
        let direct = k.let_("direct", matrix_load(t, src4, 0u32, 16u32, false));
        let staged = k.let_("staged", matrix_load(t, stage, 0u32, LD, false));
        let transposed = k.let_("transposed", matrix_load(t, stage, 0u32, LD, true));
        k.matrix_store(direct, out, 0u32, 16u32, false);
        k.matrix_store(staged, out, 256u32, 16u32, false);
        k.matrix_store(transposed, out, 512u32, 16u32, false);
        let product = matrix_multiply_accumulate(staged, transposed, matrix_fill(MatrixType::new(Scalar::F32, 16, 16), 0.0f32));
        k.matrix_store(product, prod, 0u32, 16u32, false);
        let kernel = finish(k)?;
        let p = pipeline(rt, &kernel)?;
        let src_v = halves(rng, 256);
        let bytes: Vec<u8> = src_v.iter().flat_map(|v| f32_to_f16(*v).to_le_bytes()).collect();
        let bufs = [
            rt.buffer_from_bytes(f16x4, &bytes).ctx("allocating a buffer")?,
            upload_as(rt, Scalar::F16, &[0.0; 768])?,
            upload_as(rt, Scalar::F32, &[0.0; 256])?,
        ];
        let args: Vec<Arg<'_>> = bufs.iter().map(Arg::from).collect();
        threads(rt, &p, &args, [32, 1, 1], [32, 1, 1])?;
        let got = download_as(&bufs[1], Scalar::F16)?;
        let transposed_v: Vec<f32> = (0..256).map(|i| src_v[(i % 16) * 16 + i / 16]).collect();
        check_f32_exact("load from a device vector view", &got[..256], &src_v, describe_rc(16))?;
        check_f32_exact("load from threadgroup vectors", &got[256..512], &src_v, describe_rc(16))?;
        check_f32_exact("transposed load from threadgroup vectors", &got[512..], &transposed_v, describe_rc(16))?;
        let want = reference(&src_v, &transposed_v, None, 16, 16, 16);
        check_f32_exact("their product", &download_as(&bufs[2], Scalar::F32)?, &want, describe_rc(16))
    })
}

/// Quantized tile loads (`matrix_load_quantized`) of both 4-bit codes in
/// both layouts: a 16×16 tile in seed 002's `[K/8][N]` words (at a word
/// offset and a stride wider than the tile), and 64×32 tiles in fragment
/// order (two units side by side; one at a 16-byte aligned
/// offset and stride, one not, which on CUDA are the vector and the word
/// path), f16 scales at an offset. Each is stored as it is, and the same load
/// is used only as the B side of a product with a row selector (0/1, one 1
/// per row; on CUDA the B-layout path that decodes in registers); both
/// against the decoding rule (`QuantLayout::locate`, `QuantCode::value`
/// times the scale, rounded once to f16), exactly. Random scales make the
/// products round.
pub fn matrix_quantized_loads(rt: &Runtime) -> CaseResult {
    seeded("matrix_quantized_loads", |rng| {
        const SCALE_OFFSET: u32 = 5;
        // (layout, rows, columns, word offset, stride between rows of units)
        let loads = [(QuantLayout::Rows, 16u32, 16u32, 3u32, 21u32), (QuantLayout::Fragments, 64, 32, 4, 260), (QuantLayout::Fragments, 64, 32, 3, 261)];
        for (layout, rows, cols, offset, stride) in loads {
            for code in QuantCode::TILE {
                let t = MatrixType::new(Scalar::F16, rows as u8, cols as u8);
                let selector_ty = MatrixType::new(Scalar::F16, 16, rows as u8);
                let mut k = KernelBuilder::new(format!("matrix_load_{code}_{layout}"));
                let words = k.buffer("words", Type::U32, Access::Read);
                let scales = k.buffer("scales", Type::F16, Access::Read);
                let rows_chosen = k.buffer("rows_chosen", Type::F16, Access::Read);
                let out = k.buffer("out", Type::F16, Access::ReadWrite);
                let prod = k.buffer("prod", Type::F32, Access::ReadWrite);
                let direct = k.let_("direct", matrix_load_quantized(t, code, layout, words, offset, stride, scales, SCALE_OFFSET));
                k.matrix_store(direct, out, 0u32, cols, false);
                let b = k.let_("b", matrix_load_quantized(t, code, layout, words, offset, stride, scales, SCALE_OFFSET));
                let selector = k.let_("selector", matrix_load(selector_ty, rows_chosen, 0u32, rows, false));
                let zero = matrix_fill(MatrixType::new(Scalar::F32, 16, cols as u8), 0.0f32);
                k.matrix_store(matrix_multiply_accumulate(selector, b, zero), prod, 0u32, cols, false);
                let kernel = finish(k)?;
                let p = pipeline(rt, &kernel)?;
                let extent = (0..rows).flat_map(|r| (0..cols).map(move |c| layout.locate(r, c))).map(|(u, w, _)| u * stride + w + 1).max().unwrap_or(1);
                let word_v: Vec<u32> = (0..offset + extent).map(|_| rng.gen()).collect();
                let scale_bits: Vec<u16> = (0..SCALE_OFFSET + cols).map(|_| f32_to_f16(rng.gen_range(-2.0f32..2.0))).collect();
                let scale_bytes: Vec<u8> = scale_bits.iter().flat_map(|s| s.to_le_bytes()).collect();
                // Row i of the product is row `chosen(i)` of the tile.
                let chosen = |i: u32| (i * 7 + 3) % rows;
                let selector_v: Vec<f32> = (0..16 * rows).map(|x| if x % rows == chosen(x / rows) { 1.0 } else { 0.0 }).collect();
                let bufs = [
                    upload(rt, &word_v)?,
                    rt.buffer_from_bytes(Type::F16, &scale_bytes).ctx("allocating a buffer")?,
                    upload_as(rt, Scalar::F16, &selector_v)?,
                    upload_as(rt, Scalar::F16, &vec![0.0; (rows * cols) as usize])?,
                    upload_as(rt, Scalar::F32, &vec![0.0; (16 * cols) as usize])?,
                ];
                let args: Vec<Arg<'_>> = bufs.iter().map(Arg::from).collect();
                threads(rt, &p, &args, [32, 1, 1], [32, 1, 1])?;
                let value = |r: u32, c: u32| {
                    let (u, w, nibble) = layout.locate(r, c);
                    let word = word_v[(offset + u * stride + w) as usize];
                    let scale = f16_to_f32(scale_bits[(SCALE_OFFSET + c) as usize]);
                    f16_to_f32(f32_to_f16(code.value(word >> (4 * nibble)) * scale))
                };
                let want: Vec<f32> = (0..rows * cols).map(|i| value(i / cols, i % cols)).collect();
                let what = format!("{code} {rows}x{cols} tile in the {layout} layout at word {offset}");
                check_f32_exact(&what, &download_as(&bufs[3], Scalar::F16)?, &want, describe_rc(cols as usize))?;
                // The product adds to a zero accumulator: −0 comes out +0.
                let selected: Vec<f32> = (0..16 * cols).map(|i| value(chosen(i / cols), i % cols) + 0.0).collect();
                check_f32_exact(&format!("row selector · {what}"), &download_as(&bufs[4], Scalar::F32)?, &selected, describe_rc(cols as usize))?;
            }
        }
        Ok(())
    })
}

pub fn matrix_fill_and_diagonal(rt: &Runtime) -> CaseResult {
    seeded("matrix_fill_and_diagonal", |rng| {
        let t = MatrixType::new(Scalar::F16, 8, 8);
        let mut k = KernelBuilder::new("matrix_fill");
        let b = k.buffer("B", Type::F16, Access::Read);
        let out = k.buffer("out", Type::F16, Access::ReadWrite);
        let mb = k.let_("b", matrix_load(t, b, 0u32, 8u32, false));
        k.matrix_store(matrix_multiply(matrix_fill(t, lit(Scalar::F16, 0.5)), mb), out, 0u32, 8u32, false);
        k.matrix_store(matrix_multiply(matrix_diagonal(t, lit(Scalar::F16, 3.0)), mb), out, 64u32, 8u32, false);
        k.matrix_store(matrix_diagonal(t, lit(Scalar::F16, -2.0)), out, 128u32, 8u32, false);
        let kernel = finish(k)?;
        let p = pipeline(rt, &kernel)?;
        let bv = halves(rng, 64);
        let bufs = [upload_as(rt, Scalar::F16, &bv)?, upload_as(rt, Scalar::F16, &[0.0; 192])?];
        let args: Vec<Arg<'_>> = bufs.iter().map(Arg::from).collect();
        threads(rt, &p, &args, [32, 1, 1], [32, 1, 1])?;
        let got = download_as(&bufs[1], Scalar::F16)?;
        let filled: Vec<f32> = (0..64).map(|i| (0..8).map(|j| 0.5 * bv[j * 8 + i % 8]).sum()).collect();
        let tripled: Vec<f32> = bv.iter().map(|v| 3.0 * v).collect();
        let diagonal: Vec<f32> = (0..64).map(|i| if i / 8 == i % 8 { -2.0 } else { 0.0 }).collect();
        check_f32_exact("filled(0.5)·B", &got[..64], &filled, describe_rc(8))?;
        check_f32_exact("diagonal(3)·B", &got[64..128], &tripled, describe_rc(8))?;
        check_f32_exact("diagonal(-2)", &got[128..], &diagonal, describe_rc(8))
    })
}

/// Seed 002 §3.2: a threadgroup of 4 SIMD groups computes a 64×64 tile of
/// C = A·B, each SIMD group a 32×32 quarter (2×2 partition), stepping
/// through K = 48 eight at a time with f16 inputs and f32 accumulators.
pub fn matrix_tile_64x64_four_simdgroups(rt: &Runtime) -> CaseResult {
    seeded("matrix_tile_64x64_four_simdgroups", |rng| {
        const K: u32 = 48;
        let at = MatrixType::new(Scalar::F16, 32, 8);
        let bt = MatrixType::new(Scalar::F16, 8, 32);
        let ct = MatrixType::new(Scalar::F32, 32, 32);
        let mut k = KernelBuilder::new("tile_64x64");
        let a = k.buffer("A", Type::F16, Access::Read);
        let b = k.buffer("B", Type::F16, Access::Read);
        let c = k.buffer("C", Type::F32, Access::ReadWrite);
        let sg = k.let_("sg", simdgroup_index_in_threadgroup());
        let row0 = k.let_("row0", sg / 2u32 * 32u32);
        let col0 = k.let_("col0", sg % 2u32 * 32u32);
        let acc = k.var("acc", matrix_fill(ct, 0.0f32));
        k.for_range("kk", 0u32, K, 8u32, |k, kk| {
            let ma = k.let_("ma", matrix_load(at, a, row0 * K + kk, K, false));
            let mb = k.let_("mb", matrix_load(bt, b, kk * 64u32 + col0, 64u32, false));
            k.assign(acc, matrix_multiply_accumulate(ma, mb, acc));
        });
        k.matrix_store(acc, c, row0 * 64u32 + col0, 64u32, false);
        let kernel = finish(k)?;
        let p = pipeline(rt, &kernel)?;
        let (av, bv) = (halves(rng, (64 * K) as usize), halves(rng, (K * 64) as usize));
        let bufs = [upload_as(rt, Scalar::F16, &av)?, upload_as(rt, Scalar::F16, &bv)?, upload_as(rt, Scalar::F32, &[0.0; 64 * 64])?];
        let args: Vec<Arg<'_>> = bufs.iter().map(Arg::from).collect();
        threads(rt, &p, &args, [128, 1, 1], [128, 1, 1])?;
        check_f32_exact("64×64 tile", &download_as(&bufs[2], Scalar::F32)?, &reference(&av, &bv, None, 64, K as usize, 64), describe_rc(64))
    })
}

/// The per-lane view: each lane writes `2·x + 1` for each element it holds
/// at the row and column the backend's lane map gives; every element of
/// the tile must be written exactly once.
pub fn matrix_per_lane_view(rt: &Runtime) -> CaseResult {
    seeded("matrix_per_lane_view", |rng| {
        let t = MatrixType::new(Scalar::F32, 16, 16);
        let mut k = KernelBuilder::new("per_lane_view");
        let src = k.buffer("src", Type::F32, Access::Read);
        let out = k.buffer("out", Type::F32, Access::ReadWrite);
        let m = k.let_("m", matrix_load(t, src, 0u32, 16u32, false));
        for i in 0..t.per_lane() as u8 {
            let at = matrix_coord(t, i, false) * 16u32 + matrix_coord(t, i, true);
            k.store(out.at(at), out.get(at) + thread_element(m, i) * 2.0f32 + 1.0f32);
        }
        let kernel = finish(k)?;
        let p = pipeline(rt, &kernel)?;
        let sv = halves(rng, 256);
        let bufs = [upload_as(rt, Scalar::F32, &sv)?, upload_as(rt, Scalar::F32, &[0.0; 256])?];
        let args: Vec<Arg<'_>> = bufs.iter().map(Arg::from).collect();
        threads(rt, &p, &args, [32, 1, 1], [32, 1, 1])?;
        let want: Vec<f32> = sv.iter().map(|x| 2.0 * x + 1.0).collect();
        check_f32_exact("per-lane view", &download_as(&bufs[1], Scalar::F32)?, &want, describe_rc(16))
    })
}

/// A matrix kernel dispatched so that a threadgroup has a partial SIMD
/// group is refused before it runs, naming the kernel and the numbers.
pub fn matrix_partial_simdgroup_refused(rt: &Runtime) -> CaseResult {
    let t = MatrixType::new(Scalar::F32, 8, 8);
    let mut k = KernelBuilder::new("matrix_partial");
    let out = k.buffer("out", Type::F32, Access::ReadWrite);
    k.matrix_store(matrix_fill(t, 1.0f32), out, 0u32, 8u32, false);
    let kernel = finish(k)?;
    let p = pipeline(rt, &kernel)?;
    let buf = upload_as(rt, Scalar::F32, &[0.0; 64])?;
    let err = rt.dispatch_threads(&p, &[Arg::from(&buf)], [48, 1, 1], [48, 1, 1]).err().ok_or("a 48-thread threadgroup was accepted")?;
    let want = "kernel `matrix_partial` uses SIMD-group matrices, which need whole SIMD groups, but this dispatch has a threadgroup of 48 threads, not a multiple of 32";
    ensure!(err.to_string() == want, "error: {err}\nexpected: {want}");
    let edge = rt.dispatch_threads(&p, &[Arg::from(&buf)], [40, 1, 1], [32, 1, 1]).err().ok_or("a partial edge threadgroup was accepted")?;
    ensure!(edge.to_string().contains("a threadgroup of 8 threads"), "error: {edge}");
    Ok(())
}
