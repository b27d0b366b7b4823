//! The text form and the JSON form on hand-built kernels: every IR construct
//! prints, parses back to an equal kernel and prints identically; names that
//! need quotes, special floats, ids the kernel does not declare and source
//! locations survive; malformed text gives a typed error at the right line
//! and column.

use enigma_ir::text::{self, parse, print};
use enigma_ir::{
    from_json, to_json, to_json_pretty, Access, AtomicOp, BarrierScope, BinaryOp, Builtin, Expr, Intrinsic, Kernel,
    Literal, LiteralValue, Local, MemFlags, Memory, Param, ParamId, ParamKind, ParseErrorKind, Precision, Scalar, SourceLoc,
    SpecConstant, SpecId, Stmt, StmtKind, TgArrayId, ThreadgroupArray, Type, UnaryOp, VarId,
};

fn lit(ty: Scalar, value: LiteralValue) -> Expr {
    Expr::Literal(Literal { ty, value })
}

fn var(i: u32) -> Expr {
    Expr::Var(VarId(i))
}

fn b(e: Expr) -> Box<Expr> {
    Box::new(e)
}

fn st(kind: StmtKind) -> Stmt {
    Stmt::new(kind)
}

fn at(kind: StmtKind, file: &str, line: u32) -> Stmt {
    Stmt { kind, loc: Some(SourceLoc { file: file.into(), line }) }
}

/// A kernel (not a valid one: the text form must not care) with every
/// statement kind, expression kind, operator, intrinsic, builtin, barrier
/// flag, scalar type and the literal spellings the grammar has.
fn every_construct() -> Kernel {
    let mut locals = vec![
        Local { name: "x".into(), ty: Type::F32 },
        Local { name: "i".into(), ty: Type::U32 },
        Local { name: "v".into(), ty: Type::vector(Scalar::F32, 4) },
        Local { name: "b".into(), ty: Type::BOOL },
    ];
    // Names that collide with keywords, types, builtins, atomics and special
    // floats, or are not identifiers at all.
    for name in ["if", "f32x4", "float", "thread_position_in_grid", "atomic_x", "inf_f32", "my var", "", "é\n\"q\"", "u8x0"] {
        locals.push(Local { name: name.into(), ty: Type::I32 });
    }
    // Plain names that happen to be intrinsic names or component letters.
    for name in ["min", "fast", "y", "nan", "inf"] {
        locals.push(Local { name: name.into(), ty: Type::U32 });
    }
    let mut body = vec![];
    // Every literal spelling.
    let mut lits = vec![
        lit(Scalar::Bool, LiteralValue::Bool(true)),
        lit(Scalar::Bool, LiteralValue::Bool(false)),
        lit(Scalar::I8, LiteralValue::Int(-128)),
        lit(Scalar::I16, LiteralValue::Int(32767)),
        lit(Scalar::I32, LiteralValue::Int(-3)),
        lit(Scalar::I64, LiteralValue::Int(i64::MIN)),
        lit(Scalar::U8, LiteralValue::UInt(255)),
        lit(Scalar::U16, LiteralValue::UInt(0)),
        lit(Scalar::U32, LiteralValue::UInt(u32::MAX as u64)),
        lit(Scalar::U64, LiteralValue::UInt(u64::MAX)),
        lit(Scalar::F16, LiteralValue::Float(1e-7)),
        lit(Scalar::BF16, LiteralValue::Float(-0.0)),
        lit(Scalar::F32, LiteralValue::Float(0.1)),
        lit(Scalar::F32, LiteralValue::Float(1e300)),
        lit(Scalar::F32, LiteralValue::Float(-2.5e-300)),
        lit(Scalar::F32, LiteralValue::Float(f64::MIN_POSITIVE / 4.0)),
        lit(Scalar::F32, LiteralValue::Float(f64::INFINITY)),
        lit(Scalar::F16, LiteralValue::Float(f64::NEG_INFINITY)),
        // Kinds that do not match the type (validation rejects them; text keeps them).
        lit(Scalar::U32, LiteralValue::Int(-3)),
        lit(Scalar::F32, LiteralValue::UInt(7)),
        lit(Scalar::I32, LiteralValue::Bool(true)),
        lit(Scalar::Bool, LiteralValue::Float(f64::NEG_INFINITY)),
        lit(Scalar::I32, LiteralValue::Float(-1.5)),
    ];
    // Every binary operator, unary operator and intrinsic, on literals and
    // variables; a negated literal and a negated extract of a literal (the
    // minus must not become the literal's sign).
    for op in BinaryOp::ALL {
        lits.push(Expr::Binary { op, lhs: b(var(0)), rhs: b(lit(Scalar::I32, LiteralValue::Int(-4))) });
    }
    for op in [UnaryOp::Neg, UnaryOp::BitNot, UnaryOp::Not] {
        lits.push(Expr::Unary { op, arg: b(var(1)) });
        lits.push(Expr::Unary { op, arg: b(lit(Scalar::I32, LiteralValue::Int(5))) });
        lits.push(Expr::Unary { op, arg: b(lit(Scalar::I32, LiteralValue::Int(-5))) });
    }
    lits.push(Expr::Unary {
        op: UnaryOp::Neg,
        arg: b(Expr::Extract { arg: b(lit(Scalar::F32, LiteralValue::Float(2.0))), index: 0 }),
    });
    lits.push(Expr::Unary { op: UnaryOp::Neg, arg: b(lit(Scalar::F32, LiteralValue::Float(f64::INFINITY))) });
    lits.push(Expr::Binary {
        op: BinaryOp::Sub,
        lhs: b(lit(Scalar::I32, LiteralValue::Int(-1))),
        rhs: b(lit(Scalar::I32, LiteralValue::Int(-2))),
    });
    for func in Intrinsic::ALL {
        let args = (0..func.arity()).map(|k| if k % 2 == 0 { var(0) } else { var(1) }).collect();
        lits.push(Expr::Call { func, precision: Precision::Default, args });
    }
    for func in Intrinsic::WITH_PRECISION_VARIANTS {
        for precision in [Precision::Fast, Precision::Precise] {
            let args = (0..func.arity()).map(|k| if k % 2 == 0 { var(0) } else { var(1) }).collect();
            lits.push(Expr::Call { func, precision, args });
        }
    }
    for builtin in Builtin::ALL {
        lits.push(Expr::Builtin(builtin));
    }
    for index in 0..6 {
        lits.push(Expr::Extract { arg: b(var(2)), index });
    }
    lits.push(Expr::Extract { arg: b(Expr::Extract { arg: b(Expr::Builtin(Builtin::ThreadPositionInGrid)), index: 1 }), index: 0 });
    lits.push(Expr::Extract { arg: b(lit(Scalar::I32, LiteralValue::Int(-7))), index: 2 });
    lits.push(Expr::Extract {
        arg: b(Expr::Binary { op: BinaryOp::Add, lhs: b(var(2)), rhs: b(var(0)) }),
        index: 3,
    });
    lits.push(Expr::Cast { to: Type::vector(Scalar::F16, 3), arg: b(var(2)) });
    lits.push(Expr::Bitcast { to: Type::U32, arg: b(var(0)) });
    lits.push(Expr::Vector { ty: Type::vector(Scalar::F32, 4), components: vec![var(0), var(0), var(0), var(0)] });
    lits.push(Expr::Vector { ty: Type::vector(Scalar::BF16, 2), components: vec![var(0)] });
    lits.push(Expr::Vector { ty: Type::vector(Scalar::U8, 0), components: vec![] });
    lits.push(Expr::Param(ParamId(2)));
    lits.push(Expr::Param(ParamId(99)));
    lits.push(Expr::Spec(SpecId(0)));
    lits.push(Expr::Spec(SpecId(5)));
    lits.push(Expr::Var(VarId(1234)));
    lits.push(Expr::Load { mem: Memory::Buffer(ParamId(0)), index: b(var(1)) });
    lits.push(Expr::Load { mem: Memory::Threadgroup(TgArrayId(0)), index: b(var(1)) });
    lits.push(Expr::Load { mem: Memory::Threadgroup(TgArrayId(9)), index: b(var(1)) });
    // A two-dimensional access: `A[i, j]` of a `[n, 4]` A.
    let checked = |dim, index, size| Expr::DimCheck { mem: Memory::Buffer(ParamId(0)), dim, index: b(index), size: b(size) };
    let four = lit(Scalar::U32, LiteralValue::UInt(4));
    let rows = Expr::Binary { op: BinaryOp::Mul, lhs: b(checked(0, var(1), Expr::Param(ParamId(2)))), rhs: b(four.clone()) };
    let flat = Expr::Binary { op: BinaryOp::Add, lhs: b(rows), rhs: b(checked(1, var(1), four)) };
    lits.push(Expr::Load { mem: Memory::Buffer(ParamId(0)), index: b(flat) });
    lits.push(Expr::DimCheck { mem: Memory::Threadgroup(TgArrayId(9)), dim: 255, index: b(var(0)), size: b(var(1)) });
    for (k, value) in lits.into_iter().enumerate() {
        let target = VarId((k % locals.len()) as u32);
        body.push(at(StmtKind::Assign { var: target, value }, "src/k.rs", k as u32 + 1));
    }
    // Every statement kind, with and without locations.
    body.push(st(StmtKind::Store { mem: Memory::Buffer(ParamId(1)), index: var(1), value: var(0) }));
    body.push(st(StmtKind::Store { mem: Memory::Threadgroup(TgArrayId(0)), index: var(1), value: var(0) }));
    for op in AtomicOp::ALL {
        for result in [None, Some(VarId(1))] {
            body.push(st(StmtKind::Atomic { op, mem: Memory::Buffer(ParamId(1)), index: var(1), value: var(1), result }));
        }
    }
    body.push(st(StmtKind::AtomicCompareExchange {
        mem: Memory::Threadgroup(TgArrayId(0)),
        index: var(1),
        expected: var(1),
        desired: lit(Scalar::U32, LiteralValue::UInt(3)),
        result: Some(VarId(1)),
    }));
    body.push(st(StmtKind::AtomicCompareExchange {
        mem: Memory::Buffer(ParamId(1)),
        index: var(1),
        expected: var(1),
        desired: var(1),
        result: None,
    }));
    for scope in [BarrierScope::Threadgroup, BarrierScope::Simdgroup] {
        for flags in [MemFlags::None, MemFlags::Threadgroup, MemFlags::Device, MemFlags::DeviceAndThreadgroup] {
            body.push(at(StmtKind::Barrier { scope, flags }, "with space/and:colon.py", 9));
        }
    }
    body.push(st(StmtKind::DeviceFence));
    let inner = vec![
        st(StmtKind::Break),
        at(StmtKind::Continue, " leading space", 1),
        at(StmtKind::Return, "tab\there", 2),
        at(StmtKind::Return, "", 3),
    ];
    body.push(at(
        StmtKind::If {
            cond: Expr::Binary { op: BinaryOp::Lt, lhs: b(var(1)), rhs: b(Expr::Param(ParamId(2))) },
            then_body: inner.clone(),
            else_body: vec![st(StmtKind::If { cond: var(3), then_body: vec![], else_body: inner.clone() })],
        },
        "k.rs",
        40,
    ));
    body.push(st(StmtKind::If { cond: var(3), then_body: vec![], else_body: vec![] }));
    body.push(at(
        StmtKind::For {
            var: VarId(1),
            start: lit(Scalar::U32, LiteralValue::UInt(0)),
            end: Expr::Spec(SpecId(0)),
            step: lit(Scalar::U32, LiteralValue::UInt(2)),
            body: vec![st(StmtKind::While { cond: var(3), body: inner })],
            unroll: false,
        },
        "\"quoted\"",
        41,
    ));
    Kernel {
        name: "every construct".into(),
        params: vec![
            Param { name: "A".into(), kind: ParamKind::Buffer { elem: Type::F32, access: Access::Read } },
            Param {
                name: "Out".into(),
                kind: ParamKind::Buffer { elem: Type::vector(Scalar::BF16, 3), access: Access::ReadWrite },
            },
            Param { name: "n".into(), kind: ParamKind::Value { ty: Type::U32 } },
            Param { name: "device".into(), kind: ParamKind::Value { ty: Type::vector(Scalar::I64, 2) } },
        ],
        spec_constants: vec![
            SpecConstant { name: "TILE".into(), ty: Scalar::U32, default: Literal::u32(32) },
            SpecConstant { name: "EPS".into(), ty: Scalar::F32, default: Literal::f32(1e-6) },
        ],
        threadgroup_arrays: vec![ThreadgroupArray { name: "scratch".into(), elem: Type::F32, len: 32 }],
        thread_arrays: vec![],
        locals,
        cooperative_tensors: vec![],
        body,
    }
}

/// Equality, failing with the first statement that differs rather than two
/// whole kernels.
fn assert_same(got: &Kernel, want: &Kernel) {
    for (i, (g, w)) in got.body.iter().zip(&want.body).enumerate() {
        assert_eq!(g, w, "body[{i}]");
    }
    assert_eq!(got, want);
}

/// print → parse gives `kernel` back, printing again gives the same text,
/// and the JSON forms (compact and pretty) read back equal.
fn assert_round_trips(kernel: &Kernel) -> String {
    let printed = print(kernel);
    let parsed = parse(&printed).unwrap_or_else(|e| panic!("{e}\n{printed}"));
    assert_same(&parsed, kernel);
    assert_eq!(print(&parsed), printed);
    assert_eq!(&from_json(&to_json(kernel)).unwrap(), kernel);
    assert_eq!(&from_json(&to_json_pretty(kernel)).unwrap(), kernel);
    printed
}

#[test]
fn every_construct_round_trips_through_text_and_json() {
    let kernel = every_construct();
    let printed = assert_round_trips(&kernel);
    // The spellings the grammar promises.
    for needle in [
        "kernel \"every construct\"(A: device f32 read, Out: device bf16x3 read_write, n: u32, \"device\": i64x2) {",
        "    spec EPS: f32 = 9.999999974752427e-7f32",
        "    threadgroup scratch: f32[32]",
        "    var \"my var\": i32",
        "    var \"\": i32",
        "    var \"é\\n\\\"q\\\"\": i32",
        "    var min: u32",
        "= (- 5i32)",
        "= (- -5i32)",
        "= (- 2.0f32.x)",
        "= (- inf_f32)",
        "= (-1i32 - -2i32)",
        "= -inf_f16",
        "= lit<u32>(int -3)",
        "= lit<bool>(float -inf)",
        "= $param(99)",
        "= $spec(5)",
        "= $local(1234)",
        "= $tg(9)[i]",
        "= v.4",
        "= thread_position_in_grid.y.x",
        "= cast<f16x3>(v)",
        "= bitcast<u32>(x)",
        "= bf16x2(x)",
        "= u8x0()",
        "= fast::pow(x, i)",
        "= precise::atan2(x, i)",
        "= fast::saturate(x)",
        "= simd_is_first()",
        "i = atomic_fetch_add(Out[i], i)",
        "    atomic_sub(Out[i], i)\n",
        "i = atomic_exchange(Out[i], i)",
        "i = atomic_compare_exchange(scratch[i], i, 3u32)",
        "threadgroup_barrier(mem_device_and_threadgroup)  // with space/and:colon.py:9",
        "simdgroup_barrier(mem_none)",
        "    if (i < n) {  // k.rs:40\n",
        "    } else {\n",
        "        continue  // \" leading space\":1\n",
        "        return  // \"tab\\there\":2\n",
        "        return  // :3\n",
        "    for i in (0u32, TILE, 2u32) {  // \"\\\"quoted\\\"\":41\n",
        "        while (b) {\n",
    ] {
        assert!(printed.contains(needle), "missing {needle:?} in\n{printed}");
    }
}

#[test]
fn nan_literals_keep_their_bits() {
    let payload = f64::from_bits(0x7ff8_0000_0000_0001);
    let neg = f64::from_bits(0xfff8_0000_0000_0000);
    let mut kernel = every_construct();
    kernel.body.truncate(0);
    for (k, f) in [f64::NAN, payload, neg].into_iter().enumerate() {
        kernel.body.push(st(StmtKind::Assign { var: VarId(k as u32), value: lit(Scalar::F32, LiteralValue::Float(f)) }));
        kernel.body.push(st(StmtKind::Assign { var: VarId(k as u32), value: lit(Scalar::U32, LiteralValue::Float(f)) }));
    }
    // NaN != NaN, so compare bits.
    let bits = |k: &Kernel| -> Vec<u64> {
        k.body
            .iter()
            .map(|s| match &s.kind {
                StmtKind::Assign { value: Expr::Literal(Literal { value: LiteralValue::Float(f), .. }), .. } => f.to_bits(),
                other => panic!("{other:?}"),
            })
            .collect()
    };
    let printed = print(&kernel);
    assert!(printed.contains("x = nan_f32\n"), "{printed}");
    assert!(printed.contains("i = nan_f32(0x7ff8000000000001)\n"), "{printed}");
    assert!(printed.contains("v = lit<u32>(float nan(0xfff8000000000000))\n"), "{printed}");
    let parsed = parse(&printed).unwrap();
    assert_eq!(bits(&parsed), bits(&kernel));
    assert_eq!(print(&parsed), printed);
    let json = to_json(&kernel);
    assert!(json.contains("\"nan\"") && json.contains("\"nan:0x7ff8000000000001\""), "{json}");
    assert_eq!(bits(&from_json(&json).unwrap()), bits(&kernel));
}

#[test]
fn the_parser_accepts_the_documented_conveniences() {
    let text = "
        kernel k(A: device float read, Out: device f32 read_write, n: uint,) {
            var t: u32; var s: f32
            t = thread_position_in_grid.0
            if (t >= n) { return }
            s = A[t + 1u32] * 2.0f32   // a comment that is not a location
            if (s < 0.0f32) { s = 0.0f32 } else if (s > 1.0f32) { s = 1.0f32 }
            Out[t] = s
            threadgroup_barrier(mem_device | mem_threadgroup)
        }";
    let k = parse(text).unwrap();
    assert_eq!(k.params[0].kind, ParamKind::Buffer { elem: Type::F32, access: Access::Read });
    assert_eq!(k.params[2].kind, ParamKind::Value { ty: Type::U32 });
    assert_eq!(k.body.len(), 6);
    assert_eq!(k.body[0].kind, StmtKind::Assign {
        var: VarId(0),
        value: Expr::Extract { arg: b(Expr::Builtin(Builtin::ThreadPositionInGrid)), index: 0 },
    });
    assert_eq!(k.body[2].loc, None);
    match &k.body[2].kind {
        StmtKind::Assign { value: Expr::Binary { op: BinaryOp::Mul, lhs, .. }, .. } => match &**lhs {
            Expr::Load { index, .. } => {
                assert!(matches!(**index, Expr::Binary { op: BinaryOp::Add, .. }), "{index:?}")
            }
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    }
    // `else if` is an `if` alone in the else block.
    match &k.body[3].kind {
        StmtKind::If { else_body, .. } => {
            assert_eq!(else_body.len(), 1);
            assert!(matches!(else_body[0].kind, StmtKind::If { .. }));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(k.body[5].kind, StmtKind::Barrier { scope: BarrierScope::Threadgroup, flags: MemFlags::DeviceAndThreadgroup });
    // `Display` and `FromStr` are print and parse.
    assert_eq!(k.to_string().parse::<Kernel>().unwrap(), k);
}

/// The error for `text`: its line, column and kind.
fn error(text: &str) -> (u32, u32, ParseErrorKind) {
    match parse(text) {
        Ok(k) => panic!("parsed: {}", print(&k)),
        Err(e) => (e.line, e.column, e.kind),
    }
}

fn expected(e: &ParseErrorKind) -> (&str, &str) {
    match e {
        ParseErrorKind::Expected { expected, found } => (expected, found),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_missing_closing_brace_is_reported_at_the_end() {
    let (line, col, kind) = error("kernel k(n: u32) {\n    var x: u32\n    x = n\n");
    assert_eq!((line, col), (4, 1));
    assert_eq!(expected(&kind), ("a statement or `}`", "the end of the text"));
}

#[test]
fn an_undeclared_name_is_named_where_it_is_used() {
    let text = "kernel k(n: u32) {\n    var x: u32\n    x = (n + y)\n}\n";
    let err = parse(text).unwrap_err();
    assert_eq!((err.line, err.column), (3, 14));
    assert_eq!(err.kind, ParseErrorKind::UnknownName { name: "y".into() });
    assert_eq!(err.kernel.as_deref(), Some("k"));
    assert_eq!(
        err.to_string(),
        "kernel `k`, line 3, column 14: `y` is not declared: no parameter, spec constant, threadgroup array, per-thread array or local has that name, and no builtin"
    );
}

#[test]
fn a_misspelt_builtin_or_function_gets_a_suggestion() {
    let (line, col, kind) = error("kernel k() {\n    var x: u32\n    x = thread_index_in_simd_group\n}");
    assert_eq!((line, col), (3, 9));
    assert_eq!(kind, ParseErrorKind::UnknownBuiltin {
        name: "thread_index_in_simd_group".into(),
        suggestion: Some("thread_index_in_simdgroup"),
    });
    let (_, col, kind) = error("kernel k() {\n    var x: f32\n    x = simd_summ(x)\n}");
    assert_eq!(col, 9);
    assert_eq!(kind, ParseErrorKind::UnknownFunction { name: "simd_summ".into(), suggestion: Some("simd_sum") });
    let (_, _, kind) = error("kernel k(A: device u32 read_write) {\n    atomic_ad(A[0u32], 1u32)\n}");
    assert_eq!(kind, ParseErrorKind::UnknownFunction { name: "atomic_ad".into(), suggestion: Some("atomic_add") });
}

#[test]
fn literals_need_a_valid_type_and_value() {
    let (line, col, kind) = error("kernel k() {\n    var x: u32\n    x = 3\n}");
    assert_eq!((line, col), (3, 9));
    assert!(matches!(kind, ParseErrorKind::InvalidLiteral { ref text, .. } if text == "3"), "{kind:?}");
    let (_, _, kind) = error("kernel k() {\n    var x: u32\n    x = -3u32\n}");
    assert_eq!(kind, ParseErrorKind::InvalidLiteral { text: "-3u32".into(), reason: "an unsigned literal cannot be negative".into() });
    let (_, _, kind) = error("kernel k() {\n    var x: i8\n    x = 99999999999999999999i64\n}");
    assert_eq!(kind, ParseErrorKind::InvalidLiteral { text: "99999999999999999999i64".into(), reason: "does not fit in 64 bits".into() });
    let (_, _, kind) = error("kernel k() {\n    var x: u32\n    x = 1.5u32\n}");
    assert_eq!(kind, ParseErrorKind::InvalidLiteral { text: "1.5u32".into(), reason: "an integer literal has no fraction or exponent".into() });
    let (_, _, kind) = error("kernel k() {\n    var x: u32\n    x = 1q7\n}");
    assert_eq!(kind, ParseErrorKind::InvalidLiteral { text: "1q7".into(), reason: "unknown type suffix `q7`".into() });
}

#[test]
fn operators_do_not_chain_without_parentheses() {
    let (line, col, kind) = error("kernel k(n: u32) {\n    var x: u32\n    x = n + n * n\n}");
    assert_eq!((line, col), (3, 15));
    let (exp, found) = expected(&kind);
    assert!(exp.contains("operators do not chain"), "{exp}");
    assert_eq!(found, "`*`");
}

#[test]
fn names_are_used_as_what_they_are() {
    let (line, col, kind) = error("kernel k(A: device f32 read, n: u32) {\n    n = 1u32\n}");
    assert_eq!((line, col), (2, 5));
    assert_eq!(kind, ParseErrorKind::WrongKind { name: "n".into(), what: "parameter", expected: "only locals can be assigned" });
    // A buffer used as a value reads as the parameter (validation rejects
    // it with a type error); a threadgroup array cannot be a value at all.
    let k = parse("kernel k(A: device f32 read) {\n    var x: f32\n    x = A\n}").unwrap();
    assert_eq!(k.body[0].kind, StmtKind::Assign { var: VarId(0), value: Expr::Param(ParamId(0)) });
    let text = "kernel k() {\n    threadgroup s: f32[4]\n    var x: f32\n    x = s\n}";
    let (line, col, kind) = error(text);
    assert_eq!((line, col), (4, 9));
    assert!(matches!(kind, ParseErrorKind::WrongKind { what: "threadgroup array", .. }), "{kind:?}");
}

#[test]
fn declarations_are_unique_and_come_first() {
    let (line, col, kind) = error("kernel k(n: u32) {\n    var n: u32\n}");
    assert_eq!((line, col), (2, 9));
    assert_eq!(kind, ParseErrorKind::DuplicateName { name: "n".into() });
    let (line, _, kind) = error("kernel k() {\n    var x: u32\n    x = 1u32\n    var y: u32\n}");
    assert_eq!(line, 4);
    assert_eq!(expected(&kind).1, "the declaration `var`");
    let (line, col, kind) = error("kernel k() {\n    var x: f33\n}");
    assert_eq!((line, col), (2, 12));
    assert_eq!(kind, ParseErrorKind::UnknownType { name: "f33".into() });
}

#[test]
fn bad_characters_strings_and_trailing_text() {
    let (line, col, kind) = error("kernel k() {\n    @\n}");
    assert_eq!((line, col, kind), (2, 5, ParseErrorKind::UnexpectedCharacter { ch: '@' }));
    let (line, col, kind) = error("kernel \"unterminated() {}");
    assert_eq!((line, col), (1, 8));
    assert_eq!(kind, ParseErrorKind::InvalidString { reason: "missing closing quote" });
    let (line, col, kind) = error("kernel k() {}\nkernel j() {}");
    assert_eq!((line, col), (2, 1));
    assert_eq!(expected(&kind).1, "`kernel`");
    let (line, col, kind) = error("");
    assert_eq!((line, col), (1, 1));
    assert_eq!(expected(&kind), ("`kernel`", "the end of the text"));
}

#[test]
fn nesting_is_limited_instead_of_overflowing_the_stack() {
    let deep = format!("kernel k() {{\n    var x: u32\n    x = {}1u32{}\n}}", "(".repeat(100_000), ")".repeat(100_000));
    let (line, _, kind) = error(&deep);
    assert_eq!(line, 3);
    assert_eq!(kind, ParseErrorKind::TooDeep { limit: text::MAX_NESTING });
    let blocks = format!("kernel k() {{\n{}{}}}", "if (true) {\n".repeat(10_000), "}\n".repeat(10_000));
    assert_eq!(error(&blocks).2, ParseErrorKind::TooDeep { limit: text::MAX_NESTING });
    let negations = format!("kernel k() {{\n    var x: bool\n    x = {}true\n}}", "!".repeat(10_000));
    assert_eq!(error(&negations).2, ParseErrorKind::TooDeep { limit: text::MAX_NESTING });
}

#[test]
fn json_errors_carry_the_position() {
    let err = from_json("{\"schema\": 2, \"name\": \"k\",\n \"params\": 3}").unwrap_err();
    assert_eq!(err.line, 2);
    assert!(err.message.contains("invalid type: integer `3`"), "{}", err.message);
    let err = from_json(&to_json(&every_construct()).replace("\"simd_sum\"", "\"simd_summ\"")).unwrap_err();
    assert_eq!(err.line, 1);
    assert!(err.message.contains("unknown variant `simd_summ`"), "{}", err.message);
}

#[test]
fn json_carries_its_schema_version_and_types_by_name() {
    let json = to_json(&every_construct());
    assert!(json.starts_with(&format!("{{\"schema\":{}", enigma_ir::JSON_SCHEMA)), "{json}");
    assert!(json.contains("\"elem\":\"f32\""), "{json}");
    let old = json.replacen(&format!("\"schema\":{},", enigma_ir::JSON_SCHEMA), "\"schema\":1,", 1);
    let err = from_json(&old).unwrap_err();
    assert!(err.message.contains(&format!("schema 1; this enigma reads IR JSON schema {} (and 2, 3)", enigma_ir::JSON_SCHEMA)), "{}", err.message);
    let none = json.replacen(&format!("\"schema\":{},", enigma_ir::JSON_SCHEMA), "", 1);
    assert!(from_json(&none).unwrap_err().message.contains("no \"schema\" field"));
}

/// Schemas 2 and 3 named the `fast::` and `precise::` variants as functions
/// of their own; they read as schema 4's function and precision.
#[test]
fn json_of_schema_3_reads_fast_and_precise_functions() {
    let kernel = every_construct();
    let json = to_json(&kernel);
    assert!(json.contains("{\"call\":{\"func\":\"pow\",\"precision\":\"fast\","), "{json}");
    let v3 = json
        .replacen(&format!("\"schema\":{},", enigma_ir::JSON_SCHEMA), "\"schema\":3,", 1)
        .replace("\"func\":\"pow\",\"precision\":\"fast\"", "\"func\":\"fast_pow\"")
        .replace("\"func\":\"sin\",\"precision\":\"precise\"", "\"func\":\"precise_sin\"");
    assert!(v3.contains("\"fast_pow\"") && v3.contains("\"precise_sin\""), "{v3}");
    assert_eq!(from_json(&v3).unwrap(), kernel);
    // Schema 4 has no function of that name.
    let err = from_json(&json.replace("\"func\":\"pow\",\"precision\":\"fast\"", "\"func\":\"fast_pow\"")).unwrap_err();
    assert!(err.message.contains("unknown variant `fast_pow`"), "{}", err.message);
}

#[test]
fn matrix_constructs_print_and_parse_back() {
    use enigma_ir::builder::*;
    use enigma_ir::{Access, MatrixType, Scalar, Type};
    let (h, f) = (MatrixType::new(Scalar::F16, 16, 8), MatrixType::new(Scalar::F32, 16, 16));
    let ht = MatrixType::new(Scalar::F16, 8, 16);
    let mut k = KernelBuilder::new("m");
    let a = k.buffer("a", Type::F16, Access::Read);
    let out = k.buffer("out", Type::F32, Access::ReadWrite);
    let ma = k.let_("ma", matrix_load(h, a, 0u32, 8u32, false));
    let mb = k.let_("mb", matrix_load(ht, a, 4u32, 8u32, true));
    let acc = k.var("acc", matrix_diagonal(f, 1.0f32));
    k.assign(acc, matrix_multiply_accumulate(ma, mb, acc));
    let _sq = k.let_("sq", matrix_multiply(ma, matrix_fill(ht, lit(Scalar::F16, 0.5))));
    k.matrix_store(acc, out, 0u32, 16u32, true);
    k.store(out.at(matrix_coord(f, 3, false) * 16u32 + matrix_coord(f, 3, true)), thread_element(acc, 3));
    let words = k.buffer("words", Type::vector(Scalar::U32, 4), Access::Read);
    let scales = k.buffer("scales", Type::F16, Access::Read);
    for code in enigma_ir::QuantCode::TILE {
        let q = matrix_load_quantized(MatrixType::new(Scalar::F16, 8, 16), code, enigma_ir::QuantLayout::Rows, words, 4u32, 32u32, scales, 16u32);
        k.assign(acc, matrix_multiply_accumulate(ma, q, acc));
    }
    let wide = k.let_("wide", matrix_load(MatrixType::new(Scalar::F16, 16, 64), a, 0u32, 64u32, false));
    let fragments = matrix_load_quantized(MatrixType::new(Scalar::F16, 64, 16), enigma_ir::QuantCode::Int4, enigma_ir::QuantLayout::Fragments, words, 0u32, 512u32, scales, 0u32);
    let _wide_product = k.let_("wide_product", matrix_multiply(wide, fragments));
    let kernel = k.finish().unwrap();
    let text = enigma_ir::text::print(&kernel);
    assert!(text.contains("simdgroup_load_transposed<mat8x16_f16>(a, 4u32, 8u32)"), "{text}");
    assert!(text.contains("simdgroup_load_fp4<mat8x16_f16>(words, 4u32, 32u32, scales, 16u32)"), "{text}");
    assert!(text.contains("simdgroup_load_int4_fragments<mat64x16_f16>(words, 0u32, 512u32, scales, 0u32)"), "{text}");
    let back = enigma_ir::text::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(enigma_ir::text::print(&back), text);
    let json = enigma_ir::to_json(&kernel);
    assert_eq!(enigma_ir::from_json(&json).unwrap(), kernel);
    // Schema 2 gave quantized loads no layout: they read as seed 002's rows.
    let v2 = json.replacen(&format!("\"schema\":{},", enigma_ir::JSON_SCHEMA), "\"schema\":2,", 1).replace("\"layout\":\"rows\",", "");
    assert!(v2.starts_with("{\"schema\":2,") && !v2.contains("\"rows\""), "{v2}");
    assert_eq!(enigma_ir::from_json(&v2).unwrap(), kernel);
}

#[test]
fn tile_copies_print_and_parse_back() {
    use enigma_ir::builder::*;
    let mut k = KernelBuilder::new("tiles");
    let src = k.buffer("src", Type::F16, Access::Read);
    let rows = k.value("rows", Type::U32);
    let cols = k.value("cols", Type::U32);
    let stage = k.threadgroup_array("stage", Type::F16, 1024);
    let row = k.let_("row", (threadgroup_position_in_grid().x() * 8u32).cast(Scalar::I32));
    k.tile_copy(3u32, stage.at(512u32), TileSource { mem: src, extents: [rows, cols], pitch: cols + 8u32 }, [row, Ex::from(0i32)], (8, 64));
    k.tile_wait(3u32);
    let kernel = k.finish().unwrap();
    enigma_ir::validate(&kernel, &Default::default()).unwrap();
    let text = assert_round_trips(&kernel);
    for spelling in ["tile_copy(3u32, stage[512u32], src, rows, cols, (cols + 8u32), row, 0i32, 8, 64)", "tile_wait(3u32)"] {
        assert!(text.contains(spelling), "`{spelling}` in\n{text}");
    }
    let json = to_json(&kernel);
    assert!(json.contains(r#""tile_copy":{"barrier""#) && json.contains(r#""rows":8,"cols":64"#), "{json}");
}

#[test]
fn async_copies_print_and_parse_back() {
    use enigma_ir::builder::*;
    let mut k = KernelBuilder::new("copies");
    let src = k.buffer("src", Type::vector(Scalar::F16, 4), Access::Read);
    let n = k.value("n", Type::U32);
    let stage = k.threadgroup_array("stage", Type::vector(Scalar::F16, 4), 64);
    let lid = k.let_("lid", thread_index_in_threadgroup());
    k.async_copy(stage.at(lid * 2u32), src.at(lid * 2u32), 2, (lid * 2u32).lt(n));
    k.async_commit();
    k.async_wait(0);
    let kernel = k.finish().unwrap();
    enigma_ir::validate(&kernel, &Default::default()).unwrap();
    let text = assert_round_trips(&kernel);
    for spelling in ["async_copy(stage[(lid * 2u32)], src[(lid * 2u32)], 2, ((lid * 2u32) < n))", "async_commit()", "async_wait(0)"] {
        assert!(text.contains(spelling), "`{spelling}` in\n{text}");
    }
    let json = to_json(&kernel);
    assert!(json.contains(r#""async_commit""#) && json.contains(r#"{"async_wait":{"pending":0}}"#), "{json}");
}

#[test]
fn thread_arrays_and_unrolled_loops_print_and_parse_back() {
    use enigma_ir::builder::*;
    let mut k = KernelBuilder::new("tiles");
    let out = k.buffer("out", Type::vector(Scalar::F32, 4), Access::ReadWrite);
    let acc = k.thread_array("acc", Type::vector(Scalar::F32, 4), 8);
    let grid = k.thread_array("grid", Type::I32, 16);
    let tid = k.let_("tid", thread_position_in_grid().x());
    k.store(acc.at(3u32), out.get(tid));
    k.store(grid.at_dims([1u32.into(), 2u32.into()], [4u32.into(), 4u32.into()]), 7i32);
    k.for_unrolled("i", 0u32, 8u32, 1u32, |k, i| k.store(acc.at(i), out.get(i)));
    k.store(out.at(tid), acc.get(3u32));
    let kernel = k.finish().unwrap();
    enigma_ir::validate(&kernel, &Default::default()).unwrap();
    let text = assert_round_trips(&kernel);
    for spelling in [
        "thread acc: f32x4[8]",
        "thread grid: i32[16]",
        "acc[3u32] = out[tid]",
        "dim_check(grid, 1, 2u32, 4u32)",
        "for i in (0u32, 8u32, 1u32) unroll {",
    ] {
        assert!(text.contains(spelling), "`{spelling}` in\n{text}");
    }
    let json = to_json(&kernel);
    assert!(json.contains(r#""thread_arrays":[{"name":"acc","elem":"f32x4","len":8}"#) && json.contains(r#"{"thread":0}"#), "{json}");
    assert!(json.contains(r#""unroll":true"#), "{json}");
    // A kernel without per-thread arrays leaves the field out, as before it existed.
    assert!(!to_json(&enigma_ir::Kernel::empty("k")).contains("thread_arrays"));
}

#[test]
fn device_fences_print_and_parse_back_and_are_a_feature() {
    use enigma_ir::builder::*;
    let mut k = KernelBuilder::new("fences");
    let counter = k.buffer("counter", Type::U32, Access::ReadWrite);
    k.device_fence();
    k.atomic(enigma_ir::AtomicOp::Add, counter.at(0u32), 1u32);
    let kernel = k.finish().unwrap();
    let info = enigma_ir::validate(&kernel, &Default::default()).unwrap();
    assert!(info.features.contains(&enigma_ir::Feature::DeviceFence));
    let text = assert_round_trips(&kernel);
    assert!(text.contains("device_fence()"), "{text}");
    assert!(to_json(&kernel).contains(r#""device_fence""#));
}

#[test]
fn print_statements_print_and_parse_back() {
    use enigma_ir::builder::*;
    let mut k = KernelBuilder::new("printing");
    let x = k.buffer("x", Type::F32, Access::Read);
    let i = k.let_("i", thread_position_in_grid().x());
    k.print("x[{}] = {} \"{{quoted}}\"", &[i, x.at(i).load()]);
    k.print("no values", &[]);
    let kernel = k.finish().unwrap();
    enigma_ir::validate(&kernel, &Default::default()).unwrap();
    let text = assert_round_trips(&kernel);
    assert!(text.contains(r#"print("x[{}] = {} \"{{quoted}}\"", i, x[i])"#), "{text}");
    assert!(text.contains(r#"print("no values")"#), "{text}");
    assert!(to_json(&kernel).contains(r#"{"print":{"format":"no values","args":[]}}"#), "{}", to_json(&kernel));
}

#[test]
fn texture_constructs_print_and_parse_back() {
    use enigma_ir::builder::*;
    use enigma_ir::TextureAccess;
    let mut k = KernelBuilder::new("t");
    let src = k.texture2d("src", Scalar::F16, TextureAccess::Sample);
    let dst = k.texture2d("dst", Scalar::F32, TextureAccess::ReadWrite);
    let _ids = k.texture2d("ids", Scalar::U32, TextureAccess::Read);
    let _labels = k.texture2d("labels", Scalar::I32, TextureAccess::Write);
    let n = k.value("n", Type::U32);
    let gid = k.let_("gid", thread_position_in_grid());
    let coord = k.let_("coord", vector(Type::vector(Scalar::U32, 2), &[gid.x(), gid.y()]));
    k.if_(coord.x().ge(dst.get_width()).or(coord.y().ge(dst.get_height())), |k| k.return_());
    let v = k.let_("v", src.read(coord).cast(Type::vector(Scalar::F32, 4)) + dst.read(coord));
    k.texture_write(dst, v * n.cast(Type::F32), coord);
    k.texture_fence(dst);
    let kernel = k.finish().unwrap();
    enigma_ir::validate(&kernel, &Default::default()).unwrap();
    let text = assert_round_trips(&kernel);
    for spelling in [
        "kernel t(src: texture2d<f16, sample>, dst: texture2d<f32, read_write>, ids: texture2d<u32, read>, labels: texture2d<i32, write>, n: u32)",
        "get_width(dst)",
        "get_height(dst)",
        "texture_read(src, coord)",
        "texture_write(dst, ",
        "texture_fence(dst)",
    ] {
        assert!(text.contains(spelling), "`{spelling}` in\n{text}");
    }
    assert_eq!((kernel.binding(ParamId(1)), kernel.binding(ParamId(4))), (1, 0), "textures and buffers bind in tables of their own");
    let json = to_json(&kernel);
    assert!(json.contains(r#"{"texture":{"texel":"f16","access":"sample"}}"#), "{json}");
    assert!(json.contains(r#"{"texture_size":{"tex":1,"dim":"width"}}"#), "{json}");
    assert!(json.contains(r#"{"texture_fence":{"tex":1}}"#), "{json}");
    // A texture argument must name a parameter.
    let (_, _, kind) = error("kernel k() {\n    threadgroup s: f32[4]\n\n    texture_write(s, f32x4(1.0f32), u32x2(0u32, 0u32))\n}");
    assert!(matches!(kind, ParseErrorKind::WrongKind { ref name, .. } if name == "s"), "{kind:?}");
    let (_, _, kind) = error("kernel k(t: texture2d<f32x4, read>) {\n}");
    assert!(matches!(kind, ParseErrorKind::Expected { .. }), "{kind:?}");
    let barrier = parse("kernel k() {\n    threadgroup_barrier(mem_texture)\n}").unwrap();
    assert!(matches!(barrier.body[0].kind, StmtKind::Barrier { flags: MemFlags::Texture, .. }));
    assert_round_trips(&barrier);
    let (_, _, kind) = error("kernel k() {\n    threadgroup_barrier(mem_texture | mem_device)\n}");
    assert!(expected(&kind).0.starts_with("`mem_texture` alone"), "{kind:?}");
    let (_, _, kind) = error("kernel k(t: texture2d<f32, readonly>) {\n}");
    assert_eq!(expected(&kind).0, "`read`, `write`, `read_write` or `sample`");
}

#[test]
fn samples_with_every_sampler_print_and_parse_back() {
    use enigma_ir::builder::*;
    use enigma_ir::{Sampler, SamplerAddress, SamplerCoord, SamplerFilter, TextureAccess};
    let mut k = KernelBuilder::new("s");
    let src = k.texture2d("src", Scalar::F32, TextureAccess::Sample);
    let out = k.buffer("out", Type::vector(Scalar::F32, 4), enigma_ir::Access::ReadWrite);
    let uv = k.let_("uv", vector(Type::vector(Scalar::F32, 2), &[0.25f32.into(), 0.75f32.into()]));
    let mut i = 0u32;
    for coord in SamplerCoord::ALL {
        for filter in SamplerFilter::ALL {
            for address in SamplerAddress::ALL {
                if coord == SamplerCoord::Pixel && address.repeats() {
                    continue;
                }
                k.store(out.at(i), src.sample(Sampler { coord, filter, address }, uv));
                i += 1;
            }
        }
    }
    let kernel = k.finish().unwrap();
    let info = enigma_ir::validate(&kernel, &Default::default()).unwrap();
    assert_eq!(info.samplers[&ParamId(0)].len(), 12, "each sampler once");
    let text = assert_round_trips(&kernel);
    assert!(text.contains("texture_sample(src, sampler(normalized, linear, mirrored_repeat), uv)"), "{text}");
    assert!(text.contains("texture_sample(src, sampler(pixel, nearest, clamp_to_zero), uv)"), "{text}");
    let json = to_json(&kernel);
    assert!(
        json.contains(r#"{"texture_sample":{"tex":0,"sampler":{"coord":"pixel","filter":"linear","address":"clamp_to_edge"},"uv":{"var":0}}}"#),
        "{json}"
    );
    let (_, _, kind) = error("kernel k(t: texture2d<f32, sample>) {\n    var x: f32x4\n    x = texture_sample(t, sampler(normalized, bilinear, repeat), f32x2(0.5f32))\n}");
    assert_eq!(expected(&kind).0, "`nearest` or `linear`");
}

/// Float literals whose value rounds to infinity in their type are out of
/// range (issue 18, defect 3); the largest finite values and infinity itself
/// are not. Checked at every type's boundary against the IEEE formats.
#[test]
fn float_literals_that_round_to_infinity_are_rejected() {
    let cases: [(&str, &str, bool); 10] = [
        ("f16", "65504.0f16", true),
        ("f16", "65519.0f16", true),
        ("f16", "65520.0f16", false),
        ("f16", "70000.0f16", false),
        ("f32", "3.4028235e38f32", true),
        ("f32", "3.40282357e38f32", false),
        ("f32", "1e39f32", false),
        ("bf16", "3.3e38bf16", true),
        ("bf16", "1e39bf16", false),
        ("f32", "inf_f32", true),
    ];
    for (ty, lit, fits) in cases {
        let text = format!("kernel k(A: device {ty} read_write) {{\n    A[0u32] = {lit}\n}}\n");
        let kernel = enigma_ir::text::parse(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
        let result = enigma_ir::validate(&kernel, &enigma_ir::ValidationOptions::default());
        match (fits, result) {
            (true, Ok(_)) => {}
            (false, Err(e)) => assert!(e.to_string().contains("rounds to infinity") && e.to_string().contains(ty), "{lit}: {e}"),
            (fits, r) => panic!("{lit}: expected fits = {fits}, got {r:?}"),
        }
    }
    // The threshold agrees with Rust's own f64 -> f32 rounding.
    for v in [3.4028235677973366e38f64, 3.4028235677973362e38, 3.4028234663852886e38] {
        let text = format!("kernel k(A: device f32 read_write) {{\n    A[0u32] = {v:e}f32\n}}\n");
        let kernel = enigma_ir::text::parse(&text).unwrap();
        let ok = enigma_ir::validate(&kernel, &enigma_ir::ValidationOptions::default()).is_ok();
        assert_eq!(ok, (v as f32).is_finite(), "{v:e}");
    }
}

/// The JSON form carries every kernel the text form does (issue 18, defect
/// 4): sums of many terms and blocks nested up to the text form's limit go
/// through `to_json`/`from_json` unchanged, and JSON nested past what any
/// such kernel needs is an error naming the limit, not a stack overflow.
#[test]
fn the_json_form_carries_kernels_as_deep_as_the_text_form() {
    let depth = text::MAX_NESTING as usize - 2;
    let sum = format!("kernel k(A: device u32 read_write) {{\n    A[0u32] = {}0u32{}\n}}\n", "(1u32 + ".repeat(depth), ")".repeat(depth));
    let blocks = format!(
        "kernel k(A: device u32 read_write) {{\n{}A[0u32] = 1u32\n{}}}\n",
        "if (A[0u32] == 0u32) {\n".repeat(depth),
        "}\n".repeat(depth)
    );
    for source in [sum, blocks] {
        let kernel = text::parse(&source).unwrap_or_else(|e| panic!("{e}"));
        let json = to_json(&kernel);
        let back = from_json(&json).unwrap_or_else(|e| panic!("{}", e.message));
        assert_eq!(back, kernel);
    }
    let too_deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let err = from_json(&too_deep).unwrap_err();
    assert!(err.message.contains("nested"), "{}", err.message);
    // The deepest expression the JSON limit lets through (bit-not is two
    // JSON levels) parses and validates on a test thread's small stack.
    let mut k = enigma_ir::builder::KernelBuilder::new("deep");
    let a = k.buffer("A", enigma_ir::Type::U32, enigma_ir::Access::ReadWrite);
    let mut e = a.get(0u32);
    for _ in 0..text::MAX_JSON_DEPTH / 2 - 8 {
        e = !e;
    }
    k.store(a.at(0u32), e);
    let kernel = k.finish().unwrap();
    let back = from_json(&to_json(&kernel)).unwrap_or_else(|e| panic!("{}", e.message));
    enigma_ir::validate(&back, &enigma_ir::ValidationOptions::default()).unwrap();
}
