//! What the MSL generator writes so that its output means, under the Metal
//! Shading Language Specification, what the IR means (the simulator's
//! semantics), for the constructs where plain C++ spelling would not:
//! threadgroup f32 atomics, device-fence handoffs, `simd_ballot`'s upper
//! bits, 8/16-bit and signed arithmetic, float-to-integer conversion, and
//! f16/bf16 products. The conversion helpers are also compiled with g++ and
//! run against Rust's `as`, which saturates and sends NaN to 0 as the
//! simulator does.

mod common;

use common::validated;
use enigma_codegen::{cuda, msl};
use enigma_ir::builder::*;
use enigma_ir::{Access, AtomicOp, Kernel, MemFlags, Scalar, Type};

fn msl_of(kernel: Kernel, version: (u8, u8)) -> String {
    let (kernel, info) = validated(kernel);
    msl::write_string(&kernel, &info, &msl::Options { language_version: version, ..msl::Options::default() })
        .unwrap_or_else(|e| panic!("{e}"))
}

fn cuda_of(kernel: Kernel) -> String {
    let (kernel, info) = validated(kernel);
    cuda::write_string(&kernel, &info, &cuda::Options::default()).unwrap_or_else(|e| panic!("{e}")).source
}

/// MSL has `atomic_float` in device memory only (spec §6.15.4): threadgroup
/// f32 atomics hold their bits in an `atomic_uint`; device ones stay
/// `atomic_float`.
#[test]
fn threadgroup_f32_atomics_are_a_compare_and_swap_loop_on_uint_bits() {
    let mut k = KernelBuilder::new("float_atomics");
    let out = k.buffer("out", Type::F32, Access::ReadWrite);
    let total = k.buffer("total", Type::F32, Access::ReadWrite);
    let s = k.threadgroup_array("s", Type::F32, 1);
    let lid = k.let_("lid", thread_index_in_threadgroup());
    k.if_(lid.eq(0u32), |k| k.store(s.at(0u32), 0.0f32));
    k.threadgroup_barrier(MemFlags::Threadgroup);
    k.atomic(AtomicOp::Add, s.at(0u32), 1.5f32);
    k.atomic(AtomicOp::Add, total.at(0u32), 1.5f32);
    k.threadgroup_barrier(MemFlags::Threadgroup);
    k.store(out.at(lid), s.get(0u32));
    let text = msl_of(k.finish().expect("a kernel"), (3, 1));
    assert!(!text.contains("threadgroup atomic_float"), "{text}");
    for needle in [
        "threadgroup atomic_uint s[1];",
        "atomic_store_explicit(&s[0u], as_type<uint>(0.0f), memory_order_relaxed)",
        "enigma_atomic_fetch_add_float(&s[0u], 1.5f)",
        "as_type<float>(atomic_load_explicit(&s[0u], memory_order_relaxed))",
        "as_type<uint>(as_type<float>(seen) + operand)",
        "device atomic_float* total",
        "atomic_fetch_add_explicit(&total[0u], 1.5f, memory_order_relaxed)",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in\n{text}");
    }
}

/// Device memory is coherent only within a threadgroup unless a buffer is
/// `coherent(device)` (spec §4.8): a kernel with device fences declares
/// every buffer it writes plainly so; read-only and atomic buffers, and
/// kernels without fences, are unchanged.
#[test]
fn kernels_with_device_fences_declare_written_buffers_coherent() {
    let text = msl_of(common::device_fences(), (3, 2));
    assert!(text.contains("coherent(device) device uint* partials [[buffer(0)]]"), "{text}");
    assert!(text.contains("    device atomic_uint* counter [[buffer(1)]]"), "{text}");
    let plain = msl_of(common::atomics_device(), (3, 2));
    assert!(!plain.contains("coherent"), "{plain}");
}

/// The top 32 bits of `simd_ballot` are undefined on 32-wide SIMD groups
/// (spec §6.9.2); the IR's are zero.
#[test]
fn simd_ballot_masks_the_upper_bits() {
    let text = msl_of(common::simd_functions(), (3, 1));
    assert!(text.contains("ulong(simd_ballot(x > 0.0f)) & 0xfffffffful"), "{text}");
    assert!(!text.contains("= ulong(simd_ballot(x > 0.0f));"), "{text}");
}

/// C++ promotes 8- and 16-bit integers to `int`, where `60000 * 60000` and
/// `-1 << 15` are undefined, and `-INT_MIN` overflows: the IR wraps, so
/// these go through unsigned types.
#[test]
fn narrow_products_shifts_and_signed_negation_go_through_unsigned() {
    let mut k = KernelBuilder::new("wrapping");
    let a = k.buffer("a", Type::scalar(Scalar::U16), Access::ReadWrite);
    let b = k.buffer("b", Type::scalar(Scalar::I16), Access::ReadWrite);
    let c = k.buffer("c", Type::I32, Access::ReadWrite);
    let i = k.let_("i", thread_position_in_grid().x());
    let x = k.let_("x", a.get(i));
    let y = k.let_("y", b.get(i));
    let z = k.let_("z", c.get(i));
    k.store(a.at(i), x * x);
    k.store(b.at(i), y << 15);
    k.store(c.at(i), -z);
    let kernel = k.finish().expect("a kernel");
    let text = msl_of(kernel.clone(), (3, 1));
    for needle in ["a[i] = ushort(uint(x) * uint(x));", "b[i] = short(uint(y) << uint(short(15)));", "c[i] = int(-uint(z));"] {
        assert!(text.contains(needle), "missing {needle:?} in\n{text}");
    }
    let cuda = cuda_of(kernel);
    for needle in ["a[i] = (unsigned short)((uint)x * (uint)x);", "c[i] = (int)(-((uint)z));"] {
        assert!(cuda.contains(needle), "missing {needle:?} in\n{cuda}");
    }
}

/// SIMD-group matrix products take f16 and bf16 fragments with f32
/// accumulators as they are (as MLX and llama.cpp's kernels do), without
/// widening each fragment to float first.
#[test]
fn fragments_are_multiplied_without_widening() {
    let text = msl_of(common::simdgroup_matrices(), (3, 1));
    assert!(text.contains("simdgroup_multiply_accumulate(sum, a.f[i][k], b.f[k][j], sum);"), "{text}");
    assert!(!text.contains("enigma_fragment_as"), "{text}");
}

/// A kernel converting an f32 input to every integer type (and, with
/// `vector`, an f32x2 to i32x2).
fn conversions(vector: bool) -> Kernel {
    let mut k = KernelBuilder::new("conversions");
    let x = k.buffer("x", Type::F32, Access::Read);
    let v = k.buffer("v", Type::vector(Scalar::F32, 2), Access::Read);
    let i = k.let_("i", thread_position_in_grid().x());
    for s in [Scalar::I8, Scalar::U8, Scalar::I16, Scalar::U16, Scalar::I32, Scalar::U32, Scalar::I64, Scalar::U64] {
        let out = k.buffer(&format!("out_{}", s.msl_name()), Type::scalar(s), Access::ReadWrite);
        k.store(out.at(i), x.get(i).cast(Type::scalar(s)));
    }
    if vector {
        let pairs = k.buffer("pairs", Type::vector(Scalar::I32, 2), Access::ReadWrite);
        k.store(pairs.at(i), v.get(i).cast(Type::vector(Scalar::I32, 2)));
    }
    k.finish().expect("a kernel")
}

/// Float-to-integer conversion out of range is undefined in MSL and CUDA
/// C++; the generated code saturates and sends NaN to 0, as the simulator
/// does: MSL through `enigma_convert_<T>`, CUDA through `enigma::convert`.
#[test]
fn float_to_integer_conversions_say_what_the_simulator_does() {
    let text = msl_of(conversions(true), (3, 1));
    for needle in ["out_int[i] = enigma_convert_int(x[i]);", "out_ulong[i] = enigma_convert_ulong(x[i]);", "pairs[i] = enigma_convert_int2(v[i]);"] {
        assert!(text.contains(needle), "missing {needle:?} in\n{text}");
    }
    let cuda = cuda_of(conversions(true));
    for needle in ["out_int[i] = enigma::convert<int>(x[i]);", "out_uint[i] = enigma::convert<uint>(x[i]);", "__float2int_rz(x)"] {
        assert!(cuda.contains(needle), "missing {needle:?} in\n{cuda}");
    }
}

/// The MSL helpers, compiled as C++ with g++ and run on the edge values,
/// give what Rust's saturating `as` gives.
#[test]
fn the_msl_conversion_helpers_agree_with_saturating_casts() {
    if !std::process::Command::new("g++").arg("--version").output().is_ok_and(|o| o.status.success()) {
        println!("skipped: g++ is not installed, so the conversion helpers are not run");
        return;
    }
    let text = msl_of(conversions(false), (3, 1));
    // The helpers: from the first one to the kernel.
    let start = text.find("// f32 to ").expect("the helpers");
    let end = text.find("kernel void").expect("the kernel");
    let helpers = &text[start..end];
    let inputs: [f32; 16] = [
        f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 0.0, -0.0, -0.75, 0.75, 127.9, 128.0, -128.5, 255.5, 65535.9, 2147483520.0,
        2147483648.0, -2147483904.0, 1.0e20,
    ];
    let program = format!(
        "#include <cmath>\n#include <cstdio>\ntypedef unsigned char uchar; typedef unsigned short ushort; typedef unsigned int uint; \
         typedef unsigned long ulong;\nusing std::isnan;\n{helpers}\nint main() {{\n    const float xs[] = {{{}}};\n    \
         for (float x : xs) printf(\"%d %u %d %u %d %u %ld %lu\\n\", int(enigma_convert_char(x)), unsigned(enigma_convert_uchar(x)), \
         int(enigma_convert_short(x)), unsigned(enigma_convert_ushort(x)), enigma_convert_int(x), enigma_convert_uint(x), \
         enigma_convert_long(x), enigma_convert_ulong(x));\n}}\n",
        inputs.iter().map(|x| if x.is_nan() { "NAN".to_string() } else if x.is_infinite() { format!("{}INFINITY", if *x < 0.0 { "-" } else { "" }) } else { format!("{x:?}f") }).collect::<Vec<_>>().join(", ")
    );
    let dir = std::env::temp_dir().join(format!("enigma-msl-conversions-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    std::fs::write(dir.join("conversions.cpp"), &program).expect("write the program");
    let built = std::process::Command::new("g++")
        .args(["-std=c++17", "-O1", "-o"])
        .arg(dir.join("conversions"))
        .arg(dir.join("conversions.cpp"))
        .output()
        .expect("run g++");
    assert!(built.status.success(), "{}\n{program}", String::from_utf8_lossy(&built.stderr));
    let run = std::process::Command::new(dir.join("conversions")).output().expect("run the program");
    std::fs::remove_dir_all(&dir).ok();
    let got = String::from_utf8_lossy(&run.stdout).into_owned();
    let want: String = inputs
        .iter()
        .map(|&x| {
            format!(
                "{} {} {} {} {} {} {} {}\n",
                x as i8, x as u8, x as i16, x as u16, x as i32, x as u32, x as i64, x as u64
            )
        })
        .collect();
    assert_eq!(got, want, "{program}");
}
