//! Cooperative tensor operations in generated code: MSL 4.0 writes them with
//! MetalPerformancePrimitives (`mpp::tensor_ops::matmul2d`, golden file
//! `cooperative_gemm_tile.msl`), older MSL on SIMD-group matrix fragments
//! (`cooperative_gemm_tile_fragments.msl`); `combine` both ways, over four
//! SIMD groups and one (`cooperative_combine*.msl`); tests/msl_syntax.rs
//! and tests/msl_strict.rs check every golden file against their shims. CUDA
//! holds the tensors in registers: a product over swizzled threadgroup
//! tiles runs on `wgmma` where the source targets sm_90a (golden file
//! `cooperative_wgmma_gemm.cu`), on the scalar path elsewhere; reductions
//! go through shared memory; a cooperative left operand and reductions of
//! SIMD-group-scope tensors are refused.

use enigma_codegen::{cuda, msl};
use enigma_ir::text::parse;
use enigma_ir::{validate, Kernel, KernelInfo};

const GEMM_TILE: &str = "\
kernel cooperative_gemm_tile(A: device f16 read, B: device f16 read, C: device f32 read_write, R: device f32 read_write, M: u32, N: u32, K: u32) {
    threadgroup Bs: f16[2048]
    var row: u32
    var i: u32
    cooperative c: cooperative_tensor<f32, 64, 64, simdgroups(4)>
    cooperative d: cooperative_tensor<f32, 64, 32, simdgroups(4)>
    cooperative rows: cooperative_tensor<f32, 64, 1, simdgroups(4)>

    row = (threadgroup_position_in_grid.x * 64u32)
    matmul2d(matmul2d_descriptor(64, 64, dynamic_extent, false, false, false, multiply), simdgroups(4), tensor(A, (row * K), K, 64u32, 1u32, K), tensor(B, 0u32, N, K, 1u32, N), c)
    for i in (0u32, get_capacity(c), 1u32) {
        if (is_valid_element(c, i)) {
            c[i] = max(c[i], cast<f32>(get_multidimensional_index(c, i, 0)))
        }
    }
    matmul2d(matmul2d_descriptor(64, 32, 64, false, true, true, multiply_accumulate), simdgroups(4), c, tensor(Bs, 0u32, 64u32, 32u32, 1u32, 64u32), d)
    reduce_rows(d, rows, max)
    cooperative_store(c, tensor(C, (row * N), N, 64u32, 1u32, N))
    cooperative_store(rows, tensor(R, row, 1u32, 64u32, 1u32, 1u32))
}
";

fn gemm_tile() -> (Kernel, KernelInfo) {
    let kernel = parse(GEMM_TILE).unwrap_or_else(|e| panic!("{e}"));
    let info = validate(&kernel, &Default::default()).unwrap_or_else(|e| panic!("{e}"));
    (kernel, info)
}

#[test]
fn msl_4_writes_metal_performance_primitives() {
    let (kernel, info) = gemm_tile();
    let options = msl::Options { language_version: msl::MPP_VERSION, ..msl::Options::default() };
    let metal = msl::write_string(&kernel, &info, &options).unwrap_or_else(|e| panic!("{e}"));
    for needle in [
        "#include <MetalPerformancePrimitives/MetalPerformancePrimitives.h>",
        "mpp::tensor_ops::matmul2d<matmul0_desc, metal::execution_simdgroups<4>> matmul0;",
        "auto c = matmul0.get_destination_cooperative_tensor<",
        "matmul0.run(mpp_left, mpp_right, c);",
        "matmul1.run(c, mpp_right, d);",
        "auto rows = matmul1.get_row_reduction_destination_cooperative_tensor<decltype(c), ",
        "mpp::tensor_ops::reduce_rows(d, rows, mpp::tensor_ops::reduction_operation::max, mpp::tensor_ops::reduction_operation_identity<float>::max_identity);",
    ] {
        assert!(metal.contains(needle), "missing {needle:?} in\n{metal}");
    }
    insta::assert_snapshot!("cooperative_gemm_tile.msl", metal);
}

#[test]
fn older_msl_writes_simdgroup_matrix_fragments() {
    let (kernel, info) = gemm_tile();
    assert!(info.features.contains(&enigma_ir::Feature::CooperativeTensors));
    // Cooperative tensors no longer raise the version a kernel needs: the
    // version asked for chooses the lowering.
    assert_eq!(msl::needed_version(&info), (3, 1));
    let metal = msl::write_string(&kernel, &info, &msl::Options::default()).unwrap_or_else(|e| panic!("{e}"));
    for needle in [
        "#include <metal_simdgroup_matrix>",
        "enigma_coop_frag<float, 64, 64, 4> c;",
        "enigma_coop_frag<float, 64, 32, 4> d;",
        "enigma_coop_vec<float, 64, 1, 4> rows;",
        "threadgroup float coop_scratch_f32[256];",
        "enigma_coop_matmul<half, false, false, false>(mpp_left, mpp_right, c, mpp_left.x, simdgroup_index_in_threadgroup, thread_index_in_simdgroup);",
        "enigma_coop_matmul<float, false, true, true>(c, mpp_right, d, 64u, simdgroup_index_in_threadgroup, thread_index_in_simdgroup);",
        "enigma_coop_reduce<float, 1, true>(d, rows, -INFINITY, coop_scratch_f32, simdgroup_index_in_threadgroup, thread_index_in_simdgroup);",
        "enigma_coop_coord(c, i, 0, simdgroup_index_in_threadgroup, thread_index_in_simdgroup)",
    ] {
        assert!(metal.contains(needle), "missing {needle:?} in\n{metal}");
    }
    assert!(!metal.contains("MetalPerformancePrimitives.h") && !metal.contains("mpp::"), "{metal}");
    insta::assert_snapshot!("cooperative_gemm_tile_fragments.msl", metal);
    // Every version the generator writes lists the feature.
    for version in msl::VERSIONS {
        let options = msl::Options { language_version: version, ..msl::Options::default() };
        assert!(msl::supported_features(&options).contains(&enigma_ir::Feature::CooperativeTensors), "{version:?}");
    }
}

/// One SIMD group's tensors: f16 inputs into an f16 destination, a column
/// reduction (no threadgroup scratch for one SIMD group), a load before
/// accumulating, slot writes; golden files below 4.0 and at 4.0, which the
/// g++ and strict checks compile.
const ONE_SIMDGROUP: &str = "\
kernel cooperative_one_simdgroup(A: device f16 read, B: device f16 read, C: device f16 read_write, S: device f16 read_write) {
    var i: u32
    cooperative c: cooperative_tensor<f16, 16, 32, simdgroup>
    cooperative s: cooperative_tensor<f16, 1, 32, simdgroup>

    cooperative_load(c, tensor(C, 0u32, 32u32, 16u32, 1u32, 32u32))
    matmul2d(matmul2d_descriptor(16, 32, 24, true, false, false, multiply_accumulate), simdgroup, tensor(A, 0u32, 16u32, 24u32, 1u32, 16u32), tensor(B, 0u32, 32u32, 24u32, 1u32, 32u32), c)
    for i in (0u32, get_capacity(c), 1u32) {
        if (is_valid_element(c, i)) {
            c[i] = (c[i] * 2.0f16)
        }
    }
    reduce_columns(c, s, sum)
    cooperative_store(c, tensor(C, 0u32, 32u32, 16u32, 1u32, 32u32))
    cooperative_store(s, tensor(S, 0u32, 32u32, 1u32, 1u32, 32u32))
}
";

#[test]
fn one_simdgroup_tensors_in_both_lowerings() {
    let kernel = parse(ONE_SIMDGROUP).unwrap_or_else(|e| panic!("{e}"));
    let info = validate(&kernel, &Default::default()).unwrap_or_else(|e| panic!("{e}"));
    let fragments = msl::write_string(&kernel, &info, &msl::Options::default()).unwrap_or_else(|e| panic!("{e}"));
    for needle in [
        "enigma_coop_frag<half, 16, 32, 1> c;",
        "enigma_coop_vec<half, 1, 32, 1> s;",
        "enigma_coop_load(c, enigma_coop_view_of(C + 0u, 32u, 16u, 1u, 32u), 0u, thread_index_in_simdgroup);",
        "enigma_coop_matmul<half, true, false, true>(mpp_left, mpp_right, c, 24u, 0u, thread_index_in_simdgroup);",
        "enigma_coop_reduce<float, 0, false>(c, s, 0.0f, nullptr, 0u, thread_index_in_simdgroup);",
    ] {
        assert!(fragments.contains(needle), "missing {needle:?} in\n{fragments}");
    }
    assert!(!fragments.contains("threadgroup float coop_scratch"), "{fragments}");
    insta::assert_snapshot!("cooperative_one_simdgroup_fragments.msl", fragments);
    let options = msl::Options { language_version: msl::MPP_VERSION, ..msl::Options::default() };
    let mpp = msl::write_string(&kernel, &info, &options).unwrap_or_else(|e| panic!("{e}"));
    assert!(mpp.contains("mpp::tensor_ops::matmul2d<matmul0_desc, metal::execution_simdgroup> matmul0;"), "{mpp}");
    insta::assert_snapshot!("cooperative_one_simdgroup.msl", mpp);
}

#[test]
fn off_hopper_a_cooperative_left_operand_goes_through_shared_memory() {
    let (kernel, info) = gemm_tile();
    let cu = cuda::write_string(&kernel, &info, &cuda::Options::default()).unwrap_or_else(|e| panic!("{e}")).source;
    for needle in ["__shared__ float enigma_left[4096];", "const float enigma_x = (float)enigma_left[enigma_r * 64u + enigma_kk];"] {
        assert!(cu.contains(needle), "missing {needle:?} in\n{cu}");
    }
}

/// The fragment lowering's slot layout, compiled as C++ with g++ against
/// the shim and run: for each tensor shape and scope, every element is in
/// exactly one valid slot of one thread, within the tensor, and every
/// valid slot's fragment or array entry exists.
#[test]
fn the_fragment_layout_holds_every_element_exactly_once() {
    if !std::process::Command::new("g++").arg("--version").output().is_ok_and(|o| o.status.success()) {
        println!("skipped: g++ is not installed, so the fragment layout is not run");
        return;
    }
    let (kernel, info) = gemm_tile();
    let text = msl::write_string(&kernel, &info, &msl::Options::default()).unwrap_or_else(|e| panic!("{e}"));
    let start = text.find("// SIMD-group matrix tiles").expect("the tile helpers");
    let end = text.find("kernel void").expect("the kernel");
    let helpers = &text[start..end];
    // (rows, cols, SIMD groups, fragments?) of each tensor checked.
    let shapes: [(u32, u32, u32, bool); 8] = [
        (64, 64, 4, true),
        (64, 32, 4, true),
        (8, 8, 1, true),
        (24, 40, 4, true),
        (256, 8, 32, true),
        (64, 1, 4, false),
        (1, 64, 1, false),
        (5, 7, 2, false),
    ];
    let checks: Vec<String> = shapes
        .iter()
        .map(|(r, c, s, frag)| format!("    failures += check<enigma_coop_{}<float, {r}, {c}, {s}>, {r}, {c}, {s}, {frag}>();", if *frag { "frag" } else { "vec" }))
        .collect();
    let program = format!(
        "#include <metal_stdlib>\n#include <metal_simdgroup_matrix>\n#include <cstdio>\n#include <vector>\nusing namespace metal;\n{helpers}\n\
         template <typename TENSOR, int R, int C, int S, bool FRAG> int check() {{\n    \
             TENSOR t;\n    std::vector<int> seen(R * C, 0);\n    int bad = 0;\n    \
             const uint entries = sizeof(t) / sizeof(float);\n    \
             for (uint sg = 0; sg < S; ++sg) for (uint lane = 0; lane < 32; ++lane) for (uint i = 0; i < enigma_coop_capacity(t) + 2; ++i) {{\n        \
                 if (!enigma_coop_valid(t, i, sg, lane)) continue;\n        \
                 if (i >= enigma_coop_capacity(t) || (FRAG ? i / 2 >= entries / 2 : i >= entries)) bad++;\n        \
                 uint r = enigma_coop_coord(t, i, 1, sg, lane), c = enigma_coop_coord(t, i, 0, sg, lane);\n        \
                 if (r >= uint(R) || c >= uint(C)) {{ bad++; continue; }}\n        \
                 seen[r * C + c]++;\n    }}\n    \
             for (int e = 0; e < R * C; ++e) if (seen[e] != 1) bad++;\n    \
             if (bad) printf(\"%dx%d over %d SIMD groups: %d problems\\n\", R, C, S, bad);\n    \
             return bad;\n}}\n\
         int main() {{\n    int failures = 0;\n{}\n    printf(\"failures %d\\n\", failures);\n    return 0;\n}}\n",
        checks.join("\n")
    );
    let dir = std::env::temp_dir().join(format!("enigma-coop-layout-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    std::fs::write(dir.join("layout.cpp"), &program).expect("write the program");
    let shim = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/msl_shim");
    let built = std::process::Command::new("g++")
        .args(["-std=c++17", "-O1", "-Wno-attributes", "-x", "c++", "-I"])
        .arg(&shim)
        .arg("-o")
        .arg(dir.join("layout"))
        .arg(dir.join("layout.cpp"))
        .output()
        .expect("run g++");
    assert!(built.status.success(), "{}\n{program}", String::from_utf8_lossy(&built.stderr));
    let run = std::process::Command::new(dir.join("layout")).output().expect("run the program");
    std::fs::remove_dir_all(&dir).ok();
    let out = String::from_utf8_lossy(&run.stdout).into_owned();
    assert!(run.status.success() && out.ends_with("failures 0\n"), "{out}");
}

/// The fragment lowering's `combine` helpers, compiled as C++ with g++
/// against the shim and run with one `std::thread` per thread of the
/// scope: a threadgroup barrier is a `std::barrier` of them all and
/// `simd_shuffle` exchanges through a shared board between two barriers
/// (`max` and `min` on floats are defined for real: the shim's only type-check).
/// Each destination element must become `op(dest, src)` with the source
/// element of its row and column (same shape), its row (m×1) or its column
/// (1×n), over several SIMD groups (scratch) and one (shuffles).
#[test]
fn the_fragment_combine_takes_each_elements_source_by_its_coordinates() {
    if !std::process::Command::new("g++").arg("--version").output().is_ok_and(|o| o.status.success()) {
        println!("skipped: g++ is not installed, so the fragment combine is not run");
        return;
    }
    let text = written(COMBINE, (3, 1));
    let start = text.find("// SIMD-group matrix tiles").expect("the tile helpers");
    let end = text.find("kernel void").expect("the kernel");
    let helpers = &text[start..end];
    // (op, destination held as fragments?, rows, cols, source rows, source cols, SIMD groups)
    let cases: [(u32, bool, u32, u32, u32, u32, u32); 9] = [
        (2, true, 64, 64, 64, 1, 4),
        (3, true, 64, 64, 1, 64, 4),
        (1, true, 64, 64, 64, 64, 4),
        (2, true, 16, 32, 16, 1, 1),
        (5, true, 16, 32, 1, 32, 1),
        (4, true, 24, 40, 24, 40, 1),
        (0, false, 64, 1, 64, 1, 4),
        (1, false, 64, 1, 1, 1, 4),
        (3, false, 1, 40, 1, 40, 1),
    ];
    let checks: Vec<String> = cases
        .iter()
        .map(|(op, frag, r, c, sr, sc, s)| {
            let d = format!("enigma_coop_{}<float, {r}, {c}, {s}>", if *frag { "frag" } else { "vec" });
            // A source of the destination's shape has its type, as in the writer.
            let src = if (sr, sc) == (r, c) { d.clone() } else { format!("enigma_coop_vec<float, {sr}, {sc}, {s}>") };
            format!("    failures += check<{op}, {d}, {src}, {r}, {c}, {sr}, {sc}, {s}>();")
        })
        .collect();
    let program = format!(
        "#include <barrier>\n#include <thread>\n#include <vector>\n#include <cstdio>\n#include <type_traits>\n#include <metal_stdlib>\n#include <metal_simdgroup_matrix>\nusing namespace metal;\n\
         static std::barrier<>* sync_point;\nstatic float board[32];\nstatic thread_local unsigned my_lane;\n\
         static float shuffle(float x, ushort from) {{\n    board[my_lane] = x;\n    sync_point->arrive_and_wait();\n    \
             float y = board[from];\n    sync_point->arrive_and_wait();\n    return y;\n}}\n\
         static float max(float a, float b) {{ return a > b ? a : b; }}\nstatic float min(float a, float b) {{ return a < b ? a : b; }}\n\
         #define threadgroup_barrier(flags) sync_point->arrive_and_wait()\n#define simd_shuffle(x, lane) shuffle(x, lane)\n\
         {helpers}\n\
         #undef thread\n\
         static float scratch[4096];\n\
         static float reference(int op, float d, float s) {{\n    \
             switch (op) {{ case 0: return s; case 1: return d + s; case 2: return d - s; case 3: return d * s; case 4: return d > s ? d : s; default: return d < s ? d : s; }}\n}}\n\
         template <int OP, typename D, typename SRC, int R, int C, int SR, int SC, int S> int check() {{\n    \
             std::vector<float> out(R * C, -12345.0f);\n    std::barrier<> all(32 * S);\n    sync_point = &all;\n    \
             std::vector<std::thread> threads;\n    \
             for (uint t = 0; t < uint(32 * S); ++t) threads.emplace_back([&out, t] {{\n        \
                 uint sg = t / 32, lane = t % 32;\n        my_lane = lane;\n        D d;\n        SRC s;\n        \
                 for (uint i = 0; i < enigma_coop_capacity(d); ++i) if (enigma_coop_valid(d, i, sg, lane))\n            \
                     enigma_coop_at(d, i) = float(enigma_coop_coord(d, i, 1, sg, lane) * C + enigma_coop_coord(d, i, 0, sg, lane) + 1);\n        \
                 for (uint i = 0; i < enigma_coop_capacity(s); ++i) if (enigma_coop_valid(s, i, sg, lane))\n            \
                     enigma_coop_at(s, i) = 0.5f * float(enigma_coop_coord(s, i, 1, sg, lane) * SC + enigma_coop_coord(s, i, 0, sg, lane)) + 3.0f;\n        \
                 if constexpr (std::is_same<D, SRC>::value) enigma_coop_combine_slots<OP>(d, s, sg, lane);\n        \
                 else enigma_coop_combine<OP>(d, s, scratch, sg, lane);\n        \
                 for (uint i = 0; i < enigma_coop_capacity(d); ++i) if (enigma_coop_valid(d, i, sg, lane))\n            \
                     out[enigma_coop_coord(d, i, 1, sg, lane) * C + enigma_coop_coord(d, i, 0, sg, lane)] = enigma_coop_at(d, i);\n    \
             }});\n    for (auto& th : threads) th.join();\n    int bad = 0;\n    \
             for (int r = 0; r < R; ++r) for (int c = 0; c < C; ++c) {{\n        \
                 int e = (SR == 1 ? 0 : r) * SC + (SC == 1 ? 0 : c);\n        \
                 if (out[r * C + c] != reference(OP, float(r * C + c + 1), 0.5f * float(e) + 3.0f)) bad++;\n    }}\n    \
             if (bad) printf(\"op %d, %dx%d from %dx%d over %d SIMD groups: %d wrong\\n\", OP, R, C, SR, SC, S, bad);\n    return bad;\n}}\n\
         int main() {{\n    int failures = 0;\n{}\n    printf(\"failures %d\\n\", failures);\n    return 0;\n}}\n",
        checks.join("\n")
    );
    let dir = std::env::temp_dir().join(format!("enigma-coop-combine-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    std::fs::write(dir.join("combine.cpp"), &program).expect("write the program");
    let shim = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/msl_shim");
    let built = std::process::Command::new("g++")
        .args(["-std=c++20", "-O1", "-pthread", "-Wno-attributes", "-x", "c++", "-I"])
        .arg(&shim)
        .arg("-o")
        .arg(dir.join("combine"))
        .arg(dir.join("combine.cpp"))
        .output()
        .expect("run g++");
    assert!(built.status.success(), "{}\n{program}", String::from_utf8_lossy(&built.stderr));
    let run = std::process::Command::new(dir.join("combine")).output().expect("run the program");
    std::fs::remove_dir_all(&dir).ok();
    let out = String::from_utf8_lossy(&run.stdout).into_owned();
    assert!(run.status.success() && out.ends_with("failures 0\n"), "{out}");
}

/// A 64×64 f16 GEMM tile: A (M×K) and B (K×N) copied into threadgroup
/// tiles of pitch 64, one `matmul2d` per 64-deep k tile.
const WGMMA_GEMM: &str = "\
kernel cooperative_wgmma_gemm(A: device f16 read, B: device f16 read, C: device f32 read_write, M: u32, N: u32, K: u32) {
    threadgroup As: f16[4096]
    threadgroup Bs: f16[4096]
    var row0: u32
    var col0: u32
    var kt: u32
    var i: u32
    var r: u32
    var cc: u32
    cooperative c: cooperative_tensor<f32, 64, 64, simdgroups(4)>

    row0 = (threadgroup_position_in_grid.y * 64u32)
    col0 = (threadgroup_position_in_grid.x * 64u32)
    for i in (0u32, get_capacity(c), 1u32) {
        c[i] = 0.0f32
    }
    for kt in (0u32, K, 64u32) {
        for i in (thread_index_in_threadgroup, 512u32, 128u32) {
            r = (i / 8u32)
            cc = ((i % 8u32) * 8u32)
            async_copy(As[((r * 64u32) + cc)], A[((((row0 + r) * K) + kt) + cc)], 8, ((row0 + r) < M))
            async_copy(Bs[((r * 64u32) + cc)], B[((((kt + r) * N) + col0) + cc)], 8, ((col0 + cc) < N))
        }
        async_commit()
        async_wait(0)
        threadgroup_barrier(mem_threadgroup)
        matmul2d(matmul2d_descriptor(64, 64, 64, false, false, false, multiply_accumulate), simdgroups(4), tensor(As, 0u32, 64u32, 64u32, 1u32, 64u32), tensor(Bs, 0u32, 64u32, 64u32, 1u32, 64u32), c)
        threadgroup_barrier(mem_threadgroup)
    }
    cooperative_store(c, tensor(C, ((row0 * N) + col0), min(64u32, (N - col0)), min(64u32, (M - row0)), 1u32, N))
}
";

fn wgmma_gemm() -> (Kernel, KernelInfo) {
    let kernel = parse(WGMMA_GEMM).unwrap_or_else(|e| panic!("{e}"));
    let info = validate(&kernel, &Default::default()).unwrap_or_else(|e| panic!("{e}"));
    (kernel, info)
}

#[test]
fn cuda_on_sm_90a_runs_the_product_on_wgmma_over_swizzled_tiles() {
    let (kernel, info) = wgmma_gemm();
    let source = cuda::write_string(&kernel, &info, &cuda::Options { wgmma: true, ..cuda::Options::default() }).unwrap_or_else(|e| panic!("{e}"));
    let cu = &source.source;
    for needle in [
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16",
        // A K-major (no transpose), B MN-major (transposed).
        "p, 1, 1, 0, 1;",
        "__shared__ __align__(1024) __half As[4096];",
        // Every access to a wgmma operand goes through the swizzle.
        "As[enigma::swizzle128<64u, 64u>(",
        "Bs[enigma::swizzle128<64u, 64u>(",
        // Writes reach the async proxy: each thread fences before the kernel's barriers.
        "enigma::async_proxy_fence(); enigma::threadgroup_barrier(enigma_tg);",
        "enigma::wgmma_wait();",
        // The run-time test, and the scalar path beside it.
        "enigma_k % 16u == 0u",
        "enigma_acc = fmaf(enigma_x, enigma_y, enigma_acc);",
        "float c[32]; // cooperative_tensor<f32, 64, 64, simdgroups(4)>, wgmma accumulator",
    ] {
        assert!(cu.contains(needle), "missing {needle:?} in\n{cu}");
    }
    insta::assert_snapshot!("cooperative_wgmma_gemm.cu", source.source);

    // Without sm_90a: the scalar path only, the arrays in their linear layout.
    let plain = cuda::write_string(&kernel, &info, &cuda::Options::default()).unwrap_or_else(|e| panic!("{e}")).source;
    for absent in ["wgmma.mma_async", "As[enigma::swizzle128", "Bs[enigma::swizzle128"] {
        assert!(!plain.contains(absent), "{absent:?} in\n{plain}");
    }
    assert!(plain.contains("enigma_acc = fmaf(enigma_x, enigma_y, enigma_acc);"));
    assert!(plain.contains("float c[32]; // cooperative_tensor<f32, 64, 64, simdgroups(4)>, linear layout"));
}

#[test]
fn a_product_fences_its_threads_own_writes_unless_a_barrier_directly_precedes_it() {
    let fences_in_product = |text: &str| {
        let kernel = parse(text).unwrap_or_else(|e| panic!("{e}"));
        let info = validate(&kernel, &Default::default()).unwrap_or_else(|e| panic!("{e}"));
        let cu = cuda::write_string(&kernel, &info, &cuda::Options { wgmma: true, ..cuda::Options::default() }).unwrap_or_else(|e| panic!("{e}")).source;
        // The barrier's fence is on the barrier's line; the product's own
        // stands alone.
        cu.lines().filter(|l| l.trim() == "enigma::async_proxy_fence();").count()
    };
    // Barrier, then product: the barrier's fence covers the thread's writes.
    assert_eq!(fences_in_product(WGMMA_GEMM), 0);
    // A write of this thread between the barrier and the product: fenced there.
    let written = WGMMA_GEMM.replace(
        "        threadgroup_barrier(mem_threadgroup)\n        matmul2d(",
        "        threadgroup_barrier(mem_threadgroup)\n        As[thread_index_in_threadgroup] = 0.0f16\n        matmul2d(",
    );
    assert_ne!(written, WGMMA_GEMM);
    assert_eq!(fences_in_product(&written), 1);
}

#[test]
fn a_barrier_after_an_overlapped_product_on_every_path_leaves_that_product_in_flight() {
    // The loop is `copy; barrier; product; barrier`: the second barrier
    // follows a product on every path and waits for all groups but the
    // newest; the first (reached from the loop's entry or its back edge,
    // just after the second barrier) waits for everything.
    let text = WGMMA_GEMM.replace("matmul2d(", "matmul2d_overlapped(");
    let kernel = parse(&text).unwrap_or_else(|e| panic!("{e}"));
    assert!(enigma_ir::text::print(&kernel).contains("matmul2d_overlapped(matmul2d_descriptor("), "the text form keeps the release");
    let info = validate(&kernel, &Default::default()).unwrap_or_else(|e| panic!("{e}"));
    let cu = cuda::write_string(&kernel, &info, &cuda::Options { wgmma: true, ..cuda::Options::default() }).unwrap_or_else(|e| panic!("{e}")).source;
    let barriers: Vec<&str> = cu.lines().map(str::trim).filter(|l| l.ends_with("enigma::threadgroup_barrier(enigma_tg);")).collect();
    assert_eq!(
        barriers,
        [
            "enigma::wgmma_wait(); enigma::async_proxy_fence(); enigma::threadgroup_barrier(enigma_tg);",
            "enigma::wgmma_wait_all_but_last(); enigma::async_proxy_fence(); enigma::threadgroup_barrier(enigma_tg);",
        ],
        "{cu}"
    );
    // Each product commits one group on either path (wgmma or the scalar fallback).
    assert_eq!(cu.lines().filter(|l| l.trim() == "enigma::wgmma_commit();").count(), 2, "{cu}");
    insta::assert_snapshot!("cooperative_wgmma_gemm_overlapped.cu", cu);

    // A second barrier in a row is reached stale (the newest product was
    // issued before the previous barrier): it waits for everything.
    let doubled = text.replace(
        ", c)\n        threadgroup_barrier(mem_threadgroup)\n",
        ", c)\n        threadgroup_barrier(mem_threadgroup)\n        threadgroup_barrier(mem_threadgroup)\n",
    );
    assert_ne!(doubled, text);
    let kernel = parse(&doubled).unwrap_or_else(|e| panic!("{e}"));
    let info = validate(&kernel, &Default::default()).unwrap_or_else(|e| panic!("{e}"));
    let cu = cuda::write_string(&kernel, &info, &cuda::Options { wgmma: true, ..cuda::Options::default() }).unwrap_or_else(|e| panic!("{e}")).source;
    let waits: Vec<bool> = cu.lines().filter(|l| l.trim().ends_with("enigma::threadgroup_barrier(enigma_tg);")).map(|l| l.contains("wait_all_but_last")).collect();
    assert_eq!(waits, [false, true, false], "{cu}");

    // Without the overlap every barrier waits for everything.
    let (kernel, info) = wgmma_gemm();
    let cu = cuda::write_string(&kernel, &info, &cuda::Options { wgmma: true, ..cuda::Options::default() }).unwrap_or_else(|e| panic!("{e}")).source;
    assert!(!cu.contains("wgmma_wait_all_but_last();"), "{cu}");
}

#[test]
fn a_pitch_wgmma_cannot_read_keeps_the_linear_layout_and_the_scalar_path() {
    // A pitch of 32 halves is not a whole 128-byte swizzle row.
    let text = WGMMA_GEMM.replace("tensor(Bs, 0u32, 64u32, 64u32, 1u32, 64u32)", "tensor(Bs, 0u32, 32u32, 64u32, 1u32, 32u32)").replace("cooperative_tensor<f32, 64, 64,", "cooperative_tensor<f32, 64, 32,").replace("64, 64, 64, false", "64, 32, 64, false");
    let kernel = parse(&text).unwrap_or_else(|e| panic!("{e}"));
    let info = validate(&kernel, &Default::default()).unwrap_or_else(|e| panic!("{e}"));
    let cu = cuda::write_string(&kernel, &info, &cuda::Options { wgmma: true, ..cuda::Options::default() }).unwrap_or_else(|e| panic!("{e}")).source;
    assert!(!cu.contains("wgmma.mma_async") && !cu.contains("s[enigma::swizzle128"), "{cu}");
    assert!(cu.contains("linear layout"), "{cu}");
}

#[test]
fn an_array_a_simdgroup_matrix_load_reads_keeps_the_linear_layout() {
    let text = WGMMA_GEMM
        .replace("    var cc: u32\n", "    var cc: u32\n    var m: mat8x8_f16\n")
        .replace("        threadgroup_barrier(mem_threadgroup)\n        matmul2d", "        threadgroup_barrier(mem_threadgroup)\n        m = simdgroup_load<mat8x8_f16>(As, 0u32, 64u32)\n        matmul2d");
    let kernel = parse(&text).unwrap_or_else(|e| panic!("{e}"));
    let info = validate(&kernel, &Default::default()).unwrap_or_else(|e| panic!("{e}"));
    let cu = cuda::write_string(&kernel, &info, &cuda::Options { wgmma: true, ..cuda::Options::default() }).unwrap_or_else(|e| panic!("{e}")).source;
    assert!(cu.contains("enigma_tile_load"), "{cu}");
    assert!(!cu.contains("wgmma.mma_async") && !cu.contains("s[enigma::swizzle128"), "{cu}");
}

#[test]
fn cuda_reduces_through_shared_memory_or_with_shuffles_in_one_simdgroup() {
    let text = GEMM_TILE.replace("    matmul2d(matmul2d_descriptor(64, 32, 64, false, true, true, multiply_accumulate), simdgroups(4), c, tensor(Bs, 0u32, 64u32, 32u32, 1u32, 64u32), d)\n", "");
    let text = text.replace("reduce_rows(d, rows, max)", "reduce_rows(c, rows, max)").replace("    cooperative d: cooperative_tensor<f32, 64, 32, simdgroups(4)>\n", "");
    let kernel = parse(&text).unwrap_or_else(|e| panic!("{e}"));
    let info = validate(&kernel, &Default::default()).unwrap_or_else(|e| panic!("{e}"));
    let cu = cuda::write_string(&kernel, &info, &cuda::Options { wgmma: true, ..cuda::Options::default() }).unwrap_or_else(|e| panic!("{e}")).source;
    for needle in ["__shared__ float enigma_scratch[4096];", "enigma_acc = fmaxf(enigma_acc, enigma_v);", "rows[enigma_i] = (float)enigma_acc;"] {
        assert!(cu.contains(needle), "missing {needle:?} in\n{cu}");
    }

    let one = text.replace("simdgroups(4)", "simdgroup");
    let kernel = parse(&one).unwrap_or_else(|e| panic!("{e}"));
    let info = validate(&kernel, &Default::default()).unwrap_or_else(|e| panic!("{e}"));
    let cu = cuda::write_string(&kernel, &info, &cuda::Options::default()).unwrap_or_else(|e| panic!("{e}")).source;
    // A SIMD group's tensor: gathered lane by lane, every lane in every step
    // (no `continue` before the shuffles), the result written where valid.
    for needle in ["auto enigma_gather = [&](uint enigma_e) -> float {", "__shfl_sync(0xffffffffu, c[enigma_q], enigma_lane);", "enigma_acc = fmaxf(enigma_acc, enigma_v);"] {
        assert!(cu.contains(needle), "missing {needle:?} in\n{cu}");
    }
    let reduction = &cu[cu.find("auto enigma_gather").unwrap()..];
    assert!(!reduction[..reduction.find("rows[enigma_i]").unwrap()].contains("continue;"), "{cu}");
}



/// The lines of `cu` without their indentation.
fn trimmed(cu: &str) -> Vec<&str> {
    cu.lines().map(str::trim).collect()
}

#[test]
fn wgmma_products_stay_in_flight_until_a_barrier_or_the_accumulator_needs_them() {
    let (kernel, info) = wgmma_gemm();
    let cu = cuda::write_string(&kernel, &info, &cuda::Options { wgmma: true, ..cuda::Options::default() }).unwrap_or_else(|e| panic!("{e}")).source;
    let lines = trimmed(&cu);
    let commit = lines.iter().position(|l| *l == "enigma::wgmma_commit();").expect("a commit");
    assert_ne!(lines[commit + 1], "enigma::wgmma_wait();", "the product must not wait for itself:\n{cu}");
    // Each barrier waits first; the store of the accumulator waits and pins its registers.
    assert_eq!(cu.matches("enigma::wgmma_wait(); enigma::async_proxy_fence(); enigma::threadgroup_barrier(enigma_tg);").count(), 2, "{cu}");
    let store = lines.iter().position(|l| l.starts_with("const uint enigma_v[5]")).expect("the store");
    assert_eq!(&lines[store - 3..store - 1], ["enigma::wgmma_wait();", "enigma_wgmma_hold32(&c[0]);"], "{cu}");
}

#[test]
fn the_wait_for_a_product_goes_before_the_divergent_statement_that_reads_its_accumulator() {
    // After the product, threads below 7 read the accumulator: the wait
    // (which the whole warp must execute) goes before the `if`.
    let text = WGMMA_GEMM.replace(
        "c)\n        threadgroup_barrier(mem_threadgroup)\n    }",
        "c)\n        if (thread_index_in_threadgroup < 7u32) {\n            C[thread_index_in_threadgroup] = c[0u32]\n        }\n        threadgroup_barrier(mem_threadgroup)\n    }",
    );
    assert_ne!(text, WGMMA_GEMM);
    let kernel = parse(&text).unwrap_or_else(|e| panic!("{e}"));
    let info = validate(&kernel, &Default::default()).unwrap_or_else(|e| panic!("{e}"));
    let cu = cuda::write_string(&kernel, &info, &cuda::Options { wgmma: true, ..cuda::Options::default() }).unwrap_or_else(|e| panic!("{e}")).source;
    let lines = trimmed(&cu);
    let branch = lines.iter().position(|l| l.starts_with("if (thread_index_in_threadgroup < 7u)")).unwrap_or_else(|| panic!("the branch in\n{cu}"));
    assert_eq!(&lines[branch - 2..branch], ["enigma::wgmma_wait();", "enigma_wgmma_hold32(&c[0]);"], "{cu}");
    assert!(!lines[branch..branch + 3].contains(&"enigma::wgmma_wait();"), "no wait inside the branch:\n{cu}");
}


/// S = A·B over threadgroup tiles, then O = S·V with S, the first
/// product's accumulator, as the left operand.
fn chained(relaxed: bool) -> String {
    let text = format!(
        "kernel chain(A: device f16 read, B: device f16 read, V: device f16 read, O: device f32 read_write) {{
    threadgroup As: f16[4096]
    threadgroup Bs: f16[4096]
    threadgroup Vs: f16[4096]
    cooperative s: cooperative_tensor<f32, 64, 64, simdgroups(4)>
    cooperative o: cooperative_tensor<f32, 64, 64, simdgroups(4)>

    As[thread_index_in_threadgroup] = A[thread_index_in_threadgroup]
    Bs[thread_index_in_threadgroup] = B[thread_index_in_threadgroup]
    Vs[thread_index_in_threadgroup] = V[thread_index_in_threadgroup]
    threadgroup_barrier(mem_threadgroup)
    matmul2d(matmul2d_descriptor(64, 64, 64, false, false, false, multiply), simdgroups(4), tensor(As, 0u32, 64u32, 64u32, 1u32, 64u32), tensor(Bs, 0u32, 64u32, 64u32, 1u32, 64u32), s)
    matmul2d(matmul2d_descriptor(64, 64, 64, false, false, {relaxed}, multiply), simdgroups(4), s, tensor(Vs, 0u32, 64u32, 64u32, 1u32, 64u32), o)
    cooperative_store(o, tensor(O, 0u32, 64u32, 64u32, 1u32, 64u32))
}}
"
    );
    let kernel = parse(&text).unwrap_or_else(|e| panic!("{e}"));
    let info = validate(&kernel, &Default::default()).unwrap_or_else(|e| panic!("{e}"));
    cuda::write_string(&kernel, &info, &cuda::Options { wgmma: true, ..cuda::Options::default() }).unwrap_or_else(|e| panic!("{e}")).source
}

#[test]
fn an_accumulator_as_the_next_left_operand_runs_from_registers_under_relaxed_precision() {
    let cu = chained(true);
    for needle in [
        // The second product reads its left operand from S's registers, rounded in pairs.
        "enigma_wgmma_m64n64k16_f16_rm(&o[0], &enigma_pairs[0u + enigma_kk / 4u], enigma_db);",
        "enigma_pairs[enigma_q] = enigma_pack_f16(s[2u * enigma_q], s[2u * enigma_q + 1u]);",
        "const __half2 h = __floats2half2_rn(lo, hi);",
        "{%32, %33, %34, %35}, %36, p, 1, 1, 1;",
        // Its scalar path shuffles S within each quad of lanes.
        "__shfl_sync(0xffffffffu, enigma_left[",
    ] {
        assert!(cu.contains(needle), "missing {needle:?} in\n{cu}");
    }
    let lines = trimmed(&cu);
    // The first product is still in flight when the second reads S: the wait goes between.
    let second = lines.iter().rposition(|l| *l == "const uint enigma_a[5] = {0u, 64u, 64u, 1u, 64u};").expect("the first product's view");
    let read = lines.iter().position(|l| l.contains("_rm(&o[0]")).expect("the second product");
    assert!(lines[second..read].contains(&"enigma::wgmma_wait();"), "{cu}");

    // Exact precision: S stays f32, so the second product takes the scalar
    // path, its destination in the linear layout, S through shared memory.
    let exact = chained(false);
    assert!(!exact.contains("_rm(") && exact.contains("__shared__ float enigma_left[4096];"), "{exact}");
}

/// A left operand no product writes, filled by the threads through its
/// slots (as dequantized weights are), takes the accumulator layout and is
/// read from registers; its slots are set at their coordinates.
#[test]
fn a_left_operand_the_threads_fill_runs_from_registers() {
    let text = "kernel filled(B: device f16 read, O: device f32 read_write) {
    var i: u32
    threadgroup Bs: f16[4096]
    cooperative w: cooperative_tensor<f32, 64, 64, simdgroups(4)>
    cooperative o: cooperative_tensor<f32, 64, 64, simdgroups(4)>

    Bs[thread_index_in_threadgroup] = B[thread_index_in_threadgroup]
    for i in (0u32, get_capacity(w), 1u32) {
        w[i] = cast<f32>((get_multidimensional_index(w, i, 0) + get_multidimensional_index(w, i, 1)))
    }
    threadgroup_barrier(mem_threadgroup)
    matmul2d(matmul2d_descriptor(64, 64, 64, false, false, true, multiply), simdgroups(4), w, tensor(Bs, 0u32, 64u32, 64u32, 1u32, 64u32), o)
    cooperative_store(o, tensor(O, 0u32, 64u32, 64u32, 1u32, 64u32))
}
";
    let kernel = parse(text).unwrap_or_else(|e| panic!("{e}"));
    let info = validate(&kernel, &Default::default()).unwrap_or_else(|e| panic!("{e}"));
    let cu = cuda::write_string(&kernel, &info, &cuda::Options { wgmma: true, ..cuda::Options::default() }).unwrap_or_else(|e| panic!("{e}")).source;
    for needle in ["enigma_wgmma_m64n64k16_f16_rm(&o[0], &enigma_pairs[0u + enigma_kk / 4u], enigma_db);", "float w[32]; // cooperative_tensor<f32, 64, 64, simdgroups(4)>, wgmma accumulator"] {
        assert!(cu.contains(needle), "missing {needle:?} in\n{cu}");
    }
    // Without relaxed precision the product keeps the exact scalar path.
    let exact = text.replace("false, false, true, multiply", "false, false, false, multiply");
    let kernel = parse(&exact).unwrap_or_else(|e| panic!("{e}"));
    let info = validate(&kernel, &Default::default()).unwrap_or_else(|e| panic!("{e}"));
    let cu = cuda::write_string(&kernel, &info, &cuda::Options { wgmma: true, ..cuda::Options::default() }).unwrap_or_else(|e| panic!("{e}")).source;
    assert!(!cu.contains("_rm(") && !cu.contains("wgmma.mma_async"), "{cu}");
}

#[test]
fn off_hopper_products_run_on_mma_sync_fragments() {
    let (kernel, info) = wgmma_gemm();
    let cu = cuda::write_string(&kernel, &info, &cuda::Options { mma: true, ..cuda::Options::default() }).unwrap_or_else(|e| panic!("{e}")).source;
    for needle in [
        "float c[32]; // cooperative_tensor<f32, 64, 64, simdgroups(4)>, mma.sync accumulator, 16 rows per SIMD group",
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32",
        "enigma_mma_m16n8k16_f16(&c[(enigma_rt * 8u + enigma_ct) * 4u], enigma_fa, enigma_fb[enigma_ct]);",
        "enigma::mma_row<16u, 64u>(thread_index_in_threadgroup, enigma_i)",
    ] {
        assert!(cu.contains(needle), "missing {needle:?} in\n{cu}");
    }
    assert!(!cu.contains("wgmma.mma_async") && !cu.contains("enigma_acc = fmaf(enigma_x, enigma_y, enigma_acc);"), "{cu}");
}

#[test]
fn a_pitch_bound_once_to_a_local_reaches_wgmma_and_one_assigned_twice_does_not() {
    // The Python front end binds each view's strides to locals.
    let bound = |second: &str| {
        WGMMA_GEMM
            .replace("    var i: u32\n", "    var i: u32\n    var pitch: u32\n")
            .replace("    row0 = (threadgroup_position_in_grid.y * 64u32)\n", &format!("    pitch = 64u32\n{second}    row0 = (threadgroup_position_in_grid.y * 64u32)\n"))
            .replace("tensor(As, 0u32, 64u32, 64u32, 1u32, 64u32)", "tensor(As, 0u32, 64u32, 64u32, 1u32, pitch)")
    };
    for (second, wgmma) in [("", true), ("    pitch = (pitch + 0u32)\n", false)] {
        let text = bound(second);
        let kernel = parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let info = validate(&kernel, &Default::default()).unwrap_or_else(|e| panic!("{e}"));
        let cu = cuda::write_string(&kernel, &info, &cuda::Options { wgmma: true, ..cuda::Options::default() }).unwrap_or_else(|e| panic!("{e}")).source;
        assert_eq!(cu.contains("wgmma.mma_async"), wgmma, "{second:?}:\n{cu}");
        if wgmma {
            // Checked again at run time.
            assert!(cu.contains("enigma_a[3] == 1u && enigma_a[4] == 64u"), "{cu}");
        }
    }
}

#[test]
fn a_swizzled_index_at_a_constant_whole_atom_offset_reuses_its_base_swizzle() {
    // Each thread copies rows `lane / 64` and 16 rows further (two whole
    // swizzle atoms of 8 rows: the base's swizzle plus a constant), 4 rows
    // further (not an atom: swizzled whole) and at an offset from a
    // parameter (unbounded: the sum may wrap, so swizzled whole).
    let copies = "\
        lane = (((thread_index_in_threadgroup % 128u32) / 8u32) * 64u32) + ((thread_index_in_threadgroup % 8u32) * 8u32)
        async_copy(As[(lane + 0u32)], A[kt], 8, true)
        async_copy(As[(lane + 1024u32)], A[kt], 8, true)
        async_copy(As[(lane + 256u32)], A[kt], 8, true)
        async_copy(Bs[(K + 512u32)], B[kt], 8, true)
        async_commit()";
    let start = WGMMA_GEMM.find("        for i in (thread_index_in_threadgroup").unwrap();
    let end = WGMMA_GEMM.find("        async_commit()").unwrap() + "        async_commit()".len();
    let text = format!("{}{copies}{}", &WGMMA_GEMM[..start], &WGMMA_GEMM[end..]).replace("    var cc: u32\n", "    var cc: u32\n    var lane: u32\n");
    let kernel = parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let info = validate(&kernel, &Default::default()).unwrap_or_else(|e| panic!("{e}"));
    let cu = cuda::write_string(&kernel, &info, &cuda::Options { wgmma: true, ..cuda::Options::default() }).unwrap_or_else(|e| panic!("{e}")).source;
    for needle in [
        "&As[(enigma::swizzle128<64u, 64u>(lane) + 0u)]",
        "&As[(enigma::swizzle128<64u, 64u>(lane) + 1024u)]",
        "&As[enigma::swizzle128<64u, 64u>(lane + 256u)]",
        "&Bs[enigma::swizzle128<64u, 64u>(K + 512u)]",
    ] {
        assert!(cu.contains(needle), "{needle} missing in\n{cu}");
    }
}

#[test]
fn row_reductions_of_a_wgmma_accumulator_combine_each_quad_with_shuffles() {
    let text = "kernel rows(A: device f16 read, B: device f16 read, M: device f32 read_write, L: device f32 read_write) {
    threadgroup As: f16[8192]
    threadgroup Bs: f16[4096]
    cooperative s: cooperative_tensor<f32, 128, 64, simdgroups(8)>
    cooperative m: cooperative_tensor<f32, 128, 1, simdgroups(8)>
    cooperative l: cooperative_tensor<f32, 128, 1, simdgroups(8)>

    As[thread_index_in_threadgroup] = A[thread_index_in_threadgroup]
    Bs[thread_index_in_threadgroup] = B[thread_index_in_threadgroup]
    threadgroup_barrier(mem_threadgroup)
    matmul2d(matmul2d_descriptor(128, 64, 64, false, false, false, multiply), simdgroups(8), tensor(As, 0u32, 64u32, 128u32, 1u32, 64u32), tensor(Bs, 0u32, 64u32, 64u32, 1u32, 64u32), s)
    reduce_rows(s, m, max)
    reduce_rows(s, l, sum)
    cooperative_store(m, tensor(M, 0u32, 1u32, 128u32, 1u32, 1u32))
    cooperative_store(l, tensor(L, 0u32, 1u32, 128u32, 1u32, 1u32))
}
";
    let kernel = parse(text).unwrap_or_else(|e| panic!("{e}"));
    let info = validate(&kernel, &Default::default()).unwrap_or_else(|e| panic!("{e}"));
    let cu = cuda::write_string(&kernel, &info, &cuda::Options { wgmma: true, ..cuda::Options::default() }).unwrap_or_else(|e| panic!("{e}")).source;
    for needle in [
        "wgmma.mma_async.sync.aligned.m64n64k16",
        // m and l take the accumulator's rows: two slots per thread.
        "float m[2]; // cooperative_tensor<f32, 128, 1, simdgroups(8)>, the rows of a wgmma accumulator of 1 slice(s)",
        // Each thread's two rows (one slice of 32 slots): slots 4q + {0, 1}, then 4q + {2, 3}.
        "const uint enigma_s = enigma_h / 2u * 32u + enigma_h % 2u * 2u;",
        "enigma_acc = fmaxf(enigma_acc, s[enigma_s + 4u * enigma_q + 1u]);",
        "enigma_acc = fmaxf(enigma_acc, __shfl_xor_sync(0xffffffffu, enigma_acc, 2u));",
        "enigma_acc = enigma_acc + __shfl_xor_sync(0xffffffffu, enigma_acc, 1u);",
        // Every lane of the quad keeps the row's value in its own slot.
        "m[enigma_h] = enigma_acc;",
        "l[enigma_h] = enigma_acc;",
        // The store writes each row once, from the quad's first lane.
        "if (!(((thread_index_in_threadgroup) % 4u == 0u))) continue;",
    ] {
        assert!(cu.contains(needle), "missing {needle:?} in\n{cu}");
    }
    assert!(!cu.contains("enigma_scratch") && !cu.contains("__shared__ float"), "{cu}");
    // No barrier for the reductions: only the one before the product.
    assert_eq!(cu.matches("enigma::threadgroup_barrier(enigma_tg);").count(), 1, "{cu}");
    // Without wgmma the accumulator is linear and goes through the scratch array.
    let cu = cuda::write_string(&kernel, &info, &cuda::Options::default()).unwrap_or_else(|e| panic!("{e}")).source;
    assert!(cu.contains("__shared__ float enigma_scratch[8192];"), "{cu}");
}

/// `combine` on CUDA: along a `wgmma` accumulator's rows from the quad's
/// first lane, between two tensors of the rows' layout slot by slot, with
/// no barrier; off Hopper (linear layouts) through a shared scratch array
/// between two barriers. The simulator's results are in
/// `enigma-sim/tests/cooperative.rs`.
#[test]
fn combinations_along_a_wgmma_accumulators_rows_stay_in_registers() {
    let text = "kernel online(A: device f16 read, B: device f16 read, C: device f32 read_write) {
    threadgroup As: f16[4096]
    threadgroup Bs: f16[4096]
    cooperative s: cooperative_tensor<f32, 64, 64, simdgroups(4)>
    cooperative m: cooperative_tensor<f32, 64, 1, simdgroups(4)>
    cooperative n: cooperative_tensor<f32, 64, 1, simdgroups(4)>

    As[thread_index_in_threadgroup] = A[thread_index_in_threadgroup]
    Bs[thread_index_in_threadgroup] = B[thread_index_in_threadgroup]
    threadgroup_barrier(mem_threadgroup)
    matmul2d(matmul2d_descriptor(64, 64, 64, false, false, false, multiply), simdgroups(4), tensor(As, 0u32, 64u32, 64u32, 1u32, 64u32), tensor(Bs, 0u32, 64u32, 64u32, 1u32, 64u32), s)
    reduce_rows(s, m, max)
    combine(n, m, assign)
    combine(n, m, add)
    combine(s, n, sub)
    cooperative_store(s, tensor(C, 0u32, 64u32, 64u32, 1u32, 64u32))
}
";
    let kernel = parse(text).unwrap_or_else(|e| panic!("{e}"));
    let info = validate(&kernel, &Default::default()).unwrap_or_else(|e| panic!("{e}"));
    let cu = cuda::write_string(&kernel, &info, &cuda::Options { wgmma: true, ..cuda::Options::default() }).unwrap_or_else(|e| panic!("{e}")).source;
    for needle in [
        "for (uint enigma_i = 0u; enigma_i < 2u; ++enigma_i) n[enigma_i] = m[enigma_i];",
        "for (uint enigma_i = 0u; enigma_i < 2u; ++enigma_i) n[enigma_i] = n[enigma_i] + m[enigma_i];",
        "enigma_row_value[enigma_h] = __shfl_sync(0xffffffffu, n[enigma_h], (thread_index_in_threadgroup) % 32u / 4u * 4u);",
        "for (uint enigma_i = 0u; enigma_i < 32u; ++enigma_i) s[enigma_i] = s[enigma_i] - enigma_row_value[enigma_i / 32u * 2u + enigma_i % 32u / 2u % 2u];",
    ] {
        assert!(cu.contains(needle), "missing {needle:?} in\n{cu}");
    }
    assert!(!cu.contains("__shared__ float"), "{cu}");
    assert_eq!(cu.matches("enigma::threadgroup_barrier(enigma_tg);").count(), 1, "{cu}");
    let cu = cuda::write_string(&kernel, &info, &cuda::Options::default()).unwrap_or_else(|e| panic!("{e}")).source;
    assert!(cu.contains("__shared__ float enigma_scratch[64];") && cu.contains("s[enigma_i] = s[enigma_i] - enigma_scratch["), "{cu}");
}

/// `combine` in both MSL lowerings, over four SIMD groups: a row maximum
/// subtracted along the rows, a product of another descriptor (another
/// MSL 4.0 type) added element by element, a column maximum multiplied
/// along the columns, and two m×1 tensors of one type combined slot by
/// slot (the second declared from its first writer, `combine`). Golden
/// files `cooperative_combine*.msl`, which the g++ and strict checks
/// compile.
const COMBINE: &str = "\
kernel cooperative_combine(A: device f16 read, B: device f16 read, C: device f32 read_write) {
    cooperative s: cooperative_tensor<f32, 64, 64, simdgroups(4)>
    cooperative o: cooperative_tensor<f32, 64, 64, simdgroups(4)>
    cooperative m: cooperative_tensor<f32, 64, 1, simdgroups(4)>
    cooperative n: cooperative_tensor<f32, 64, 1, simdgroups(4)>
    cooperative k: cooperative_tensor<f32, 1, 64, simdgroups(4)>

    matmul2d(matmul2d_descriptor(64, 64, dynamic_extent, false, false, false, multiply), simdgroups(4), tensor(A, 0u32, 32u32, 64u32, 1u32, 32u32), tensor(B, 0u32, 64u32, 32u32, 1u32, 64u32), s)
    matmul2d(matmul2d_descriptor(64, 64, 16, false, false, false, multiply), simdgroups(4), tensor(A, 0u32, 16u32, 64u32, 1u32, 32u32), tensor(B, 0u32, 64u32, 16u32, 1u32, 64u32), o)
    reduce_rows(s, m, max)
    combine(n, m, assign)
    combine(n, m, add)
    combine(s, n, sub)
    combine(s, o, add)
    reduce_columns(o, k, max)
    combine(s, k, mul)
    cooperative_store(s, tensor(C, 0u32, 64u32, 64u32, 1u32, 64u32))
}
";

/// The same in one SIMD group: slot by slot for one type, through
/// `simd_shuffle` otherwise (no threadgroup scratch, no barrier).
const COMBINE_ONE_SIMDGROUP: &str = "\
kernel cooperative_combine_one_simdgroup(A: device f16 read, B: device f16 read, C: device f32 read_write) {
    cooperative s: cooperative_tensor<f32, 16, 32, simdgroup>
    cooperative r: cooperative_tensor<f32, 16, 1, simdgroup>
    cooperative c: cooperative_tensor<f32, 1, 32, simdgroup>

    matmul2d(matmul2d_descriptor(16, 32, 16, false, false, false, multiply), simdgroup, tensor(A, 0u32, 16u32, 16u32, 1u32, 16u32), tensor(B, 0u32, 32u32, 16u32, 1u32, 32u32), s)
    reduce_rows(s, r, max)
    combine(s, r, sub)
    reduce_columns(s, c, sum)
    combine(s, c, min)
    combine(s, s, add)
    cooperative_store(s, tensor(C, 0u32, 32u32, 16u32, 1u32, 32u32))
}
";

fn written(text: &str, version: (u8, u8)) -> String {
    let kernel = parse(text).unwrap_or_else(|e| panic!("{e}"));
    let info = validate(&kernel, &Default::default()).unwrap_or_else(|e| panic!("{e}"));
    let options = msl::Options { language_version: version, ..msl::Options::default() };
    msl::write_string(&kernel, &info, &options).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn msl_4_combines_through_a_scratch_view_or_slot_by_slot() {
    let metal = written(COMBINE, msl::MPP_VERSION);
    for needle in [
        // n takes m's type from its first writer, so they go slot by slot.
        "auto n = matmul0.get_row_reduction_destination_cooperative_tensor<",
        "        n[enigma_i] = m[enigma_i];",
        "        n[enigma_i] = n[enigma_i] + m[enigma_i];",
        "threadgroup float coop_scratch_f32[4096];",
        "auto mpp_left = metal::tensor<threadgroup float, metal::dextents<int32_t, 2>, metal::tensor_inline>(coop_scratch_f32, metal::dextents<int32_t, 2>(1, 64), metal::array<int32_t, 2>{1, 1});",
        "        s[enigma_i] = s[enigma_i] - coop_scratch_f32[enigma_at[1]];",
        "        s[enigma_i] = s[enigma_i] + coop_scratch_f32[enigma_at[1] * 64 + enigma_at[0]];",
        "        s[enigma_i] = s[enigma_i] * coop_scratch_f32[enigma_at[0]];",
    ] {
        assert!(metal.contains(needle), "missing {needle:?} in\n{metal}");
    }
    // Three combinations through the scratch, each between two barriers.
    assert_eq!(metal.matches("threadgroup_barrier(mem_flags::mem_threadgroup);").count(), 6, "{metal}");
    insta::assert_snapshot!("cooperative_combine.msl", metal);
    let one = written(COMBINE_ONE_SIMDGROUP, msl::MPP_VERSION);
    for needle in [
        "float enigma_source[16];",
        "float enigma_source[32];",
        "    int enigma_key = r.is_valid_element(enigma_j) ? int(enigma_at[1]) : -1;",
        "        float enigma_v = simd_shuffle(enigma_value, enigma_lane);",
        "        s[enigma_i] = min(s[enigma_i], enigma_source[enigma_at[0]]);",
        "        s[enigma_i] = s[enigma_i] + s[enigma_i];",
    ] {
        assert!(one.contains(needle), "missing {needle:?} in\n{one}");
    }
    assert!(!one.contains("threadgroup_barrier") && !one.contains("coop_scratch"), "{one}");
    insta::assert_snapshot!("cooperative_combine_one_simdgroup.msl", one);
}

#[test]
fn older_msl_combines_slot_by_slot_through_scratch_or_with_shuffles() {
    let metal = written(COMBINE, (3, 1));
    for needle in [
        "threadgroup float coop_scratch_f32[256];",
        "enigma_coop_combine_slots<0>(n, m, simdgroup_index_in_threadgroup, thread_index_in_simdgroup);",
        "enigma_coop_combine_slots<1>(n, m, simdgroup_index_in_threadgroup, thread_index_in_simdgroup);",
        "enigma_coop_combine<2>(s, n, coop_scratch_f32, simdgroup_index_in_threadgroup, thread_index_in_simdgroup);",
        "enigma_coop_combine_slots<1>(s, o, simdgroup_index_in_threadgroup, thread_index_in_simdgroup);",
        "enigma_coop_combine<3>(s, k, coop_scratch_f32, simdgroup_index_in_threadgroup, thread_index_in_simdgroup);",
    ] {
        assert!(metal.contains(needle), "missing {needle:?} in\n{metal}");
    }
    insta::assert_snapshot!("cooperative_combine_fragments.msl", metal);
    let one = written(COMBINE_ONE_SIMDGROUP, (3, 1));
    for needle in [
        "enigma_coop_combine<2>(s, r, nullptr, 0u, thread_index_in_simdgroup);",
        "enigma_coop_combine<5>(s, c, nullptr, 0u, thread_index_in_simdgroup);",
        "enigma_coop_combine_slots<1>(s, s, 0u, thread_index_in_simdgroup);",
    ] {
        assert!(one.contains(needle), "missing {needle:?} in\n{one}");
    }
    assert!(!one.contains("threadgroup float coop_scratch"), "{one}");
    insta::assert_snapshot!("cooperative_combine_one_simdgroup_fragments.msl", one);
}

/// `combine` of a SIMD group's own tensors on CUDA (each SIMD group holds
/// its own, so no array of the threadgroup may carry them): the source
/// element gathered by shuffles, every lane in every step, no shared
/// scratch and no barrier.
#[test]
fn combinations_of_a_simdgroups_own_tensors_gather_by_shuffles() {
    let text = "kernel own(A: device f32 read, B: device f32 read, C: device f32 read_write) {
    cooperative s: cooperative_tensor<f32, 16, 16, simdgroup>
    cooperative m: cooperative_tensor<f32, 16, 1, simdgroup>
    cooperative c: cooperative_tensor<f32, 1, 16, simdgroup>

    matmul2d(matmul2d_descriptor(16, 16, 8, false, false, false, multiply), simdgroup, tensor(A, 0u32, 8u32, 16u32, 1u32, 8u32), tensor(B, 0u32, 16u32, 8u32, 1u32, 16u32), s)
    reduce_rows(s, m, max)
    reduce_columns(s, c, sum)
    combine(s, m, sub)
    combine(s, c, add)
    cooperative_store(s, tensor(C, 0u32, 16u32, 16u32, 1u32, 16u32))
}
";
    let kernel = parse(text).unwrap_or_else(|e| panic!("{e}"));
    let info = validate(&kernel, &Default::default()).unwrap_or_else(|e| panic!("{e}"));
    for wgmma in [false, true] {
        let cu = cuda::write_string(&kernel, &info, &cuda::Options { wgmma, ..cuda::Options::default() }).unwrap_or_else(|e| panic!("{e}")).source;
        assert!(!cu.contains("__shared__") && !cu.contains("threadgroup_barrier(enigma_tg)"), "{cu}");
        let combine = &cu[cu.rfind("auto enigma_gather").unwrap()..];
        for needle in ["__shfl_sync(0xffffffffu, c[enigma_q], enigma_lane);", "const float enigma_s = enigma_gather(", "s[enigma_i] = s[enigma_i] + enigma_s;"] {
            assert!(combine.contains(needle), "missing {needle:?} in\n{cu}");
        }
        // The gather runs before the slot's validity is tested.
        let body = &combine[combine.find("const float enigma_s").unwrap()..];
        assert!(body.find("enigma_gather(").unwrap() < body.find("if (").unwrap(), "{cu}");
    }
}
