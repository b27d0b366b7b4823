//! The simulator runs every kernel of the IR's random generator
//! (`enigma_ir::testgen`) without an error, with the sanitizer on: the
//! generator promises in-bounds, race-free kernels with no undefined values
//! and no shuffles of inactive lanes, so the sanitizer must find nothing
//! (but unwritten outputs of threads that returned early), and two runs must
//! leave the same outputs.

use enigma_backend::{ArgValue, Backend, DispatchMode, DispatchOptions, FindingKind, SpecValues, TextureDesc, TextureFormat};
use enigma_ir::testgen::{self, arb_case, CaseArg, GenConfig, KernelCase};
use enigma_ir::text::print;
use enigma_ir::{validate, ValidationOptions};
use enigma_sim::SimBackend;
use proptest::prelude::*;

/// Runs `case` on the simulator; returns its outputs' 32-bit words, in
/// output order, or the error (with the kernel's text).
fn run(case: &KernelCase, sanitize: bool) -> Result<Vec<Vec<u32>>, String> {
    run_with(case, &DispatchOptions { sanitize, schedules: 0, ..Default::default() }).map(|(outputs, _)| outputs)
}

/// [`run`] under `options`, with the lines the dispatch collected.
fn run_with(case: &KernelCase, options: &DispatchOptions) -> Result<(Vec<Vec<u32>>, Vec<String>), String> {
    let kernel = &case.kernel;
    let show = |e: &dyn std::fmt::Display| format!("{e}\n{}", print(kernel));
    let info = validate(kernel, &ValidationOptions::default()).map_err(|e| show(&e))?;
    let backend = SimBackend::new();
    let compiled = backend.compile(kernel, &info, &SpecValues::default()).map_err(|e| show(&e))?;
    let mut storages = vec![];
    for arg in &case.args {
        // Inputs take their elements' sizes; outputs and texels are 32-bit.
        let bytes: Vec<u8> = match arg {
            CaseArg::Input { elem, data } => testgen::pack(*elem, data),
            CaseArg::Output { len, .. } => vec![0; *len as usize * 4],
            CaseArg::Texture { width, height, data, .. } => {
                data.clone().unwrap_or_else(|| vec![0; (width * height) as usize]).iter().flat_map(|w| w.to_le_bytes()).collect()
            }
            CaseArg::Value(_) => continue,
        };
        let storage = backend.allocate(bytes.len()).map_err(|e| show(&e))?;
        storage.write(0, &bytes).map_err(|e| show(&e))?;
        storages.push(storage);
    }
    let mut next = storages.iter();
    let args: Vec<ArgValue<'_>> = case
        .args
        .iter()
        .map(|arg| match arg {
            CaseArg::Value(lit) => ArgValue::literal(*lit),
            CaseArg::Texture { texel, width, height, .. } => {
                let format = match texel {
                    enigma_ir::Scalar::F32 => TextureFormat::R32Float,
                    enigma_ir::Scalar::I32 => TextureFormat::R32Sint,
                    _ => TextureFormat::R32Uint,
                };
                let desc = TextureDesc { format, width: *width, height: *height };
                ArgValue::Texture { storage: next.next().expect("one storage per texture").as_ref(), desc }
            }
            _ => ArgValue::Buffer { storage: next.next().expect("one storage per buffer").as_ref(), elem: None },
        })
        .collect();
    let geometry =
        enigma_backend::check_dispatch(backend.info(), compiled.as_ref(), &args, DispatchMode::Threads, case.grid, case.threads)
            .map_err(|e| show(&e))?;
    let report = backend
        .dispatch(compiled.as_ref(), &args, &geometry, options)
        .map_err(|e| show(&e))?;
    // Output elements of threads that returned early stay unwritten (a
    // coverage warning, expected); anything else is a generator or simulator bug.
    let findings: Vec<_> = report.findings.iter().filter(|f| f.kind != FindingKind::Coverage).collect();
    if !findings.is_empty() {
        return Err(show(&format!("sanitizer findings: {findings:#?}")));
    }
    let mut outputs = vec![];
    for (arg, storage) in case.args.iter().filter(|a| !matches!(a, CaseArg::Value(_))).zip(&storages) {
        let len = match arg {
            CaseArg::Output { len, .. } => Some(*len),
            CaseArg::Texture { width, height, data: None, .. } => Some(width * height),
            _ => None,
        };
        if let Some(len) = len {
            let mut bytes = vec![0u8; len as usize * 4];
            storage.read(0, &mut bytes).map_err(|e| show(&e))?;
            outputs.push(bytes.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect());
        }
    }
    Ok((outputs, report.printed))
}

/// The print phase (`GenConfig::prints`): about half the kernels print; each
/// line is `p gid=<g> …` of a distinct thread, every `g` of a kernel the same
/// modulo `PRINT_EVERY`, at most one line per `PRINT_EVERY` threads; a
/// sanitized run prints the lines a plain one does and writes the same
/// outputs.
#[test]
fn the_print_phase_prints_bounded_lines_that_runs_agree_on() {
    let every = testgen::PRINT_EVERY;
    let config = GenConfig { prints: true, ..GenConfig::default() };
    let collect = |sanitize| DispatchOptions { sanitize, schedules: 0, collect_printed: true, ..Default::default() };
    let mut printing = 0;
    for seed in 0..80 {
        let case = testgen::case_with(&config, seed);
        let (outputs, mut lines) = run_with(&case, &collect(false)).unwrap();
        let (sanitized_outputs, mut sanitized_lines) = run_with(&case, &collect(true)).unwrap();
        lines.sort();
        sanitized_lines.sort();
        assert_eq!(lines, sanitized_lines, "seed {seed}");
        assert_eq!(case.compare_outputs(&outputs, &sanitized_outputs), Ok(()));
        let gids: Vec<u32> = lines
            .iter()
            .map(|l| {
                let text = l.split_once("): ").map_or(l.as_str(), |(_, t)| t);
                let gid = text.strip_prefix("p gid=").and_then(|t| t.split(' ').next()).and_then(|g| g.parse().ok());
                gid.unwrap_or_else(|| panic!("seed {seed}: line {l:?}"))
            })
            .collect();
        let mut distinct = gids.clone();
        distinct.dedup();
        assert_eq!(distinct.len(), gids.len(), "seed {seed}: a thread printed twice");
        assert!(gids.iter().all(|g| g % every == gids[0] % every), "seed {seed}: {gids:?}");
        assert!(gids.len() as u32 <= case.grid[0].div_ceil(every), "seed {seed}");
        printing += usize::from(!gids.is_empty());
    }
    assert!(printing >= 10, "only {printing} of 80 kernels printed");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn generated_kernels_run_clean_under_the_sanitizer(case in arb_case(GenConfig::default())) {
        let sanitized = run(&case, true).map_err(TestCaseError::fail)?;
        let plain = run(&case, false).map_err(TestCaseError::fail)?;
        prop_assert_eq!(case.compare_outputs(&sanitized, &plain), Ok(()));
    }

    #[test]
    fn generated_kernels_with_textures_run_clean_under_the_sanitizer(case in arb_case(GenConfig { textures: true, ..GenConfig::default() })) {
        let sanitized = run(&case, true).map_err(TestCaseError::fail)?;
        let plain = run(&case, false).map_err(TestCaseError::fail)?;
        prop_assert_eq!(case.compare_outputs(&sanitized, &plain), Ok(()));
    }
}

/// The cooperative phase appears (it is on by default, so the sanitizer
/// property above covers it too); every SIMD group computes the same
/// product from the same views, so each one's region of `coop_out` holds
/// the same tile (and most tiles are not all zeros).
#[test]
fn cooperative_cases_write_every_simdgroup_region_alike() {
    let cases: Vec<KernelCase> = (0..40).map(testgen::case).filter(|c| !c.kernel.cooperative_tensors.is_empty()).collect();
    assert!(cases.len() >= 8, "{} of 40 cases have a cooperative phase", cases.len());
    let mut nonzero = 0;
    for case in &cases {
        let t = &case.kernel.cooperative_tensors[0];
        let tile = (t.rows * t.cols) as usize;
        let out = case.kernel.params.iter().position(|p| p.name == "coop_out").unwrap();
        let outputs = run(case, false).unwrap();
        let region_of = case.args[..out].iter().filter(|a| matches!(a, CaseArg::Output { .. } | CaseArg::Texture { data: None, .. })).count();
        let words = &outputs[region_of];
        let first = &words[..tile];
        assert!(words.chunks(tile).all(|r| r == first), "{}", enigma_ir::text::print(&case.kernel));
        nonzero += first.iter().any(|&w| w != 0) as usize;
    }
    assert!(nonzero * 2 >= cases.len(), "{nonzero} of {} tiles are not all zeros", cases.len());
}

/// Some cooperative phases read a threadgroup copy of `coop_in` as
/// overlapped products: they run clean under the sanitizer (with the copy
/// rewritten after the second barrier in some), and leave what the same
/// product reading `coop_in` itself, released at the next barrier, leaves.
#[test]
fn overlapped_cooperative_cases_match_the_product_from_the_buffer() {
    use enigma_ir::cooperative::OperandRelease;
    use enigma_ir::{Matmul2dLeft, Memory, StmtKind};
    let mut checked = 0;
    for seed in 0..160 {
        let case = testgen::case(seed);
        let Some(at) = case.kernel.body.iter().position(|s| matches!(&s.kind, StmtKind::Matmul2d { release: OperandRelease::SecondBarrier, .. })) else {
            continue;
        };
        let input = case.kernel.params.iter().position(|p| p.name == "coop_in").unwrap();
        let mut direct = case.clone();
        let StmtKind::Matmul2d { left, right, release, .. } = &mut direct.kernel.body[at].kind else {
            unreachable!("a product")
        };
        // A left operand may be a cooperative tensor of dequantized weights.
        if let Matmul2dLeft::Tensor(left) = left {
            assert!(matches!(left.mem, Memory::Threadgroup(_)), "seed {seed}");
            left.mem = Memory::Buffer(enigma_ir::ParamId(input as u32));
        }
        assert!(matches!(right.mem, Memory::Threadgroup(_)), "seed {seed}");
        right.mem = Memory::Buffer(enigma_ir::ParamId(input as u32));
        *release = OperandRelease::NextBarrier;
        let overlapped = run(&case, true).unwrap();
        assert_eq!(case.compare_outputs(&overlapped, &run(&direct, false).unwrap()), Ok(()), "seed {seed}\n{}", print(&case.kernel));
        checked += 1;
    }
    assert!(checked >= 8, "only {checked} of 160 cases have an overlapped product");
}

/// Some cooperative phases multiply a left operand dequantized from 4-bit
/// weights (every code, f32 and f16 tensors, words in rows, in fragment
/// order and in MLX's columns, with and without biases, words and scales in
/// device and threadgroup memory); they run clean under the sanitizer and
/// leave what the same product leaves with that operand read from a buffer
/// of the weights decoded here (`QuantCode::value` times the scale plus the
/// bias, in f64, rounded once to the tensor's type).
#[test]
fn dequantized_left_operands_match_the_weights_decoded_on_the_host() {
    use enigma_backend::half::{f16_bits_to_f32, f32_to_f16_bits};
    use enigma_ir::cooperative::OperandRelease;
    use enigma_ir::{Access, Expr, Literal, Matmul2dLeft, Memory, Param, ParamId, ParamKind, Scalar, StmtKind, TensorView, Type};
    let literal = |e: &Expr| match e {
        Expr::Literal(l) if l.ty == Scalar::U32 => l.value.as_i64() as u32,
        other => panic!("not a u32 literal: {other:?}"),
    };
    let (mut seen, mut kinds, mut layouts, mut with_biases) = (0, std::collections::BTreeSet::new(), std::collections::BTreeSet::new(), 0);
    for seed in 0..400 {
        let case = testgen::case(seed);
        let Some(at) = case.kernel.body.iter().position(|s| matches!(s.kind, StmtKind::CooperativeDequantize { .. })) else {
            continue;
        };
        let StmtKind::CooperativeDequantize { tensor, code, layout, words, offset, stride, scales, scale_offset, scale_stride, group_shift, biases } = &case.kernel.body[at].kind
        else {
            unreachable!()
        };
        // The data a memory holds: the input itself, or the input its
        // threadgroup copy (`coop_tgw`, `coop_tgs`) was made from.
        let data_of = |mem: &Memory, input: &str| {
            let staged = matches!(mem, Memory::Threadgroup(_));
            let p = case.kernel.params.iter().position(|p| p.name == input).unwrap();
            let CaseArg::Input { data, .. } = &case.args[p] else { unreachable!("an input") };
            (data.clone(), staged)
        };
        let (word_data, staged_words) = data_of(words, "coop_words");
        let (scale_data, staged_scales) = data_of(scales, "coop_scales");
        let bias_data = biases.as_ref().map(|b| data_of(b, "coop_biases").0);
        let t = case.kernel.cooperative(*tensor).clone();
        let mut weights = vec![];
        for r in 0..t.rows {
            for c in 0..t.cols {
                let (unit_row, word, nibble) = layout.locate(c, r);
                let word = word_data[(literal(offset) + unit_row * literal(stride) + word) as usize];
                let at = (literal(scale_offset) + layout.scale_index(c >> literal(group_shift), r, literal(scale_stride))) as usize;
                let scale = f16_bits_to_f32(scale_data[at] as u16);
                let bias = bias_data.as_ref().map_or(0.0, |b| f16_bits_to_f32(b[at] as u16));
                let exact = f64::from(code.value(word >> (4 * nibble))) * f64::from(scale) + f64::from(bias);
                let value = if t.elem == Scalar::F16 { f16_bits_to_f32(f32_to_f16_bits(exact as f32)) } else { exact as f32 };
                weights.push(value.to_bits());
            }
        }
        let mut direct = case.clone();
        let weights_param = ParamId(direct.kernel.params.len() as u32);
        direct.kernel.params.push(Param { name: "weights".into(), kind: ParamKind::Buffer { elem: Type::F32, access: Access::Read } });
        direct.args.push(CaseArg::Input { elem: Scalar::F32, data: weights });
        direct.kernel.body.remove(at);
        let product = direct.kernel.body.iter_mut().find_map(|s| match &mut s.kind {
            StmtKind::Matmul2d { left, release, .. } if *left == Matmul2dLeft::Cooperative(*tensor) => Some((left, release)),
            _ => None,
        });
        let (left, release) = product.unwrap_or_else(|| panic!("seed {seed}: no product reads `{}`", t.name));
        let lit = |v: u32| Expr::Literal(Literal::u32(v));
        *left = Matmul2dLeft::Tensor(Box::new(TensorView {
            mem: Memory::Buffer(weights_param),
            offset: lit(0),
            extents: [lit(t.cols), lit(t.rows)],
            strides: [lit(1), lit(t.cols)],
        }));
        // A view from a buffer is released at the next barrier.
        *release = OperandRelease::NextBarrier;
        let dequantized = run(&case, true).unwrap();
        assert_eq!(case.compare_outputs(&dequantized, &run(&direct, false).unwrap()), Ok(()), "seed {seed}\n{}", print(&case.kernel));
        seen += 1;
        kinds.insert((code.name(), t.elem.to_string(), staged_words, staged_scales));
        layouts.insert(layout.name());
        with_biases += usize::from(biases.is_some());
    }
    assert!(seen >= 8, "only {seen} of 400 cases dequantize a left operand");
    assert!(kinds.len() >= 8, "only these (code, type, staged words, staged scales) appeared: {kinds:?}");
    assert_eq!(layouts.len(), 3, "only these layouts of the words appeared: {layouts:?}");
    assert!(with_biases > 0, "no case of {seen} dequantizes with biases");
}

/// Some cooperative phases reduce their product and combine the result
/// back into it; they run clean under the sanitizer, and the combined
/// tensor differs from the plain product in most of them (the statements
/// do something).
#[test]
fn reductions_combined_into_the_product_appear_and_run_clean() {
    use enigma_ir::StmtKind;
    let (mut seen, mut changed) = (0, 0);
    for seed in 0..160 {
        let case = testgen::case(seed);
        let Some(at) = case.kernel.body.iter().position(|s| matches!(s.kind, StmtKind::CooperativeCombine { .. })) else {
            continue;
        };
        let combined = run(&case, true).unwrap();
        let mut plain = case.clone();
        plain.kernel.body.remove(at);
        changed += (case.compare_outputs(&combined, &run(&plain, false).unwrap()) != Ok(())) as usize;
        seen += 1;
    }
    assert!(seen >= 8, "only {seen} of 160 cases combine a reduction into their product");
    assert!(changed * 2 >= seen, "only {changed} of {seen} combines changed an output");
}

/// The texture phase appears and its output texture is written.
#[test]
fn texture_cases_read_and_write_textures() {
    let config = GenConfig { textures: true, ..GenConfig::default() };
    let with_textures: Vec<KernelCase> =
        (0..32).map(|seed| testgen::case_with(&config, seed)).filter(|c| c.args.iter().any(|a| matches!(a, CaseArg::Texture { .. }))).collect();
    assert!(with_textures.len() >= 8, "{} of 32 cases have textures", with_textures.len());
    let written = with_textures
        .iter()
        .filter(|case| run(case, false).unwrap().last().is_some_and(|texels| texels.iter().any(|&w| w != 0)))
        .count();
    assert!(written * 2 >= with_textures.len(), "{written} of {} cases wrote a non-zero texel", with_textures.len());
}

/// Some texture phases sample an f32 `sample` texture (with constant
/// samplers of both filters), and those kernels run clean under the
/// sanitizer with the same outputs as without it.
#[test]
fn texture_cases_sample_with_constant_samplers() {
    let config = GenConfig { textures: true, ..GenConfig::default() };
    let sampling: Vec<KernelCase> = (0..200)
        .map(|seed| testgen::case_with(&config, seed))
        .filter(|c| c.kernel.body.iter().any(|s| s.kind.exprs().iter().any(|e| e.any(&mut |x| matches!(x, enigma_ir::Expr::TextureSample { .. })))))
        .collect();
    assert!(sampling.len() >= 3, "{} of 200 cases sample a texture", sampling.len());
    let filters: std::collections::BTreeSet<String> = sampling
        .iter()
        .flat_map(|c| enigma_ir::text::print(&c.kernel).lines().filter(|l| l.contains("sampler(")).map(|l| if l.contains("linear") { "linear".to_string() } else { "nearest".to_string() }).collect::<Vec<_>>())
        .collect();
    assert_eq!(filters.len(), 2, "{filters:?}");
    for case in &sampling {
        let sanitized = run(case, true).unwrap_or_else(|e| panic!("{e}\n{}", enigma_ir::text::print(&case.kernel)));
        assert_eq!(case.compare_outputs(&sanitized, &run(case, false).unwrap()), Ok(()));
    }
}

/// The default cases of seeds `0..seeds` that have the input `name`, each
/// with that input's argument index.
fn cases_reading(name: &str, seeds: u64) -> Vec<(KernelCase, usize)> {
    (0..seeds)
        .map(testgen::case)
        .filter_map(|case| {
            let param = case.kernel.params.iter().position(|p| p.name == name)?;
            Some((case, param))
        })
        .collect()
}

/// How many of `cases` (each with the index of one of its input
/// arguments) write other outputs when every element of that input
/// changes (floats plus 1, integers inverted).
fn depending_on_their_input(cases: &[(KernelCase, usize)]) -> usize {
    cases
        .iter()
        .filter(|(case, param)| {
            let mut other = case.clone();
            if let CaseArg::Input { elem, data } = &mut other.args[*param] {
                for w in data.iter_mut() {
                    *w = match elem {
                        enigma_ir::Scalar::F32 => (f32::from_bits(*w) + 1.0).to_bits(),
                        _ => !*w,
                    };
                }
            }
            run(case, false).unwrap() != run(&other, false).unwrap()
        })
        .count()
}

/// The asynchronous-copy phase appears, in one and two stages, and what it
/// copies reaches the outputs: changing `async_in` changes them.
#[test]
fn async_copy_cases_copy_into_the_outputs() {
    let with_copies = cases_reading("async_in", 48);
    assert!(with_copies.len() >= 8, "{} of 48 cases copy asynchronously", with_copies.len());
    let two_stages = with_copies.iter().filter(|(case, _)| print(&case.kernel).contains("async_wait(1)")).count();
    assert!(two_stages > 0 && two_stages < with_copies.len(), "{two_stages} of {} cases have two stages", with_copies.len());
    let changed = depending_on_their_input(&with_copies);
    assert!(changed * 2 >= with_copies.len(), "{changed} of {} cases' outputs depend on async_in", with_copies.len());
}

/// The tile-copy phase: the cases that have it run clean under the
/// sanitizer (every box waited for, nothing read in flight), some on one
/// barrier and some on two, some from origins of the threadgroup's
/// position, and their outputs depend on `tile_in`.
#[test]
fn tile_copy_cases_run_clean_and_copy_into_the_outputs() {
    let with_tiles = cases_reading("tile_in", 64);
    assert!(with_tiles.len() >= 8, "{} of 64 cases copy tiles", with_tiles.len());
    let texts: Vec<String> = with_tiles.iter().map(|(case, _)| print(&case.kernel)).collect();
    let two_waits = texts.iter().filter(|t| t.matches("tile_wait(").count() == 2).count();
    assert!(two_waits > 0 && two_waits < with_tiles.len(), "{two_waits} of {} cases wait on two barriers", with_tiles.len());
    assert!(texts.iter().any(|t| t.contains("threadgroup_position_in_grid")), "no origin from the threadgroup's position");
    for (case, _) in &with_tiles {
        run(case, true).unwrap_or_else(|e| panic!("{}: {e}", print(&case.kernel)));
    }
    let changed = depending_on_their_input(&with_tiles);
    assert!(changed * 2 >= with_tiles.len(), "{changed} of {} cases' outputs depend on tile_in", with_tiles.len());
}

#[test]
fn seeded_cases_run_and_repeat_exactly() {
    let int_only = GenConfig { floats: false, ..GenConfig::default() };
    for seed in 0..16 {
        for case in [testgen::case(seed), testgen::case_with(&int_only, seed)] {
            let a = run(&case, false).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
            let b = run(&case, false).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
            assert_eq!(a, b, "seed {seed}");
        }
    }
}

/// The outputs are what the kernel computes, not left zeroed: across seeds
/// most first output elements are non-zero somewhere.
#[test]
fn outputs_are_written() {
    let written = (0..32)
        .filter(|&seed| run(&testgen::case(seed), false).unwrap().iter().any(|out| out.iter().any(|&w| w != 0)))
        .count();
    assert!(written >= 24, "{written} of 32 cases wrote a non-zero output");
}

/// The f32 value of the f16 `bits` (the low half of an input element).
fn f16_value(bits: u32) -> f64 {
    let (sign, exponent, mantissa) = ((bits >> 15) & 1, (bits >> 10) & 0x1f, bits & 0x3ff);
    let magnitude = match exponent {
        0 => mantissa as f64 * 2f64.powi(-24),
        0x1f => f64::INFINITY,
        e => (1.0 + mantissa as f64 / 1024.0) * 2f64.powi(e as i32 - 15),
    };
    if sign == 1 {
        -magnitude
    } else {
        magnitude
    }
}

/// What a generated quantized matrix phase stores to each SIMD group's 64
/// elements of `mat_out`, computed in plain Rust from the kernel's loads,
/// fill and store (their offsets and strides are literals) and the inputs:
/// element (r, c) at `r * 8 + c`, or `c * 8 + r` for a transposed store.
fn quantized_reference(case: &KernelCase) -> Vec<f64> {
    use enigma_ir::{Expr, LiteralValue, StmtKind};
    let constant = |e: &Expr| match e {
        Expr::Literal(l) => match l.value {
            LiteralValue::UInt(v) => v as usize,
            LiteralValue::Int(v) => v as usize,
            other => panic!("non-integer constant {other:?}"),
        },
        other => panic!("not a constant: {other:?}"),
    };
    let input = |mem: &enigma_ir::Memory| -> (enigma_ir::Scalar, &[u32]) {
        let enigma_ir::Memory::Buffer(p) = mem else { panic!("not a buffer") };
        match &case.args[p.0 as usize] {
            CaseArg::Input { elem, data } => (*elem, data.as_slice()),
            other => panic!("not an input: {other:?}"),
        }
    };
    let value = |elem: enigma_ir::Scalar, w: u32| match elem {
        enigma_ir::Scalar::F16 => f16_value(w),
        _ => f32::from_bits(w) as f64,
    };
    // Each matrix local's tile, row by row, with its column count.
    let mut tiles = std::collections::HashMap::new();
    for s in &case.kernel.body {
        match &s.kind {
            StmtKind::Assign { var, value: Expr::MatrixLoad { ty, mem, offset, stride, transpose } } => {
                let (elem, data) = input(mem);
                let (o, st) = (constant(offset), constant(stride));
                let (rows, cols) = (ty.rows() as usize, ty.cols() as usize);
                let tile: Vec<f64> = (0..rows * cols)
                    .map(|i| {
                        let (r, c) = (i / cols, i % cols);
                        value(elem, data[if *transpose { o + c * st + r } else { o + r * st + c }])
                    })
                    .collect();
                tiles.insert(*var, (tile, cols));
            }
            StmtKind::Assign { var, value: Expr::MatrixLoadQuantized { ty, code, words, offset, stride, scales, scale_offset, .. } } => {
                let ((_, words), (_, scales)) = (input(words), input(scales));
                let (o, st, so) = (constant(offset), constant(stride), constant(scale_offset));
                let (rows, cols) = (ty.rows() as usize, ty.cols() as usize);
                let tile: Vec<f64> = (0..rows * cols)
                    .map(|i| {
                        let (r, c) = (i / cols, i % cols);
                        let word = words[o + (r / 8) * st + c];
                        code.value(word >> (4 * (r % 8))) as f64 * f16_value(scales[so + c])
                    })
                    .collect();
                tiles.insert(*var, (tile, cols));
            }
            StmtKind::MatrixStore { value: Expr::MatrixMultiply { a, b, acc: Some(acc) }, transpose, .. } => {
                let (Expr::Var(a), Expr::Var(b)) = (&**a, &**b) else { panic!("operands are not locals") };
                let Expr::MatrixFill { value, diagonal, .. } = &**acc else { panic!("the accumulator is not a fill") };
                let Expr::Literal(fill) = &**value else { panic!("the fill is not a literal") };
                let ((ta, k), (tb, cols)) = (&tiles[a], &tiles[b]);
                let mut out = vec![0.0; 64];
                for r in 0..8 {
                    for c in 0..*cols {
                        let start = if !diagonal || r == c { fill.value.as_f64() } else { 0.0 };
                        let sum = (0..*k).fold(start, |s, i| s + ta[r * k + i] * tb[i * cols + c]);
                        out[if *transpose { c * 8 + r } else { r * 8 + c }] = sum;
                    }
                }
                return out;
            }
            _ => {}
        }
    }
    panic!("no quantized matrix product")
}

/// Some matrix phases load an operand with `MatrixLoadQuantized` (both
/// codes, the quantized tile on both sides); those kernels run clean under
/// the sanitizer, with the same outputs as without it, and every SIMD group's
/// `mat_out` holds the product a plain-Rust reference computes.
#[test]
fn quantized_matrix_cases_match_a_reference() {
    let loads_quantized = |e: &enigma_ir::Expr| e.any(&mut |x| matches!(x, enigma_ir::Expr::MatrixLoadQuantized { .. }));
    let quantized: Vec<KernelCase> = (0..400)
        .map(testgen::case)
        .filter(|c| c.kernel.body.iter().any(|s| s.kind.exprs().into_iter().any(loads_quantized)))
        .collect();
    assert!(quantized.len() >= 8, "{} of 400 cases load a quantized tile", quantized.len());
    let texts: Vec<String> = quantized.iter().map(|c| print(&c.kernel)).collect();
    for wanted in ["simdgroup_load_int4", "simdgroup_load_fp4", "simdgroup_multiply_accumulate(mq", "simdgroup_multiply_accumulate(mh"] {
        assert!(texts.iter().any(|t| t.contains(wanted)), "no case has {wanted}");
    }
    for case in &quantized {
        let sanitized = run(case, true).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(case.compare_outputs(&sanitized, &run(case, false).unwrap()), Ok(()));
        let want = quantized_reference(case);
        let at = case
            .args
            .iter()
            .zip(&case.kernel.params)
            .filter(|(a, _)| matches!(a, CaseArg::Output { .. } | CaseArg::Texture { data: None, .. }))
            .position(|(_, p)| p.name == "mat_out");
        let got = &sanitized[at.expect("a mat_out output")];
        for (g, region) in got.chunks(64).enumerate() {
            let region: Vec<f64> = region.iter().map(|&w| f32::from_bits(w) as f64).collect();
            assert_eq!(region, want, "SIMD group {g}\n{}", print(&case.kernel));
        }
    }
}

/// The per-thread-array phase appears, filled in an unrolled loop; such
/// kernels run clean under the sanitizer (every element read was written),
/// and what the array holds reaches the outputs in some of them.
#[test]
fn thread_array_cases_run_clean_and_unroll() {
    let cases: Vec<KernelCase> = (0..48).map(testgen::case).filter(|c| !c.kernel.thread_arrays.is_empty()).collect();
    assert!(cases.len() >= 8, "{} of 48 cases have a per-thread array", cases.len());
    let mut read = 0;
    for case in &cases {
        let text = print(&case.kernel);
        assert!(text.contains("thread ta: ") && text.contains(") unroll {"), "{text}");
        read += text.contains("ta[(") as usize;
        let sanitized = run(case, true).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(case.compare_outputs(&sanitized, &run(case, false).unwrap()), Ok(()));
    }
    assert!(read > 0, "no case reads its per-thread array");
}
