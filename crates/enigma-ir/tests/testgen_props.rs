//! Properties of the random kernel generator and of the text and JSON forms
//! over its kernels: every generated kernel validates and round-trips; the
//! parser returns `Ok` or `Err` (never panics) on mutated and truncated text,
//! and whatever it accepts prints and parses back the same. The simulator
//! runs the same kernels in `enigma-sim/tests/testgen_runs.rs`.
#![cfg(feature = "testgen")]

use enigma_ir::testgen::{self, arb_case, arb_kernel, CaseArg, GenConfig};
use enigma_ir::text::{parse, print};
use enigma_ir::{from_json, to_json, validate, Kernel, ParamKind, ValidationOptions};
use proptest::prelude::*;

fn config() -> ProptestConfig {
    ProptestConfig { cases: 64, failure_persistence: None, ..ProptestConfig::default() }
}

/// Characters worth inserting: delimiters, operators, quotes, digits, letters.
const NOISE: &[char] = &['(', ')', '{', '}', '[', ']', '"', '\\', '-', '.', ',', ':', ';', '/', '$', '<', '>', '=', '|', '0', '9', 'x', 'e', '\n', ' ', 'é'];

#[derive(Clone, Debug)]
enum Mutation {
    Truncate(usize),
    Delete(usize, usize),
    Insert(usize, char),
    /// Swaps two lines.
    SwapLines(usize, usize),
}

fn mutate(text: &str, mutations: &[Mutation]) -> String {
    let mut chars: Vec<char> = text.chars().collect();
    for m in mutations {
        let n = chars.len().max(1);
        match *m {
            Mutation::Truncate(at) => chars.truncate(at % n),
            Mutation::Delete(at, len) => {
                let at = at % n;
                let end = (at + len).min(chars.len());
                if at < end {
                    chars.drain(at..end);
                }
            }
            Mutation::Insert(at, c) => chars.insert((at % n).min(chars.len()), c),
            Mutation::SwapLines(a, b) => {
                let s: String = chars.iter().collect();
                let mut lines: Vec<&str> = s.split('\n').collect();
                let (a, b) = (a % lines.len(), b % lines.len());
                lines.swap(a, b);
                chars = lines.join("\n").chars().collect();
            }
        }
    }
    chars.into_iter().collect()
}

fn arb_mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        any::<usize>().prop_map(Mutation::Truncate),
        (any::<usize>(), 1usize..12).prop_map(|(a, l)| Mutation::Delete(a, l)),
        (any::<usize>(), proptest::sample::select(NOISE)).prop_map(|(a, c)| Mutation::Insert(a, c)),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Mutation::SwapLines(a, b)),
    ]
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn generated_kernels_validate_and_round_trip(kernel in arb_kernel(GenConfig { textures: true, ..GenConfig::default() })) {
        if let Err(e) = validate(&kernel, &ValidationOptions::default()) {
            panic!("{e}\n{}", print(&kernel));
        }
        let printed = print(&kernel);
        let parsed = parse(&printed).unwrap_or_else(|e| panic!("{e}\n{printed}"));
        prop_assert_eq!(&parsed, &kernel);
        prop_assert_eq!(print(&parsed), printed);
        prop_assert_eq!(from_json(&to_json(&kernel)).unwrap(), kernel);
    }

    #[test]
    fn the_parser_never_panics_on_mutated_text(
        kernel in arb_kernel(GenConfig { max_choices: 128, ..GenConfig::default() }),
        mutations in proptest::collection::vec(arb_mutation(), 1..4),
    ) {
        let text = mutate(&print(&kernel), &mutations);
        match parse(&text) {
            // Whatever parses prints as text that parses to the same print.
            Ok(k) => {
                let again = print(&k);
                let reparsed = parse(&again).unwrap_or_else(|e| panic!("{e}\n{again}"));
                prop_assert_eq!(print(&reparsed), again);
            }
            Err(e) => {
                // The position is inside the text (or just past its end).
                let lines = text.split('\n').count() as u32;
                prop_assert!(e.line >= 1 && e.line <= lines, "{e} ({lines} lines)");
                prop_assert!(e.column >= 1, "{e}");
            }
        }
    }

    #[test]
    fn cases_match_their_kernels(case in arb_case(GenConfig { textures: true, ..GenConfig::default() })) {
        let k = &case.kernel;
        prop_assert_eq!(case.args.len(), k.params.len());
        let threads = case.threads[0];
        prop_assert!(threads % 32 == 0 && threads <= 1024 && case.grid[0] % threads == 0, "{:?} {:?}", case.grid, case.threads);
        for (arg, param) in case.args.iter().zip(&k.params) {
            match (arg, param.kind) {
                (CaseArg::Input { elem, data }, ParamKind::Buffer { elem: ty, .. }) => {
                    prop_assert_eq!(ty.elem(), *elem);
                    prop_assert!(!data.is_empty());
                    // A 16-bit element sits in the low half of its u32.
                    prop_assert!(elem.size_bytes() == 4 || data.iter().all(|w| w >> 16 == 0), "{:?} {:?}", elem, data);
                    prop_assert_eq!(testgen::pack(*elem, data).len(), data.len() * elem.size_bytes() as usize);
                }
                (CaseArg::Output { elem, len }, ParamKind::Buffer { elem: ty, .. }) => {
                    prop_assert_eq!(ty.elem(), *elem);
                    // One or two elements per thread; the cooperative phase's
                    // output holds one m×n tile per SIMD group.
                    let tile = |t: &enigma_ir::CooperativeTensor| case.grid[0] / 32 * t.rows * t.cols;
                    let cooperative = param.name == "coop_out" && k.cooperative_tensors.first().is_some_and(|t| *len == tile(t));
                    prop_assert!(*len == case.grid[0] || *len == 2 * case.grid[0] || cooperative, "{} of {} elements", param.name, len);
                }
                (CaseArg::Value(lit), ParamKind::Value { ty }) => prop_assert_eq!(ty.elem(), lit.ty),
                (CaseArg::Texture { texel, width, height, data }, ParamKind::Texture { texel: t, access }) => {
                    prop_assert_eq!(t, *texel);
                    match data {
                        Some(data) => prop_assert!(access.can_read() && data.len() == (width * height) as usize),
                        None => prop_assert!(access.can_write() && width * height == case.grid[0]),
                    }
                }
                (arg, kind) => prop_assert!(false, "{:?} for {:?}", arg, kind),
            }
        }
    }
}

#[test]
fn case_is_deterministic_and_varied() {
    let kernels: Vec<Kernel> = (0..64).map(|seed| testgen::case(seed).kernel).collect();
    for seed in [0, 7, 63] {
        assert_eq!(testgen::case(seed), testgen::case(seed));
    }
    let distinct: std::collections::HashSet<String> = kernels.iter().map(print).collect();
    assert!(distinct.len() >= 60, "{} distinct kernels of 64", distinct.len());
    // Some use threadgroup memory, loops, SIMD-group functions and the float classifications.
    let texts: Vec<String> = kernels.iter().map(print).collect();
    for needle in ["threadgroup_barrier", "for ", "simd_", "while ", "dim_check(", "isnan(", "isinf(", "isfinite("] {
        assert!(texts.iter().any(|t| t.contains(needle)), "no kernel has {needle}");
    }
    for k in &kernels {
        validate(k, &ValidationOptions::default()).unwrap_or_else(|e| panic!("{e}\n{}", print(k)));
    }
}

#[test]
fn integer_only_cases_have_no_floats() {
    let cfg = GenConfig { floats: false, ..GenConfig::default() };
    for seed in 0..64 {
        let case = testgen::case_with(&cfg, seed);
        let json = to_json(&case.kernel);
        for float in ["\"f32\"", "\"f16\"", "\"bf16\"", "\"float\""] {
            assert!(!json.contains(float), "seed {seed}: {float} in\n{}", print(&case.kernel));
        }
        validate(&case.kernel, &ValidationOptions::default()).unwrap();
    }
}
