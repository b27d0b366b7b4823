//! One rejected kernel (or more) for every [`ValidationErrorKind`]: each case
//! asserts the exact kind, with its fields, and where validation reports it
//! (the statement path and the builder's source line, or the declarations).
//!
//! Kernels are written with the builder DSL where it can express the mistake,
//! in the text form where that reads better, and as plain `Kernel` data where
//! neither front end can produce it. The [`cases!`] table names the cases of
//! every variant; the match it generates has no wildcard arm, so a variant
//! added to `ValidationErrorKind` does not compile until it is listed there,
//! and [`every_reachable_variant_has_a_case`] fails until it has a case.

use enigma_ir::builder::*;
use enigma_ir::text::parse;
use enigma_ir::{
    validate, Access, AtomicOp, ExecutionScope, Expr, Intrinsic, Kernel, Literal, LiteralValue, Local, MemFlags, Memory,
    Param, ParamId, ParamKind, Scalar, SourceLoc, SpecConstant, Stmt, StmtKind, Type, ValidationError,
    ValidationErrorKind as K, ValidationOptions, VarId,
};

/// Declares, for every variant, the functions that produce it (an empty list
/// for a variant nothing can produce), and generates:
/// * `variant_name`, an exhaustive match over `ValidationErrorKind`;
/// * `CASES`, the table the coverage tests walk;
/// * one `#[test]` per case in `each_case`.
macro_rules! cases {
    ($($variant:ident => [$($case:ident),* $(,)?]),* $(,)?) => {
        /// The variant's name. No wildcard arm: every variant must be listed.
        fn variant_name(kind: &K) -> &'static str {
            match kind {
                $(K::$variant { .. } => stringify!($variant),)*
            }
        }

        type Case = fn() -> ValidationError;

        /// Every variant with its cases, by name.
        const CASES: &[(&str, &[(&str, Case)])] = &[$((stringify!($variant), &[$((stringify!($case), $case as Case)),*])),*];

        mod each_case {
            $($(
                #[test]
                fn $case() {
                    super::$case();
                }
            )*)*
        }
    };
}

cases! {
    OperandTypes => [operand_types_of_an_addition, operand_types_of_a_vector_comparison],
    PrintFormat => [print_with_a_value_too_few, print_of_a_vector, print_with_a_lone_brace],
    MixedSignComparison => [comparing_a_signed_with_an_unsigned_index, comparing_signed_with_unsigned_vectors],
    InvalidOperand => [negating_an_unsigned_integer, shifting_a_float, a_buffer_used_as_a_value, a_texture_used_as_a_value],
    ArgumentCount => [exp_with_two_arguments],
    PrecisionVariant => [fast_fma, precise_min_of_integers],
    ArgumentType => [
        exp_of_an_integer,
        min_of_mixed_types,
        select_on_a_float_condition,
        shuffle_by_a_signed_lane,
        simd_sum_of_a_64_bit_integer,
        shuffle_of_a_bool,
        vector_component_of_another_type,
        a_subscript_checked_against_a_float_size,
    ],
    IndexType => [indexing_with_a_float, indexing_threadgroup_memory_with_a_vector, a_float_subscript],
    AssignType => [
        assigning_a_u32_to_an_f32_local,
        storing_an_f32_into_a_u32_buffer,
        loop_bounds_of_different_types,
        atomic_value_of_another_type,
        atomic_result_into_a_local_of_another_type,
        texture_write_of_a_scalar,
    ],
    ConditionType => [if_on_an_integer, while_on_a_float],
    InvalidCast => [casting_a_vector_to_another_width],
    BitcastSize => [bitcasting_to_a_smaller_type, bitcasting_a_bool],
    ComponentOutOfRange => [component_of_a_scalar, w_of_a_three_vector],
    VectorComponents => [vector_of_two_of_four_components],
    VectorWidth => [local_of_width_five, cast_to_width_eight, vector_constructor_of_width_one],
    LiteralRange => [u8_literal_of_256, unsigned_literal_holding_a_float, spec_default_out_of_range],
    UseBeforeAssign => [
        reading_a_local_never_assigned,
        reading_a_local_assigned_on_one_branch,
        reading_a_local_assigned_only_in_a_loop,
    ],
    OutsideLoop => [break_at_top_level, continue_in_an_if_outside_a_loop],
    DanglingId => [
        local_that_does_not_exist,
        parameter_that_does_not_exist,
        spec_constant_that_does_not_exist,
        threadgroup_array_that_does_not_exist,
        loop_variable_that_does_not_exist,
    ],
    NotAMemory => [indexing_a_by_value_parameter, indexing_a_texture],
    WriteToReadOnly => [storing_to_a_read_only_buffer, atomic_on_a_read_only_buffer],
    AtomicType => [atomic_add_on_f16, atomic_min_on_f32, compare_exchange_on_f32, atomic_on_a_vector_array],
    NonUniformOperand => [shuffle_down_by_a_per_lane_delta, shuffle_xor_by_a_loaded_mask, broadcast_of_a_per_lane_lane],
    NonUniformBarrier => [
        threadgroup_barrier_under_a_thread_dependent_if,
        threadgroup_barrier_under_a_simdgroup_dependent_if,
        simdgroup_barrier_under_a_lane_dependent_if,
        barrier_after_a_divergent_return,
        barrier_in_a_loop_with_a_divergent_trip_count,
    ],
    ThreadgroupMemoryLimit => [threadgroup_memory_over_32_kib, three_vectors_count_as_four, a_smaller_device_limit],
    EmptyThreadgroupArray => [threadgroup_array_of_length_zero],
    EmptyThreadArray => [thread_array_of_length_zero],
    ThreadArrayLimit => [thread_arrays_over_16_kib],
    ThreadArrayUse => [atomic_on_a_thread_array, matrix_load_from_a_thread_array, matrix_store_into_a_thread_array],
    // Unreachable: `Expr::Builtin` holds the closed enum `Builtin`, and the
    // text and JSON readers reject unknown names themselves
    // (`ParseErrorKind::UnknownBuiltin`, a serde error); validation never
    // constructs this kind.
    UnknownBuiltin => [],
    // Unreachable for the same reason: `Expr::Call` holds the closed enum
    // `Intrinsic` (`ParseErrorKind::UnknownFunction` in the text form).
    UnknownFunction => [],
    DuplicateName => [two_locals_with_one_name, a_local_named_like_the_kernel],
    InvalidName => [
        local_named_like_a_keyword,
        local_named_like_a_builtin,
        name_with_a_double_underscore_prefix,
        kernel_name_with_a_space,
    ],
    SpecDefault => [spec_default_of_another_type],
    LoopVariable => [float_loop_variable, vector_loop_variable],
    LoopStep => [loop_with_a_constant_zero_step],
    UnrollBound => [unrolled_loop_to_a_runtime_bound, unrolled_loop_of_too_many_trips],
    TooManyParameters => [thirty_two_buffers],
    TooManyTextures => [thirty_two_textures],
    TextureTexel => [texture_of_u8_texels],
    TextureAccess => [write_to_a_read_only_texture, read_of_a_write_only_texture, sample_of_a_read_texture, fence_of_a_write_texture],
    TextureSampleTexel => [sample_of_a_u32_texture],
    TextureSampleCoord => [sample_at_a_u32x2],
    SamplerPixelRepeat => [pixel_coordinates_that_repeat],
    TextureCoord => [texture_read_at_a_signed_coordinate, texture_write_at_a_scalar_coordinate],
    NotATexture => [texture_read_of_a_buffer],
    MatrixShape => [matrix_of_twelve_rows, matrix_of_integers],
    MatrixPlace => [buffer_of_matrices],
    MatrixOperands => [
        matrix_product_of_mismatched_sides,
        matrix_store_into_memory_of_another_type,
        quantized_load_into_an_f32_tile,
        quantized_load_of_f16_words,
        fragment_ordered_load_of_a_tile_smaller_than_its_unit,
        quantized_load_of_mlx_affine_codes,
    ],
    TileCopy => [tile_copy_of_rows_off_16_bytes, tile_copy_with_extents_read_from_memory],
    NonUniformTileCopy => [tile_wait_in_a_thread_dependent_branch],
    AsyncCopy => [
        async_copy_into_a_device_buffer,
        async_copy_between_element_types,
        async_copy_of_twelve_bytes,
        async_copy_with_a_u32_condition,
        async_wait_leaving_eight_groups,
    ],
    Cooperative => [
        matmul2d_destination_of_another_shape,
        matmul2d_of_f32_into_f16,
        matmul2d_descriptor_side_not_a_multiple_of_8,
        two_threadgroup_scopes_of_different_sizes,
        cooperative_slot_index_of_i32,
    ],
    NonUniformCooperative => [
        matmul2d_under_a_simdgroup_dependent_if,
        cooperative_store_to_a_lane_dependent_view,
    ],
    NonUniformMatrix => [
        matrix_fill_under_a_lane_dependent_if,
        matrix_load_at_a_lane_dependent_offset,
        matrix_filled_with_a_lane_dependent_value,
        quantized_load_at_a_lane_dependent_scale_offset,
    ],
}

/// The variants no kernel can produce. Each is a finding: dead error kinds
/// to remove from `ValidationErrorKind` (this test then needs updating).
const UNREACHABLE: [&str; 2] = ["UnknownBuiltin", "UnknownFunction"];

#[test]
fn every_reachable_variant_has_a_case() {
    let without_cases: Vec<&str> = CASES.iter().filter(|(_, cases)| cases.is_empty()).map(|(v, _)| *v).collect();
    assert_eq!(without_cases, UNREACHABLE, "a variant without a case must be unreachable, and said so here");
}

#[test]
fn every_case_produces_its_variant() {
    for (variant, cases) in CASES {
        for (name, case) in *cases {
            assert_eq!(variant_name(&case().kind), *variant, "case `{name}`");
        }
    }
}

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

/// Where validation must report an error.
enum At<'a> {
    /// The statement at this path (as printed: `body[1].then[0]`), added by
    /// the builder call on this line of this file.
    Built(&'a str, u32),
    /// The statement at this path, in a kernel without source locations (the
    /// text form without location comments, or plain data).
    Path(&'a str),
    /// The kernel's declarations.
    Declarations,
}

/// Validates `kernel` with the default options, which must reject it with
/// exactly `kind`, reported at `at`; returns the error.
fn rejects(kernel: &Kernel, kind: K, at: At) -> ValidationError {
    rejects_with(kernel, &ValidationOptions::default(), kind, at)
}

fn rejects_with(kernel: &Kernel, options: &ValidationOptions, kind: K, at: At) -> ValidationError {
    let err = match validate(kernel, options) {
        Ok(info) => panic!("kernel `{}` passed validation ({info:?}):\n{}", kernel.name, enigma_ir::text::print(kernel)),
        Err(err) => err,
    };
    assert_eq!(err.kernel, kernel.name);
    assert_eq!(err.kind, kind, "{err}");
    let (path, source) = match at {
        At::Built(path, line) => (Some(path), Some(SourceLoc { file: file!().into(), line })),
        At::Path(path) => (Some(path), None),
        At::Declarations => (None, None),
    };
    assert_eq!(err.location.path.as_ref().map(ToString::to_string).as_deref(), path, "{err}");
    assert_eq!(err.location.source, source, "{err}");
    if path.is_none() {
        assert_eq!(err.location.to_string(), "declarations");
    }
    err
}

/// A builder's kernel (a build error fails the test).
fn built(k: KernelBuilder) -> Kernel {
    k.finish().expect("the builder finishes")
}

/// A text-form kernel (a parse error fails the test).
fn parsed(text: &str) -> Kernel {
    parse(text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn vec_ty(elem: Scalar, width: u8) -> Type {
    Type::vector(elem, width)
}

/// A kernel with no declarations and an empty body, to fill in as plain data.
fn empty_kernel() -> Kernel {
    Kernel::empty("k")
}

fn buffer(name: &str, elem: Type, access: Access) -> Param {
    Param { name: name.into(), kind: ParamKind::Buffer { elem, access } }
}

fn u32_lit(v: u32) -> Expr {
    Expr::Literal(Literal::u32(v))
}

const THREAD_CAUSE: &str =
    "a value that differs between threads (thread position, lane, a loaded value, or an earlier return/break)";
const SIMDGROUP_CAUSE: &str =
    "a value that differs between SIMD groups (simdgroup index or a SIMD-group function result)";

// ---------------------------------------------------------------------------
// OperandTypes
// ---------------------------------------------------------------------------

fn operand_types_of_an_addition() -> ValidationError {
    let mut k = KernelBuilder::new("k");
    let out = k.buffer("out", Type::F32, Access::ReadWrite);
    let x = k.value("x", Type::F32);
    let n = k.value("n", Type::U32);
    let line = line!() + 1;
    k.store(out.at(0u32), x + n);
    rejects(&built(k), K::OperandTypes { op: "+", lhs: Type::F32, rhs: Type::U32 }, At::Built("body[0]", line))
}

/// Comparisons do not broadcast a scalar over a vector.
fn operand_types_of_a_vector_comparison() -> ValidationError {
    let mut k = KernelBuilder::new("k");
    let v = k.value("v", vec_ty(Scalar::F32, 4));
    let x = k.value("x", Type::F32);
    let line = line!() + 1;
    k.if_(v.lt(x), |_| {});
    rejects(
        &built(k),
        K::OperandTypes { op: "<", lhs: vec_ty(Scalar::F32, 4), rhs: Type::F32 },
        At::Built("body[0]", line),
    )
}

// ---------------------------------------------------------------------------
// InvalidOperand
// ---------------------------------------------------------------------------

fn negating_an_unsigned_integer() -> ValidationError {
    let mut k = KernelBuilder::new("k");
    let out = k.buffer("out", Type::U32, Access::ReadWrite);
    let n = k.value("n", Type::U32);
    let line = line!() + 1;
    k.store(out.at(0u32), -n);
    rejects(&built(k), K::InvalidOperand { op: "-".into(), ty: Type::U32 }, At::Built("body[0]", line))
}

fn shifting_a_float() -> ValidationError {
    let mut k = KernelBuilder::new("k");
    let out = k.buffer("out", Type::F32, Access::ReadWrite);
    let x = k.value("x", Type::F32);
    k.store(out.at(0u32), x);
    let line = line!() + 1;
    k.store(out.at(1u32), x << 1);
    rejects(&built(k), K::InvalidOperand { op: "<<".into(), ty: Type::F32 }, At::Built("body[1]", line))
}

fn a_buffer_used_as_a_value() -> ValidationError {
    let kernel = parsed(
        "kernel k(A: device f32 read) {
            var x: f32
            x = A
        }",
    );
    rejects(
        &kernel,
        K::InvalidOperand { op: "use of buffer `A` as a value".into(), ty: Type::F32 },
        At::Path("body[0]"),
    )
}

// ---------------------------------------------------------------------------
// ArgumentCount, ArgumentType
// ---------------------------------------------------------------------------

fn exp_with_two_arguments() -> ValidationError {
    let mut k = KernelBuilder::new("k");
    let out = k.buffer("out", Type::F32, Access::ReadWrite);
    let x = k.value("x", Type::F32);
    let line = line!() + 1;
    k.store(out.at(0u32), call(Intrinsic::Exp, &[x, x]));
    rejects(&built(k), K::ArgumentCount { func: "exp", expected: 1, found: 2 }, At::Built("body[0]", line))
}

/// MSL has no `fast::` variant of `fma`.
fn fast_fma() -> ValidationError {
    let mut k = KernelBuilder::new("k");
    let out = k.buffer("out", Type::F32, Access::ReadWrite);
    let x = k.value("x", Type::F32);
    let line = line!() + 1;
    k.store(out.at(0u32), call_with(Intrinsic::Fma, enigma_ir::Precision::Fast, &[x, x, x]));
    let problem = "MSL has no `fast::` or `precise::` variant of `fma`".into();
    let err = rejects(&built(k), K::PrecisionVariant { func: "fma", namespace: "fast", problem }, At::Built("body[0]", line));
    assert!(err.to_string().contains("`fast::fma` does not exist: MSL has no `fast::` or `precise::` variant of `fma`; call `fma`"), "{err}");
    err
}

/// `precise::min` is a float function; integer `min` has one variant.
fn precise_min_of_integers() -> ValidationError {
    let mut k = KernelBuilder::new("k");
    let out = k.buffer("out", Type::U32, Access::ReadWrite);
    let n = k.value("n", Type::U32);
    let line = line!() + 1;
    k.store(out.at(0u32), precise::min(n, 3u32));
    let problem = "`precise::min` takes float scalars and vectors, found u32".into();
    rejects(&built(k), K::PrecisionVariant { func: "min", namespace: "precise", problem }, At::Built("body[0]", line))
}

fn exp_of_an_integer() -> ValidationError {
    let mut k = KernelBuilder::new("k");
    let out = k.buffer("out", Type::U32, Access::ReadWrite);
    let n = k.value("n", Type::U32);
    let line = line!() + 1;
    k.store(out.at(0u32), exp(n));
    rejects(
        &built(k),
        K::ArgumentType { func: "exp", index: 0, expected: "a float scalar or vector".into(), found: Type::U32 },
        At::Built("body[0]", line),
    )
}

fn min_of_mixed_types() -> ValidationError {
    let mut k = KernelBuilder::new("k");
    let out = k.buffer("out", Type::F32, Access::ReadWrite);
    let x = k.value("x", Type::F32);
    let h = k.value("h", Type::F16);
    let line = line!() + 1;
    k.store(out.at(0u32), min(x, h));
    rejects(
        &built(k),
        K::ArgumentType { func: "min", index: 1, expected: "f32".into(), found: Type::F16 },
        At::Built("body[0]", line),
    )
}

fn select_on_a_float_condition() -> ValidationError {
    let mut k = KernelBuilder::new("k");
    let out = k.buffer("out", Type::F32, Access::ReadWrite);
    let x = k.value("x", Type::F32);
    let line = line!() + 1;
    k.store(out.at(0u32), select(x, x, x));
    rejects(
        &built(k),
        K::ArgumentType {
            func: "select",
            index: 2,
            expected: "bool (or a bool vector of the operands' width)".into(),
            found: Type::F32,
        },
        At::Built("body[0]", line),
    )
}

fn shuffle_by_a_signed_lane() -> ValidationError {
    let mut k = KernelBuilder::new("k");
    let out = k.buffer("out", Type::F32, Access::ReadWrite);
    let x = k.value("x", Type::F32);
    let lane = k.value("lane", Type::I32);
    let line = line!() + 1;
    k.store(out.at(0u32), simd_shuffle(x, lane));
    rejects(
        &built(k),
        K::ArgumentType {
            func: "simd_shuffle",
            index: 1,
            expected: "u32 (or u16) lane index or delta".into(),
            found: Type::I32,
        },
        At::Built("body[0]", line),
    )
}

fn vector_component_of_another_type() -> ValidationError {
    let kernel = parsed(
        "kernel k(x: f32, n: u32) {
            var v: f32x2
            v = f32x2(x, n)
        }",
    );
    rejects(
        &kernel,
        K::ArgumentType { func: "vector constructor", index: 1, expected: "f32".into(), found: Type::U32 },
        At::Path("body[0]"),
    )
}

// ---------------------------------------------------------------------------
// IndexType
// ---------------------------------------------------------------------------

fn indexing_with_a_float() -> ValidationError {
    let mut k = KernelBuilder::new("k");
    let out = k.buffer("out", Type::F32, Access::ReadWrite);
    let x = k.value("x", Type::F32);
    let line = line!() + 1;
    k.store(out.at(x), 1.0);
    rejects(&built(k), K::IndexType { memory: "out".into(), found: Type::F32 }, At::Built("body[0]", line))
}

fn indexing_threadgroup_memory_with_a_vector() -> ValidationError {
    let mut k = KernelBuilder::new("k");
    let out = k.buffer("out", Type::F32, Access::ReadWrite);
    let s = k.threadgroup_array("s", Type::F32, 32);
    let line = line!() + 1;
    k.store(out.at(0u32), s.get(thread_position_in_threadgroup()));
    rejects(&built(k), K::IndexType { memory: "s".into(), found: Type::UINT3 }, At::Built("body[0]", line))
}

fn a_float_subscript() -> ValidationError {
    let mut k = KernelBuilder::new("k");
    let out = k.buffer("out", Type::F32, Access::ReadWrite);
    let x = k.value("x", Type::F32);
    let line = line!() + 1;
    k.store(out.at(dim_check(out, 0, x, 4u32)), 1.0);
    rejects(&built(k), K::IndexType { memory: "out".into(), found: Type::F32 }, At::Built("body[0]", line))
}

fn a_subscript_checked_against_a_float_size() -> ValidationError {
    let mut k = KernelBuilder::new("k");
    let out = k.buffer("out", Type::F32, Access::ReadWrite);
    let x = k.value("x", Type::F32);
    let line = line!() + 1;
    k.store(out.at(dim_check(out, 1, 0u32, x)), 1.0);
    rejects(
        &built(k),
        K::ArgumentType { func: "dim_check", index: 3, expected: "an integer scalar (the dimension's size)".into(), found: Type::F32 },
        At::Built("body[0]", line),
    )
}

// ---------------------------------------------------------------------------
// AssignType
// ---------------------------------------------------------------------------

fn assigning_a_u32_to_an_f32_local() -> ValidationError {
    let mut k = KernelBuilder::new("k");
    let x = k.value("x", Type::F32);
    let n = k.value("n", Type::U32);
    let v = k.var("v", x);
    let line = line!() + 1;
    k.assign(v, n);
    rejects(
        &built(k),
        K::AssignType { target: "v".into(), expected: Type::F32, found: Type::U32 },
        At::Built("body[1]", line),
    )
}

fn storing_an_f32_into_a_u32_buffer() -> ValidationError {
    let mut k = KernelBuilder::new("k");
    let out = k.buffer("out", Type::U32, Access::ReadWrite);
    let x = k.value("x", Type::F32);
    let line = line!() + 1;
    k.store(out.at(0u32), x);
    rejects(
        &built(k),
        K::AssignType { target: "out[…]".into(), expected: Type::U32, found: Type::F32 },
        At::Built("body[0]", line),
    )
}

/// The loop variable takes the start's type; the end must match it.
fn loop_bounds_of_different_types() -> ValidationError {
    let mut k = KernelBuilder::new("k");
    let n = k.value("n", Type::I32);
    let line = line!() + 1;
    k.for_range("i", 0u32, n, 1, |_, _| {});
    rejects(
        &built(k),
        K::AssignType { target: "loop end".into(), expected: Type::U32, found: Type::I32 },
        At::Built("body[0]", line),
    )
}

fn atomic_value_of_another_type() -> ValidationError {
    let mut k = KernelBuilder::new("k");
    let counts = k.buffer("counts", Type::U32, Access::ReadWrite);
    let x = k.value("x", Type::F32);
    let line = line!() + 1;
    k.atomic(AtomicOp::Add, counts.at(0u32), x);
    rejects(
        &built(k),
        K::AssignType { target: "atomic value".into(), expected: Type::U32, found: Type::F32 },
        At::Built("body[0]", line),
    )
}

/// The builder declares the result local with the element type; plain data can differ.
fn atomic_result_into_a_local_of_another_type() -> ValidationError {
    let mut kernel = empty_kernel();
    kernel.params.push(buffer("counts", Type::U32, Access::ReadWrite));
    kernel.locals.push(Local { name: "old".into(), ty: Type::F32 });
    kernel.body.push(Stmt::new(StmtKind::Atomic {
        op: AtomicOp::Add,
        mem: Memory::Buffer(ParamId(0)),
        index: u32_lit(0),
        value: u32_lit(1),
        result: Some(VarId(0)),
    }));
    rejects(&kernel, K::AssignType { target: "old".into(), expected: Type::F32, found: Type::U32 }, At::Path("body[0]"))
}

// ---------------------------------------------------------------------------
// ConditionType
// ---------------------------------------------------------------------------

fn if_on_an_integer() -> ValidationError {
    let mut k = KernelBuilder::new("k");
    let n = k.value("n", Type::U32);
    let line = line!() + 1;
    k.if_(n, |k| k.return_());
    rejects(&built(k), K::ConditionType { found: Type::U32 }, At::Built("body[0]", line))
}

fn while_on_a_float() -> ValidationError {
    let kernel = parsed(
        "kernel k(x: f32) {
            if (true) {
                while (x) {
                    break
                }
            }
        }",
    );
    rejects(&kernel, K::ConditionType { found: Type::F32 }, At::Path("body[0].then[0]"))
}

// ---------------------------------------------------------------------------
// InvalidCast, BitcastSize
// ---------------------------------------------------------------------------

fn casting_a_vector_to_another_width() -> ValidationError {
    let mut k = KernelBuilder::new("k");
    let v = k.value("v", vec_ty(Scalar::F32, 4));
    let line = line!() + 1;
    k.var("w", v.cast(vec_ty(Scalar::F32, 2)));
    rejects(
        &built(k),
        K::InvalidCast { from: vec_ty(Scalar::F32, 4), to: vec_ty(Scalar::F32, 2) },
        At::Built("body[0]", line),
    )
}

fn bitcasting_to_a_smaller_type() -> ValidationError {
    let mut k = KernelBuilder::new("k");
    let out = k.buffer("out", Scalar::U16, Access::ReadWrite);
    let x = k.value("x", Type::F32);
    let line = line!() + 1;
    k.store(out.at(0u32), x.bitcast(Scalar::U16));
    rejects(
        &built(k),
        K::BitcastSize { from: Type::F32, from_bytes: 4, to: Scalar::U16.into(), to_bytes: 2 },
        At::Built("body[0]", line),
    )
}

/// Sizes agree (one byte each) but bool has no bit pattern to reinterpret.
fn bitcasting_a_bool() -> ValidationError {
    let mut k = KernelBuilder::new("k");
    let out = k.buffer("out", Scalar::U8, Access::ReadWrite);
    let b = k.value("b", Type::BOOL);
    let line = line!() + 1;
    k.store(out.at(0u32), b.bitcast(Scalar::U8));
    rejects(
        &built(k),
        K::BitcastSize { from: Type::BOOL, from_bytes: 1, to: Scalar::U8.into(), to_bytes: 1 },
        At::Built("body[0]", line),
    )
}

// ---------------------------------------------------------------------------
// ComponentOutOfRange, VectorComponents, VectorWidth
// ---------------------------------------------------------------------------

fn component_of_a_scalar() -> ValidationError {
    let mut k = KernelBuilder::new("k");
    let out = k.buffer("out", Type::F32, Access::ReadWrite);
    let x = k.value("x", Type::F32);
    let line = line!() + 1;
    k.store(out.at(0u32), x.y());
    rejects(&built(k), K::ComponentOutOfRange { index: 1, ty: Type::F32 }, At::Built("body[0]", line))
}

fn w_of_a_three_vector() -> ValidationError {
    let mut k = KernelBuilder::new("k");
    let out = k.buffer("out", Type::U32, Access::ReadWrite);
    let line = line!() + 1;
    k.store(out.at(0u32), thread_position_in_grid().w());
    rejects(&built(k), K::ComponentOutOfRange { index: 3, ty: Type::UINT3 }, At::Built("body[0]", line))
}

fn vector_of_two_of_four_components() -> ValidationError {
    let mut k = KernelBuilder::new("k");
    let x = k.value("x", Type::F32);
    let line = line!() + 1;
    k.var("v", vector(vec_ty(Scalar::F32, 4), &[x, x]));
    rejects(
        &built(k),
        K::VectorComponents { ty: vec_ty(Scalar::F32, 4), expected: 4, found: 2 },
        At::Built("body[0]", line),
    )
}

fn local_of_width_five() -> ValidationError {
    let mut k = KernelBuilder::new("k");
    k.var_uninit("v", vec_ty(Scalar::F32, 5));
    rejects(&built(k), K::VectorWidth { width: 5 }, At::Declarations)
}

fn cast_to_width_eight() -> ValidationError {
    let mut k = KernelBuilder::new("k");
    let out = k.buffer("out", Type::F32, Access::ReadWrite);
    let x = k.value("x", Type::F32);
    let line = line!() + 1;
    k.store(out.at(0u32), x.cast(vec_ty(Scalar::F32, 8)).x());
    rejects(&built(k), K::VectorWidth { width: 8 }, At::Built("body[0]", line))
}

/// A vector constructor makes 2–4 components; `f32(x)` is a cast.
fn vector_constructor_of_width_one() -> ValidationError {
    let mut k = KernelBuilder::new("k");
    let out = k.buffer("out", Type::F32, Access::ReadWrite);
    let x = k.value("x", Type::F32);
    let line = line!() + 1;
    k.store(out.at(0u32), vector(Type::F32, &[x]));
    rejects(&built(k), K::VectorWidth { width: 1 }, At::Built("body[0]", line))
}

// ---------------------------------------------------------------------------
// LiteralRange
// ---------------------------------------------------------------------------

fn u8_literal_of_256() -> ValidationError {
    let mut k = KernelBuilder::new("k");
    let out = k.buffer("out", Scalar::U8, Access::ReadWrite);
    let line = line!() + 1;
    k.store(out.at(0u32), Ex::literal(Literal { ty: Scalar::U8, value: LiteralValue::UInt(256) }));
    rejects(&built(k), K::LiteralRange { value: "256".into(), ty: Scalar::U8 }, At::Built("body[0]", line))
}

/// A value of the wrong kind for its type is out of range too.
fn unsigned_literal_holding_a_float() -> ValidationError {
    let kernel = parsed(
        "kernel k(out: device u32 read_write) {
            out[0u32] = 1u32
            out[1u32] = lit<u32>(float 1.5)
        }",
    );
    rejects(&kernel, K::LiteralRange { value: "1.5e0 (a float)".into(), ty: Scalar::U32 }, At::Path("body[1]"))
}

fn spec_default_out_of_range() -> ValidationError {
    let mut k = KernelBuilder::new("k");
    k.spec("S", Literal { ty: Scalar::I8, value: LiteralValue::Int(128) });
    rejects(&built(k), K::LiteralRange { value: "128".into(), ty: Scalar::I8 }, At::Declarations)
}

// ---------------------------------------------------------------------------
// UseBeforeAssign
// ---------------------------------------------------------------------------

fn reading_a_local_never_assigned() -> ValidationError {
    let mut k = KernelBuilder::new("k");
    let out = k.buffer("out", Type::F32, Access::ReadWrite);
    let v = k.var_uninit("v", Type::F32);
    let line = line!() + 1;
    k.store(out.at(0u32), v);
    rejects(&built(k), K::UseBeforeAssign { var: "v".into() }, At::Built("body[0]", line))
}

fn reading_a_local_assigned_on_one_branch() -> ValidationError {
    let mut k = KernelBuilder::new("k");
    let out = k.buffer("out", Type::F32, Access::ReadWrite);
    let n = k.value("n", Type::U32);
    let v = k.var_uninit("v", Type::F32);
    let tid = k.let_("tid", thread_position_in_grid().x());
    k.if_(tid.lt(n), |k| k.assign(v, 1.0));
    let line = line!() + 1;
    k.store(out.at(tid), v);
    rejects(&built(k), K::UseBeforeAssign { var: "v".into() }, At::Built("body[2]", line))
}

/// A loop may run zero times: what its body assigns is not assigned after it.
fn reading_a_local_assigned_only_in_a_loop() -> ValidationError {
    let mut k = KernelBuilder::new("k");
    let out = k.buffer("out", Type::F32, Access::ReadWrite);
    let n = k.value("n", Type::U32);
    let v = k.var_uninit("v", Type::F32);
    k.for_range("i", 0u32, n, 1u32, |k, _| k.assign(v, 2.0));
    let line = line!() + 1;
    k.store(out.at(0u32), v);
    rejects(&built(k), K::UseBeforeAssign { var: "v".into() }, At::Built("body[1]", line))
}

// ---------------------------------------------------------------------------
// OutsideLoop
// ---------------------------------------------------------------------------

fn break_at_top_level() -> ValidationError {
    let mut k = KernelBuilder::new("k");
    let line = line!() + 1;
    k.break_();
    rejects(&built(k), K::OutsideLoop { what: "break" }, At::Built("body[0]", line))
}

fn continue_in_an_if_outside_a_loop() -> ValidationError {
    let mut k = KernelBuilder::new("k");
    let b = k.value("b", Type::BOOL);
    let line = line!() + 1;
    k.if_(b, |k| k.continue_());
    rejects(&built(k), K::OutsideLoop { what: "continue" }, At::Built("body[0].then[0]", line))
}

// ---------------------------------------------------------------------------
// DanglingId (the text form writes undeclared ids as `$local(3)`, …)
// ---------------------------------------------------------------------------

fn local_that_does_not_exist() -> ValidationError {
    let kernel = parsed(
        "kernel k(out: device f32 read_write) {
            var x: f32
            x = 1.0f32
            out[0u32] = $local(3)
        }",
    );
    rejects(&kernel, K::DanglingId { what: "local", index: 3, count: 1 }, At::Path("body[1]"))
}

fn parameter_that_does_not_exist() -> ValidationError {
    let kernel = parsed(
        "kernel k(out: device f32 read_write) {
            out[0u32] = $param(1)
        }",
    );
    rejects(&kernel, K::DanglingId { what: "parameter", index: 1, count: 1 }, At::Path("body[0]"))
}

fn spec_constant_that_does_not_exist() -> ValidationError {
    let kernel = parsed(
        "kernel k(out: device u32 read_write) {
            out[$spec(0)] = 1u32
        }",
    );
    rejects(&kernel, K::DanglingId { what: "specialisation constant", index: 0, count: 0 }, At::Path("body[0]"))
}

fn threadgroup_array_that_does_not_exist() -> ValidationError {
    let kernel = parsed(
        "kernel k() {
            threadgroup s: f32[32]
            while (true) {
                $tg(1)[0u32] = 1.0f32
            }
        }",
    );
    rejects(&kernel, K::DanglingId { what: "threadgroup array", index: 1, count: 1 }, At::Path("body[0].loop[0]"))
}

fn loop_variable_that_does_not_exist() -> ValidationError {
    let mut kernel = empty_kernel();
    kernel.body.push(Stmt::new(StmtKind::For {
        var: VarId(0),
        start: u32_lit(0),
        end: u32_lit(4),
        step: u32_lit(1),
        body: vec![],
        unroll: false,
    }));
    rejects(&kernel, K::DanglingId { what: "local", index: 0, count: 0 }, At::Path("body[0]"))
}

// ---------------------------------------------------------------------------
// NotAMemory, WriteToReadOnly, AtomicType
// ---------------------------------------------------------------------------

fn indexing_a_by_value_parameter() -> ValidationError {
    let kernel = parsed(
        "kernel k(n: u32, out: device u32 read_write) {
            out[0u32] = n[0u32]
        }",
    );
    rejects(&kernel, K::NotAMemory { name: "n".into(), what: "a by-value parameter" }, At::Path("body[0]"))
}

fn indexing_a_texture() -> ValidationError {
    let kernel = parsed(
        "kernel k(t: texture2d<f32, read>, out: device f32 read_write) {
            out[0u32] = t[0u32]
        }",
    );
    let what = "a texture (read it with read(), write it with write())";
    rejects(&kernel, K::NotAMemory { name: "t".into(), what }, At::Path("body[0]"))
}

// ---------------------------------------------------------------------------
// Textures: TooManyTextures, TextureTexel, TextureAccess, TextureCoord, NotATexture
// ---------------------------------------------------------------------------

fn a_texture_used_as_a_value() -> ValidationError {
    let kernel = parsed(
        "kernel k(t: texture2d<f16, read>) {
            var x: f16x4
            x = t
        }",
    );
    let op = "use of texture `t` as a value (read a texel with read())".to_string();
    rejects(&kernel, K::InvalidOperand { op, ty: vec_ty(Scalar::F16, 4) }, At::Path("body[0]"))
}

fn texture_write_of_a_scalar() -> ValidationError {
    let mut k = KernelBuilder::new("k");
    let out = k.texture2d("out", Scalar::F32, enigma_ir::TextureAccess::Write);
    let gid = k.let_("gid", thread_position_in_grid());
    let coord = vector(vec_ty(Scalar::U32, 2), &[gid.x(), gid.y()]);
    let line = line!() + 1;
    k.texture_write(out, 1.0f32, coord);
    let expected = vec_ty(Scalar::F32, 4);
    rejects(&built(k), K::AssignType { target: "a texel of texture `out`".into(), expected, found: Type::F32 }, At::Built("body[1]", line))
}

fn thirty_two_textures() -> ValidationError {
    let mut k = KernelBuilder::new("k");
    let texs: Vec<_> = (0..32).map(|i| k.texture2d(&format!("t{i}"), Scalar::F32, enigma_ir::TextureAccess::Write)).collect();
    k.texture_write(texs[31], vector(vec_ty(Scalar::F32, 4), &[1.0f32.into()]), vector(vec_ty(Scalar::U32, 2), &[0u32.into()]));
    rejects(&built(k), K::TooManyTextures { count: 32, limit: 31 }, At::Declarations)
}

#[test]
fn thirty_one_textures_beside_thirty_one_buffers_are_accepted() {
    let mut k = KernelBuilder::new("k");
    let texs: Vec<_> = (0..31).map(|i| k.texture2d(&format!("t{i}"), Scalar::U32, enigma_ir::TextureAccess::Write)).collect();
    let bufs: Vec<_> = (0..31).map(|i| k.buffer(&format!("b{i}"), Type::U32, Access::ReadWrite)).collect();
    let v = vector(vec_ty(Scalar::U32, 4), &[bufs[30].get(0u32)]);
    k.texture_write(texs[30], v, vector(vec_ty(Scalar::U32, 2), &[0u32.into()]));
    let kernel = built(k);
    validate(&kernel, &ValidationOptions::default()).unwrap();
    assert_eq!(kernel.binding(ParamId(30)), 30, "the last texture binds at texture(30)");
    assert_eq!(kernel.binding(ParamId(31)), 0, "the first buffer binds at buffer(0)");
}

fn texture_of_u8_texels() -> ValidationError {
    let kernel = parsed("kernel k(t: texture2d<u8, read>) {
}");
    rejects(&kernel, K::TextureTexel { texture: "t".into(), texel: Scalar::U8 }, At::Declarations)
}

fn write_to_a_read_only_texture() -> ValidationError {
    let kernel = parsed(
        "kernel k(t: texture2d<f32, read>) {
            texture_write(t, f32x4(0.5f32), u32x2(0u32, 0u32))
        }",
    );
    rejects(&kernel, K::TextureAccess { texture: "t".into(), access: enigma_ir::TextureAccess::Read, op: "write" }, At::Path("body[0]"))
}

fn read_of_a_write_only_texture() -> ValidationError {
    let kernel = parsed(
        "kernel k(t: texture2d<u32, write>, out: device u32x4 read_write) {
            out[0u32] = texture_read(t, u32x2(0u32, 0u32))
        }",
    );
    rejects(&kernel, K::TextureAccess { texture: "t".into(), access: enigma_ir::TextureAccess::Write, op: "read" }, At::Path("body[0]"))
}

fn sample_of_a_read_texture() -> ValidationError {
    let kernel = parsed(
        "kernel k(t: texture2d<f32, read>, out: device f32x4 read_write) {
            out[0u32] = texture_sample(t, sampler(normalized, linear, clamp_to_edge), f32x2(0.5f32))
        }",
    );
    rejects(&kernel, K::TextureAccess { texture: "t".into(), access: enigma_ir::TextureAccess::Read, op: "sample" }, At::Path("body[0]"))
}

fn fence_of_a_write_texture() -> ValidationError {
    let mut k = KernelBuilder::new("k");
    let t = k.texture2d("t", Scalar::F32, enigma_ir::TextureAccess::Write);
    let line = line!() + 1;
    k.texture_fence(t);
    let err = rejects(&built(k), K::TextureAccess { texture: "t".into(), access: enigma_ir::TextureAccess::Write, op: "fence" }, At::Built("body[0]", line));
    assert!(err.to_string().contains("cannot be fenced (fence() orders a read_write texture's writes before its reads)"), "{err}");
    err
}

fn async_copy_into_a_device_buffer() -> ValidationError {
    let kernel = parsed(
        "kernel k(src: device f32 read, dst: device f32 read_write) {
            async_copy(dst[0u32], src[0u32], 1, true)
        }",
    );
    rejects(&kernel, async_problem("copies from a device buffer to threadgroup memory, not from `src` to `dst`"), At::Path("body[0]"))
}

fn async_copy_between_element_types() -> ValidationError {
    let kernel = parsed(
        "kernel k(src: device u32 read) {
            threadgroup s: f32[4]

            async_copy(s[0u32], src[0u32], 1, true)
        }",
    );
    let problem = "copies between memories of one element type; the destination holds f32, the source u32";
    rejects(&kernel, async_problem(problem), At::Path("body[0]"))
}

fn async_copy_of_twelve_bytes() -> ValidationError {
    let kernel = parsed(
        "kernel k(src: device f32 read) {
            threadgroup s: f32[4]

            async_copy(s[0u32], src[0u32], 3, true)
        }",
    );
    rejects(&kernel, async_problem("moves 4, 8 or 16 bytes; 3 × f32 is 12 bytes"), At::Path("body[0]"))
}

fn async_copy_with_a_u32_condition() -> ValidationError {
    let kernel = parsed(
        "kernel k(src: device f32 read) {
            threadgroup s: f32[4]

            async_copy(s[0u32], src[0u32], 1, 1u32)
        }",
    );
    let problem = "takes a bool saying whether to read the source (false: zeros), found u32";
    rejects(&kernel, async_problem(problem), At::Path("body[0]"))
}

fn async_wait_leaving_eight_groups() -> ValidationError {
    let kernel = parsed("kernel k() {\n    async_wait(8)\n}");
    rejects(&kernel, async_problem("`async_wait(8)` leaves too many groups in flight (at most 7)"), At::Path("body[0]"))
}

fn tile_copy_of_rows_off_16_bytes() -> ValidationError {
    let kernel = parsed(
        "kernel k(src: device f32 read) {
            threadgroup s: f32[64]

            tile_copy(0u32, s[0u32], src, 8u32, 8u32, 8u32, 0i32, 0i32, 4, 3)
        }",
    );
    rejects(&kernel, K::TileCopy { problem: "copies rows of a multiple of 16 bytes; 3 × f32 is 12 bytes".into() }, At::Path("body[0]"))
}

fn tile_copy_with_extents_read_from_memory() -> ValidationError {
    let kernel = parsed(
        "kernel k(src: device u32 read) {
            threadgroup s: u32[64]

            tile_copy(0u32, s[0u32], src, src[0u32], 8u32, 8u32, 0i32, 0i32, 4, 4)
        }",
    );
    let problem = "needs its row count fixed for the whole dispatch: literals, specialization constants and by-value parameters under + - * / min max (the CUDA backend describes the source matrix to the copy engine before the launch)";
    rejects(&kernel, K::TileCopy { problem: problem.into() }, At::Path("body[0]"))
}

fn tile_wait_in_a_thread_dependent_branch() -> ValidationError {
    let kernel = parsed(
        "kernel k(src: device u32 read) {
            threadgroup s: u32[64]

            tile_copy(0u32, s[0u32], src, 8u32, 8u32, 8u32, 0i32, 0i32, 4, 4)
            if (thread_index_in_threadgroup < 4u32) {
                tile_wait(0u32)
            }
        }",
    );
    let cause = "it sits in control flow that depends on a value that differs between threads or SIMD groups";
    rejects(&kernel, K::NonUniformTileCopy { op: "tile_wait", cause: cause.into() }, At::Path("body[1].then[0]"))
}

fn async_problem(problem: &str) -> K {
    K::AsyncCopy { problem: problem.into() }
}

fn sample_of_a_u32_texture() -> ValidationError {
    let kernel = parsed(
        "kernel k(t: texture2d<u32, sample>, out: device u32x4 read_write) {
            out[0u32] = texture_sample(t, sampler(normalized, nearest, clamp_to_edge), f32x2(0.5f32))
        }",
    );
    rejects(&kernel, K::TextureSampleTexel { texture: "t".into(), texel: Scalar::U32 }, At::Path("body[0]"))
}

fn sample_at_a_u32x2() -> ValidationError {
    let kernel = parsed(
        "kernel k(t: texture2d<f16, sample>, out: device f16x4 read_write) {
            out[0u32] = texture_sample(t, sampler(pixel, nearest, clamp_to_zero), u32x2(0u32, 1u32))
        }",
    );
    rejects(&kernel, K::TextureSampleCoord { texture: "t".into(), found: vec_ty(Scalar::U32, 2) }, At::Path("body[0]"))
}

fn pixel_coordinates_that_repeat() -> ValidationError {
    let mut k = KernelBuilder::new("k");
    let t = k.texture2d("t", Scalar::F32, enigma_ir::TextureAccess::Sample);
    let out = k.buffer("out", vec_ty(Scalar::F32, 4), Access::ReadWrite);
    let sampler = enigma_ir::Sampler {
        coord: enigma_ir::SamplerCoord::Pixel,
        filter: enigma_ir::SamplerFilter::Linear,
        address: enigma_ir::SamplerAddress::MirroredRepeat,
    };
    let line = line!() + 1;
    k.store(out.at(0u32), t.sample(sampler, vector(vec_ty(Scalar::F32, 2), &[1.5f32.into()])));
    rejects(&built(k), K::SamplerPixelRepeat { texture: "t".into(), sampler }, At::Built("body[0]", line))
}

fn texture_read_at_a_signed_coordinate() -> ValidationError {
    let kernel = parsed(
        "kernel k(t: texture2d<f32, sample>, out: device f32x4 read_write) {
            out[0u32] = texture_read(t, i32x2(0i32, 1i32))
        }",
    );
    rejects(&kernel, K::TextureCoord { texture: "t".into(), found: vec_ty(Scalar::I32, 2) }, At::Path("body[0]"))
}

fn texture_write_at_a_scalar_coordinate() -> ValidationError {
    let kernel = parsed(
        "kernel k(t: texture2d<i32, read_write>) {
            texture_write(t, i32x4(7i32), thread_index_in_threadgroup)
        }",
    );
    rejects(&kernel, K::TextureCoord { texture: "t".into(), found: Type::U32 }, At::Path("body[0]"))
}

fn texture_read_of_a_buffer() -> ValidationError {
    let kernel = parsed(
        "kernel k(a: device f32x4 read, out: device f32x4 read_write) {
            out[get_width(a)] = texture_read(a, u32x2(0u32, 0u32))
        }",
    );
    rejects(&kernel, K::NotATexture { name: "a".into() }, At::Path("body[0]"))
}

fn storing_to_a_read_only_buffer() -> ValidationError {
    let mut k = KernelBuilder::new("k");
    let a = k.buffer("A", Type::F32, Access::Read);
    let line = line!() + 1;
    k.store(a.at(0u32), 1.0);
    rejects(&built(k), K::WriteToReadOnly { buffer: "A".into() }, At::Built("body[0]", line))
}

fn atomic_on_a_read_only_buffer() -> ValidationError {
    let mut k = KernelBuilder::new("k");
    let counts = k.buffer("counts", Type::U32, Access::Read);
    let line = line!() + 1;
    k.atomic(AtomicOp::Add, counts.at(0u32), 1u32);
    rejects(&built(k), K::WriteToReadOnly { buffer: "counts".into() }, At::Built("body[0]", line))
}

fn atomic_add_on_f16() -> ValidationError {
    let mut k = KernelBuilder::new("k");
    let h = k.buffer("h", Type::F16, Access::ReadWrite);
    let line = line!() + 1;
    k.atomic(AtomicOp::Add, h.at(0u32), lit(Scalar::F16, 1.0));
    rejects(&built(k), K::AtomicType { memory: "h".into(), elem: Type::F16 }, At::Built("body[0]", line))
}

/// f32 atomics are add, sub and exchange only.
fn atomic_min_on_f32() -> ValidationError {
    let mut k = KernelBuilder::new("k");
    let a = k.buffer("A", Type::F32, Access::ReadWrite);
    k.atomic(AtomicOp::Add, a.at(0u32), 1.0);
    let line = line!() + 1;
    k.atomic(AtomicOp::Min, a.at(0u32), 1.0);
    rejects(&built(k), K::AtomicType { memory: "A".into(), elem: Type::F32 }, At::Built("body[1]", line))
}

fn compare_exchange_on_f32() -> ValidationError {
    let mut k = KernelBuilder::new("k");
    let a = k.buffer("A", Type::F32, Access::ReadWrite);
    let line = line!() + 1;
    k.atomic_compare_exchange(a.at(0u32), 0.0, 1.0);
    rejects(&built(k), K::AtomicType { memory: "A".into(), elem: Type::F32 }, At::Built("body[0]", line))
}

fn atomic_on_a_vector_array() -> ValidationError {
    let mut k = KernelBuilder::new("k");
    let s = k.threadgroup_array("s", vec_ty(Scalar::U32, 2), 32);
    let line = line!() + 1;
    k.atomic(AtomicOp::Or, s.at(0u32), vector(vec_ty(Scalar::U32, 2), &[1u32.into()]));
    rejects(&built(k), K::AtomicType { memory: "s".into(), elem: vec_ty(Scalar::U32, 2) }, At::Built("body[0]", line))
}

/// MSL's SIMD-group functions exclude long and ulong (spec §6.9.2).
fn simd_sum_of_a_64_bit_integer() -> ValidationError {
    let mut k = KernelBuilder::new("k");
    let out = k.buffer("out", Type::U64, Access::ReadWrite);
    let x = k.value("x", Type::U64);
    let line = line!() + 1;
    k.store(out.at(0u32), simd_sum(x));
    rejects(
        &built(k),
        K::ArgumentType {
            func: "simd_sum",
            index: 0,
            expected: "a numeric scalar or vector, not 64-bit (MSL's SIMD-group functions exclude long and ulong)".into(),
            found: Type::U64,
        },
        At::Built("body[0]", line),
    )
}

/// ... and bool (spec §6.9.2).
fn shuffle_of_a_bool() -> ValidationError {
    let mut k = KernelBuilder::new("k");
    let out = k.buffer("out", Type::U32, Access::ReadWrite);
    let x = k.value("x", Type::U32);
    let line = line!() + 1;
    k.store(out.at(0u32), select(0u32, 1u32, simd_shuffle_xor(x.eq(1u32), 1u32)));
    rejects(
        &built(k),
        K::ArgumentType {
            func: "simd_shuffle_xor",
            index: 0,
            expected: "a scalar or vector of 8- to 32-bit integers or floats (MSL's SIMD-group functions exclude bool, long and ulong)".into(),
            found: Type::BOOL,
        },
        At::Built("body[0]", line),
    )
}

// ---------------------------------------------------------------------------
// NonUniformOperand
// ---------------------------------------------------------------------------

const SHUFFLE_FIX: &str = "compute it from values uniform over the SIMD group, or use `simd_shuffle(x, lane)`, whose lane may differ per lane";

/// The seed stencil's old edge case: a delta of 0 for the grid's last thread only.
fn shuffle_down_by_a_per_lane_delta() -> ValidationError {
    let mut k = KernelBuilder::new("k");
    let out = k.buffer("out", Type::F32, Access::ReadWrite);
    let x = k.value("x", Type::F32);
    let tid = k.let_("tid", thread_position_in_grid().x());
    // A delta uniform over the SIMD group is fine ...
    k.store(out.at(tid), simd_shuffle_down(x, simdgroup_index_in_threadgroup()));
    // ... one that differs per thread is not.
    let delta = k.let_("delta", select(1u32, 0u32, tid.ge(63u32)));
    let line = line!() + 1;
    k.store(out.at(tid), simd_shuffle_down(x, delta));
    rejects(
        &built(k),
        K::NonUniformOperand { func: "simd_shuffle_down", operand: "delta", cause: THREAD_CAUSE.into(), fix: SHUFFLE_FIX },
        At::Built("body[3]", line),
    )
}

fn shuffle_xor_by_a_loaded_mask() -> ValidationError {
    let mut k = KernelBuilder::new("k");
    let masks = k.buffer("masks", Type::U32, Access::Read);
    let out = k.buffer("out", Type::F32, Access::ReadWrite);
    let x = k.value("x", Type::F32);
    // A load at a uniform index is uniform; one at a per-thread index is not.
    k.store(out.at(1u32), simd_shuffle_xor(x, masks.get(0u32)));
    let line = line!() + 1;
    k.store(out.at(0u32), simd_shuffle_xor(x, masks.get(thread_position_in_grid().x())));
    rejects(
        &built(k),
        K::NonUniformOperand { func: "simd_shuffle_xor", operand: "mask", cause: THREAD_CAUSE.into(), fix: SHUFFLE_FIX },
        At::Built("body[1]", line),
    )
}

fn broadcast_of_a_per_lane_lane() -> ValidationError {
    let mut k = KernelBuilder::new("k");
    let out = k.buffer("out", Type::F32, Access::ReadWrite);
    let x = k.value("x", Type::F32);
    // A per-lane lane is what `simd_shuffle` is for.
    k.store(out.at(1u32), simd_shuffle(x, thread_index_in_simdgroup() ^ 1u32));
    let line = line!() + 1;
    k.store(out.at(0u32), simd_broadcast(x, thread_index_in_simdgroup() / 2u32));
    rejects(
        &built(k),
        K::NonUniformOperand {
            func: "simd_broadcast",
            operand: "lane",
            cause: THREAD_CAUSE.into(),
            fix: "compute it from values uniform over the SIMD group, or use `simd_shuffle(x, lane)` for a lane per lane",
        },
        At::Built("body[1]", line),
    )
}

// ---------------------------------------------------------------------------
// NonUniformBarrier
// ---------------------------------------------------------------------------

fn threadgroup_barrier_under_a_thread_dependent_if() -> ValidationError {
    let mut k = KernelBuilder::new("k");
    let tid = k.let_("tid", thread_index_in_threadgroup());
    let line = line!() + 1;
    k.if_(tid.lt(16u32), |k| k.threadgroup_barrier(MemFlags::Threadgroup));
    let kernel = built(k);
    // The sanitizer's harnesses turn the rule off to see the simulator report it.
    assert!(validate(&kernel, &ValidationOptions::allowing_divergent_barriers()).is_ok());
    rejects(
        &kernel,
        K::NonUniformBarrier { barrier: "threadgroup_barrier", group: "threadgroup", cause: THREAD_CAUSE.into() },
        At::Built("body[1].then[0]", line),
    )
}

/// Uniform within each SIMD group is not uniform over the threadgroup.
fn threadgroup_barrier_under_a_simdgroup_dependent_if() -> ValidationError {
    let mut k = KernelBuilder::new("k");
    let line = line!() + 1;
    k.if_(simdgroup_index_in_threadgroup().eq(0u32), |k| k.threadgroup_barrier(MemFlags::None));
    rejects(
        &built(k),
        K::NonUniformBarrier { barrier: "threadgroup_barrier", group: "threadgroup", cause: SIMDGROUP_CAUSE.into() },
        At::Built("body[0].then[0]", line),
    )
}

fn simdgroup_barrier_under_a_lane_dependent_if() -> ValidationError {
    let mut k = KernelBuilder::new("k");
    // A SIMD-group-uniform condition is fine for a simdgroup barrier ...
    k.if_(simdgroup_index_in_threadgroup().eq(0u32), |k| k.simdgroup_barrier(MemFlags::None));
    // ... a lane-dependent one is not.
    let line = line!() + 1;
    k.if_(thread_index_in_simdgroup().lt(8u32), |k| k.simdgroup_barrier(MemFlags::None));
    rejects(
        &built(k),
        K::NonUniformBarrier { barrier: "simdgroup_barrier", group: "SIMD group", cause: THREAD_CAUSE.into() },
        At::Built("body[1].then[0]", line),
    )
}

fn barrier_after_a_divergent_return() -> ValidationError {
    let mut k = KernelBuilder::new("k");
    let n = k.value("n", Type::U32);
    let tid = k.let_("tid", thread_position_in_grid().x());
    k.if_(tid.ge(n), |k| k.return_());
    let line = line!() + 1;
    k.threadgroup_barrier(MemFlags::Device);
    rejects(
        &built(k),
        K::NonUniformBarrier { barrier: "threadgroup_barrier", group: "threadgroup", cause: THREAD_CAUSE.into() },
        At::Built("body[2]", line),
    )
}

fn barrier_in_a_loop_with_a_divergent_trip_count() -> ValidationError {
    let mut k = KernelBuilder::new("k");
    let tid = k.let_("tid", thread_index_in_threadgroup());
    let line = line!() + 1;
    k.for_range("i", 0u32, tid, 1u32, |k, _| k.threadgroup_barrier(MemFlags::Threadgroup));
    rejects(
        &built(k),
        K::NonUniformBarrier { barrier: "threadgroup_barrier", group: "threadgroup", cause: THREAD_CAUSE.into() },
        At::Built("body[1].loop[0]", line),
    )
}

// ---------------------------------------------------------------------------
// Declarations: ThreadgroupMemoryLimit, EmptyThreadgroupArray, DuplicateName,
// InvalidName, SpecDefault
// ---------------------------------------------------------------------------

fn threadgroup_memory_over_32_kib() -> ValidationError {
    let mut k = KernelBuilder::new("k");
    k.threadgroup_array("a", Type::F32, 4096);
    k.threadgroup_array("b", Type::F32, 4097);
    rejects(&built(k), K::ThreadgroupMemoryLimit { bytes: 32772, limit: 32768 }, At::Declarations)
}

/// 2048 `f32x3` fill 32 KiB exactly (16 bytes each); one more is over.
fn three_vectors_count_as_four() -> ValidationError {
    let mut k = KernelBuilder::new("k");
    k.threadgroup_array("a", vec_ty(Scalar::F32, 3), 2048);
    assert!(validate(&built(k), &ValidationOptions::default()).is_ok());
    let mut k = KernelBuilder::new("k");
    k.threadgroup_array("a", vec_ty(Scalar::F32, 3), 2049);
    rejects(&built(k), K::ThreadgroupMemoryLimit { bytes: 32784, limit: 32768 }, At::Declarations)
}

fn a_smaller_device_limit() -> ValidationError {
    let mut k = KernelBuilder::new("k");
    k.threadgroup_array("a", Type::F32, 257);
    let options = ValidationOptions { max_threadgroup_memory_bytes: 1024, ..ValidationOptions::default() };
    rejects_with(&built(k), &options, K::ThreadgroupMemoryLimit { bytes: 1028, limit: 1024 }, At::Declarations)
}

fn threadgroup_array_of_length_zero() -> ValidationError {
    let mut k = KernelBuilder::new("k");
    k.threadgroup_array("s", Type::F32, 0);
    rejects(&built(k), K::EmptyThreadgroupArray { name: "s".into() }, At::Declarations)
}

fn thread_array_of_length_zero() -> ValidationError {
    let mut k = KernelBuilder::new("k");
    k.thread_array("acc", Type::F32, 0);
    rejects(&built(k), K::EmptyThreadArray { name: "acc".into() }, At::Declarations)
}

/// 16 KiB of per-thread arrays pass; one element more is over.
fn thread_arrays_over_16_kib() -> ValidationError {
    let mut k = KernelBuilder::new("k");
    k.thread_array("a", vec_ty(Scalar::F32, 4), 512);
    k.thread_array("b", Type::F32, 2048);
    assert!(validate(&built(k), &ValidationOptions::default()).is_ok());
    let mut k = KernelBuilder::new("k");
    k.thread_array("a", vec_ty(Scalar::F32, 4), 512);
    k.thread_array("b", Type::F32, 2049);
    rejects(&built(k), K::ThreadArrayLimit { bytes: 16388, limit: 16384 }, At::Declarations)
}

/// The text form rejects a duplicate itself (`ParseErrorKind::DuplicateName`).
fn two_locals_with_one_name() -> ValidationError {
    let mut k = KernelBuilder::new("k");
    k.var_uninit("x", Type::F32);
    k.var_uninit("x", Type::U32);
    rejects(&built(k), K::DuplicateName { name: "x".into() }, At::Declarations)
}

fn a_local_named_like_the_kernel() -> ValidationError {
    let mut k = KernelBuilder::new("scale");
    k.value("n", Type::U32);
    k.var_uninit("scale", Type::F32);
    rejects(&built(k), K::DuplicateName { name: "scale".into() }, At::Declarations)
}

fn local_named_like_a_keyword() -> ValidationError {
    let mut k = KernelBuilder::new("k");
    k.var_uninit("float", Type::F32);
    rejects(&built(k), K::InvalidName { name: "float".into() }, At::Declarations)
}

fn local_named_like_a_builtin() -> ValidationError {
    let mut k = KernelBuilder::new("k");
    k.value("thread_index_in_simdgroup", Type::U32);
    rejects(&built(k), K::InvalidName { name: "thread_index_in_simdgroup".into() }, At::Declarations)
}

fn name_with_a_double_underscore_prefix() -> ValidationError {
    let mut k = KernelBuilder::new("k");
    k.threadgroup_array("__s", Type::F32, 4);
    rejects(&built(k), K::InvalidName { name: "__s".into() }, At::Declarations)
}

fn kernel_name_with_a_space() -> ValidationError {
    let k = KernelBuilder::new("my kernel");
    rejects(&built(k), K::InvalidName { name: "my kernel".into() }, At::Declarations)
}

/// The builder takes a spec constant's type from its default; plain data need not.
fn spec_default_of_another_type() -> ValidationError {
    let mut kernel = empty_kernel();
    kernel.spec_constants.push(SpecConstant { name: "TILE".into(), ty: Scalar::U32, default: Literal::f32(32.0) });
    rejects(
        &kernel,
        K::SpecDefault { name: "TILE".into(), ty: Scalar::U32, default: Literal::f32(32.0) },
        At::Declarations,
    )
}

// ---------------------------------------------------------------------------
// LoopVariable
// ---------------------------------------------------------------------------

fn float_loop_variable() -> ValidationError {
    let mut k = KernelBuilder::new("k");
    let line = line!() + 1;
    k.for_range("t", 0.0f32, 1.0f32, 0.25f32, |_, _| {});
    rejects(&built(k), K::LoopVariable { var: "t".into(), ty: Type::F32 }, At::Built("body[0]", line))
}

fn vector_loop_variable() -> ValidationError {
    let kernel = parsed(
        "kernel k(n: u32) {
            var i: u32x2
            if (n > 0u32) {
            } else {
                for i in (u32x2(0u32), u32x2(4u32), u32x2(1u32)) {
                }
            }
        }",
    );
    rejects(&kernel, K::LoopVariable { var: "i".into(), ty: vec_ty(Scalar::U32, 2) }, At::Path("body[0].else[0]"))
}

// ---------------------------------------------------------------------------
// SIMD-group matrices
// ---------------------------------------------------------------------------

fn mat(elem: Scalar, rows: u8, cols: u8) -> Type {
    Type::Matrix(enigma_ir::MatrixType::new(elem, rows, cols))
}

fn matrix_of_twelve_rows() -> ValidationError {
    let k = parsed("kernel k(out: device f32 read_write) {\n    var m: mat12x8_f32\n    out[0u32] = 1f32\n}");
    rejects(&k, K::MatrixShape { ty: mat(Scalar::F32, 12, 8) }, At::Declarations)
}

fn matrix_of_integers() -> ValidationError {
    let k = parsed("kernel k(out: device f32 read_write) {\n    var m: mat8x8_i32\n    out[0u32] = 1f32\n}");
    rejects(&k, K::MatrixShape { ty: mat(Scalar::I32, 8, 8) }, At::Declarations)
}

fn buffer_of_matrices() -> ValidationError {
    let k = parsed("kernel k(a: device mat8x8_f16 read, out: device f32 read_write) {\n    out[0u32] = 1f32\n}");
    rejects(&k, K::MatrixPlace { what: "parameter `a`".into(), ty: mat(Scalar::F16, 8, 8) }, At::Declarations)
}

fn matrix_product_of_mismatched_sides() -> ValidationError {
    let k = parsed(
        "kernel k(a: device f16 read, out: device f16 read_write) {\n    var x: mat8x16_f16\n    var y: mat8x8_f16\n    \
         x = simdgroup_load<mat8x16_f16>(a, 0u32, 16u32)\n    y = simdgroup_load<mat8x8_f16>(a, 0u32, 8u32)\n    \
         simdgroup_store(simdgroup_multiply(x, y), out, 0u32, 8u32)\n}",
    );
    let problem = "mat8x16_f16 times mat8x8_f16: the inner sides and the element types must match".to_string();
    rejects(&k, K::MatrixOperands { op: "simdgroup_multiply", problem }, At::Path("body[2]"))
}

fn matrix_store_into_memory_of_another_type() -> ValidationError {
    let k = parsed("kernel k(out: device f32 read_write) {\n    simdgroup_store(simdgroup_fill<mat8x8_f16>(1f16), out, 0u32, 8u32)\n}");
    let problem = "`out` holds f32; a mat8x8_f16 tile needs f16 elements".to_string();
    rejects(&k, K::MatrixOperands { op: "simdgroup_store", problem }, At::Path("body[0]"))
}

fn print_with_a_value_too_few() -> ValidationError {
    let mut k = KernelBuilder::new("k");
    let line = line!() + 1;
    k.print("{} and {}", &[thread_position_in_grid().x()]);
    let problem = "the format has 2 placeholder(s) `{}` but 1 value(s) are given".to_string();
    rejects(&built(k), K::PrintFormat { format: "{} and {}".into(), problem }, At::Built("body[0]", line))
}

fn print_of_a_vector() -> ValidationError {
    let k = parsed("kernel k() {\n    print(\"at {}\", thread_position_in_grid)\n}");
    let problem = "value 0 is u32x3; print takes scalars (print a vector's components, `v.x`, one by one)".to_string();
    rejects(&k, K::PrintFormat { format: "at {}".into(), problem }, At::Path("body[0]"))
}

fn print_with_a_lone_brace() -> ValidationError {
    let k = parsed("kernel k() {\n    print(\"{x}\")\n}");
    let problem = "`{` at byte 0 is neither `{}`, `{{` nor `}}` (write `{{` or `}}` for a brace)".to_string();
    rejects(&k, K::PrintFormat { format: "{x}".into(), problem }, At::Path("body[0]"))
}

fn unrolled_loop_to_a_runtime_bound() -> ValidationError {
    let mut k = KernelBuilder::new("k");
    let n = k.value("n", Type::U32);
    let out = k.buffer("out", Type::U32, Access::ReadWrite);
    let line = line!() + 1;
    k.for_unrolled("i", 0u32, n, 1u32, |k, i| k.store(out.at(i), i));
    let problem = "its end must be a constant integer, and this one is computed at run time".to_string();
    let err = rejects(&built(k), K::UnrollBound { var: "i".into(), problem }, At::Built("body[0]", line));
    assert!(err.to_string().contains("write an ordinary loop (range)"), "{err}");
    err
}

fn unrolled_loop_of_too_many_trips() -> ValidationError {
    let mut k = KernelBuilder::new("k");
    let out = k.buffer("out", Type::U32, Access::ReadWrite);
    k.for_unrolled("i", 0u32, 2048u32, 2u32, |k, i| k.store(out.at(i), i));
    assert!(validate(&built(k), &ValidationOptions::default()).is_ok(), "1024 trips are allowed");
    let mut k = KernelBuilder::new("k");
    let out = k.buffer("out", Type::U32, Access::ReadWrite);
    let line = line!() + 1;
    k.for_unrolled("i", 0u32, 1025u32, 1u32, |k, i| k.store(out.at(i), i));
    let problem = "it may run at most 1024 times, and this one runs 1025".to_string();
    rejects(&built(k), K::UnrollBound { var: "i".into(), problem }, At::Built("body[0]", line))
}

/// `iy < H` with `iy = -1`: C compares as unsigned, so it would be false.
fn comparing_a_signed_with_an_unsigned_index() -> ValidationError {
    let mut k = KernelBuilder::new("k");
    let h = k.value("H", Type::U32);
    let out = k.buffer("out", Type::U32, Access::ReadWrite);
    let iy = k.let_("iy", thread_position_in_grid().y().cast(Type::I32) - 1i32);
    let line = line!() + 1;
    k.if_(iy.lt(h), |k| k.store(out.at(0u32), 1u32));
    let err = rejects(&built(k), K::MixedSignComparison { op: "<", lhs: Type::I32, rhs: Type::U32 }, At::Built("body[1]", line));
    assert!(err.to_string().contains("Convert one side explicitly"), "{err}");
    err
}

fn comparing_signed_with_unsigned_vectors() -> ValidationError {
    let k = parsed("kernel k(a: i32x2, b: u32x2, out: device bool read_write) {\n    out[0u32] = (a == b).x\n}");
    rejects(&k, K::MixedSignComparison { op: "==", lhs: vec_ty(Scalar::I32, 2), rhs: vec_ty(Scalar::U32, 2) }, At::Path("body[0]"))
}

fn atomic_on_a_thread_array() -> ValidationError {
    let mut k = KernelBuilder::new("k");
    let acc = k.thread_array("acc", Type::U32, 4);
    let line = line!() + 1;
    k.atomic(AtomicOp::Add, acc.at(0u32), 1u32);
    rejects(&built(k), K::ThreadArrayUse { array: "acc".into(), op: "an atomic operation" }, At::Built("body[0]", line))
}

fn matrix_load_from_a_thread_array() -> ValidationError {
    let k = parsed(
        "kernel k(out: device f32 read_write) {\n    thread t: f32[64]\n    var m: mat8x8_f32\n    \
         m = simdgroup_load<mat8x8_f32>(t, 0u32, 8u32)\n}",
    );
    rejects(&k, K::ThreadArrayUse { array: "t".into(), op: "simdgroup_load" }, At::Path("body[0]"))
}

fn matrix_store_into_a_thread_array() -> ValidationError {
    let k = parsed("kernel k(out: device f32 read_write) {\n    thread t: f32[64]\n    simdgroup_store(simdgroup_fill<mat8x8_f32>(1f32), t, 0u32, 8u32)\n}");
    rejects(&k, K::ThreadArrayUse { array: "t".into(), op: "simdgroup_store" }, At::Path("body[0]"))
}

fn matrix_fill_under_a_lane_dependent_if() -> ValidationError {
    let k = parsed(
        "kernel k(out: device f32 read_write) {\n    var m: mat8x8_f32\n    \
         if ((thread_index_in_simdgroup < 8u32)) {\n        m = simdgroup_fill<mat8x8_f32>(1f32)\n        \
         simdgroup_store(m, out, 0u32, 8u32)\n    }\n}",
    );
    rejects(&k, K::NonUniformMatrix { op: "make_filled_simdgroup_matrix", cause: THREAD_CAUSE.into() }, At::Path("body[0].then[0]"))
}

fn matrix_load_at_a_lane_dependent_offset() -> ValidationError {
    let k = parsed(
        "kernel k(a: device f32 read, out: device f32 read_write) {\n    \
         simdgroup_store(simdgroup_load<mat8x8_f32>(a, thread_index_in_simdgroup, 8u32), out, 0u32, 8u32)\n}",
    );
    let cause = "an offset or stride that differs between lanes (each lane's share is addressed by the operation itself)".to_string();
    rejects(&k, K::NonUniformMatrix { op: "simdgroup_load", cause }, At::Path("body[0]"))
}

fn quantized_load_into_an_f32_tile() -> ValidationError {
    let k = parsed(
        "kernel k(w: device u32 read, s: device f16 read, out: device f32 read_write) {\n    \
         simdgroup_store(simdgroup_load_int4<mat8x8_f32>(w, 0u32, 8u32, s, 0u32), out, 0u32, 8u32)\n}",
    );
    let problem = "int4 weights decode into f16 tiles, not mat8x8_f32".to_string();
    rejects(&k, K::MatrixOperands { op: "simdgroup_load_quantized", problem }, At::Path("body[0]"))
}

fn quantized_load_of_f16_words() -> ValidationError {
    let k = parsed(
        "kernel k(w: device f16 read, s: device f16 read, out: device f16 read_write) {\n    \
         simdgroup_store(simdgroup_load_fp4<mat8x8_f16>(w, 0u32, 8u32, s, 0u32), out, 0u32, 8u32)\n}",
    );
    let problem = "`w` holds f16; a quantized load reads packed u32 words (or vectors of them)".to_string();
    rejects(&k, K::MatrixOperands { op: "simdgroup_load_quantized", problem }, At::Path("body[0]"))
}

fn fragment_ordered_load_of_a_tile_smaller_than_its_unit() -> ValidationError {
    let k = parsed(
        "kernel k(w: device u32 read, s: device f16 read, out: device f16 read_write) {\n    \
         simdgroup_store(simdgroup_load_int4_fragments<mat32x16_f16>(w, 0u32, 128u32, s, 0u32), out, 0u32, 16u32)\n}",
    );
    let problem = "a mat32x16_f16 tile in the fragments layout needs rows a multiple of 64 and columns of 16".to_string();
    rejects(&k, K::MatrixOperands { op: "simdgroup_load_quantized", problem }, At::Path("body[0]"))
}

/// The unsigned code and MLX's columns are `cooperative_dequantize`'s (the
/// text form has no name for such a tile load: it comes from JSON).
fn quantized_load_of_mlx_affine_codes() -> ValidationError {
    let k = parsed(
        "kernel k(w: device u32 read, s: device f16 read, out: device f16 read_write) {\n    \
         simdgroup_store(simdgroup_load_int4<mat8x8_f16>(w, 0u32, 8u32, s, 0u32), out, 0u32, 8u32)\n}",
    );
    let json = enigma_ir::to_json(&k);
    assert!(json.contains("\"code\":\"int4\""), "{json}");
    let k = enigma_ir::from_json(&json.replace("\"code\":\"int4\"", "\"code\":\"uint4\"")).unwrap();
    let problem = "takes int4 or fp4 codes in the rows or fragments layout, not uint4 in rows (those are cooperative_dequantize's, with its biases)".to_string();
    rejects(&k, K::MatrixOperands { op: "simdgroup_load_quantized", problem }, At::Path("body[0]"))
}

fn quantized_load_at_a_lane_dependent_scale_offset() -> ValidationError {
    let k = parsed(
        "kernel k(w: device u32 read, s: device f16 read, out: device f16 read_write) {\n    \
         simdgroup_store(simdgroup_load_int4<mat8x8_f16>(w, 0u32, 8u32, s, thread_index_in_simdgroup), out, 0u32, 8u32)\n}",
    );
    let cause = "an offset or stride that differs between lanes (each lane's share is addressed by the operation itself)".to_string();
    rejects(&k, K::NonUniformMatrix { op: "simdgroup_load_quantized", cause }, At::Path("body[0]"))
}

fn loop_with_a_constant_zero_step() -> ValidationError {
    let k = parsed("kernel k(out: device u32 read_write) {\n    var i: u32\n    for i in (0u32, 4u32, 0u32) {\n        out[i] = i\n    }\n}");
    rejects(&k, K::LoopStep { var: "i".into() }, At::Path("body[0]"))
}

fn thirty_two_buffers() -> ValidationError {
    let mut k = KernelBuilder::new("k");
    let bufs: Vec<_> = (0..32).map(|i| k.buffer(&format!("b{i}"), Type::F32, Access::ReadWrite)).collect();
    k.store(bufs[31].at(0u32), 1.0f32);
    rejects(&built(k), K::TooManyParameters { count: 32, limit: 31 }, At::Declarations)
}

#[test]
fn thirty_one_buffers_are_accepted() {
    let mut k = KernelBuilder::new("k");
    let bufs: Vec<_> = (0..31).map(|i| k.buffer(&format!("b{i}"), Type::F32, Access::ReadWrite)).collect();
    k.store(bufs[30].at(0u32), 1.0f32);
    validate(&built(k), &ValidationOptions::default()).unwrap();
}

fn matrix_filled_with_a_lane_dependent_value() -> ValidationError {
    let k = parsed(
        "kernel k(out: device f32 read_write) {\n    \
         simdgroup_store(simdgroup_fill<mat8x8_f32>(cast<f32>(thread_index_in_simdgroup)), out, 0u32, 8u32)\n}",
    );
    let cause = "a fill value that differs between lanes (the matrix is one value of the whole SIMD group)".to_string();
    rejects(&k, K::NonUniformMatrix { op: "make_filled_simdgroup_matrix", cause }, At::Path("body[0]"))
}

// ---------------------------------------------------------------------------
// Cooperative, NonUniformCooperative
// ---------------------------------------------------------------------------

/// A text-form kernel around a 64×64 f32 accumulator of 4 SIMD groups,
/// `body` its statements.
fn gemm_tile(extra_decls: &str, body: &str) -> Kernel {
    parsed(&format!(
        "kernel k(A: device f16 read, B: device f16 read, C: device f32 read_write, K: u32) {{\n    \
         cooperative c: cooperative_tensor<f32, 64, 64, simdgroups(4)>\n{extra_decls}{body}\n}}"
    ))
}

const RUN: &str = "matmul2d(matmul2d_descriptor(64, 64, dynamic_extent, false, false, false, multiply), simdgroups(4), \
                   tensor(A, 0u32, K, 64u32, 1u32, K), tensor(B, 0u32, 64u32, K, 1u32, 64u32), c)";

fn matmul2d_destination_of_another_shape() -> ValidationError {
    let k = gemm_tile("", &RUN.replace("matmul2d_descriptor(64, 64", "matmul2d_descriptor(64, 32"));
    let problem = "the destination `c` is cooperative_tensor<f32, 64, 64, simdgroups(4)> but the descriptor and scope make a \
                   cooperative_tensor<f32, 64, 32, simdgroups(4)>"
        .to_string();
    rejects(&k, K::Cooperative { op: "matmul2d", problem }, At::Path("body[0]"))
}

fn matmul2d_of_f32_into_f16() -> ValidationError {
    let k = parsed(&format!(
        "kernel k(A: device f32 read, B: device f32 read, K: u32) {{\n    cooperative c: cooperative_tensor<f16, 64, 64, simdgroups(4)>\n    {RUN}\n}}"
    ));
    let problem = "f32 by f32 operands cannot accumulate into f16 (into f32, or into the inputs' type when both are f16 or both bf16)".to_string();
    rejects(&k, K::Cooperative { op: "matmul2d", problem }, At::Path("body[0]"))
}

fn matmul2d_descriptor_side_not_a_multiple_of_8() -> ValidationError {
    let k = gemm_tile("", &RUN.replace("dynamic_extent", "20"));
    let problem = "the descriptor's k is 20; it must be a multiple of 8 from 8 to 256".to_string();
    rejects(&k, K::Cooperative { op: "matmul2d", problem }, At::Path("body[0]"))
}

fn two_threadgroup_scopes_of_different_sizes() -> ValidationError {
    let k = gemm_tile(
        "    cooperative d: cooperative_tensor<f32, 64, 64, simdgroups(2)>\n",
        &format!("    {RUN}\n    cooperative_store(d, tensor(C, 0u32, 64u32, 64u32, 1u32, 64u32))"),
    );
    let problem = "execution_simdgroups(2) here, execution_simdgroups(4) elsewhere; a threadgroup has one SIMD-group count".to_string();
    rejects(&k, K::Cooperative { op: "cooperative_tensor.store", problem }, At::Path("body[1]"))
}

fn cooperative_slot_index_of_i32() -> ValidationError {
    let k = gemm_tile("    var x: f32\n", "    x = c[0i32]");
    rejects(&k, K::Cooperative { op: "cooperative_tensor[]", problem: "a slot index must be u32, found i32".into() }, At::Path("body[0]"))
}

fn matmul2d_under_a_simdgroup_dependent_if() -> ValidationError {
    let k = gemm_tile("", &format!("    if (simdgroup_index_in_threadgroup < 2u32) {{\n        {RUN}\n    }}"));
    let cause = "it sits in control flow that depends on a value that differs between SIMD groups".to_string();
    rejects(&k, K::NonUniformCooperative { op: "matmul2d", scope: ExecutionScope::Simdgroups(4), cause }, At::Path("body[0].then[0]"))
}

fn cooperative_store_to_a_lane_dependent_view() -> ValidationError {
    let k = gemm_tile("", "    cooperative_store(c, tensor(C, thread_index_in_simdgroup, 64u32, 64u32, 1u32, 64u32))");
    let cause = "a view's offset, extent or stride differs between its threads".to_string();
    rejects(&k, K::NonUniformCooperative { op: "cooperative_tensor.store", scope: ExecutionScope::Simdgroups(4), cause }, At::Path("body[0]"))
}
