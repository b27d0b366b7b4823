//! The quantized matmul (`enigma_ops::qmatmul`, FP4 and INT4 weights in seed
//! 002's layout, f16 `A` and `C`) on a CUDA GPU at decode shapes, for
//! `bench/qmatmul_vs_torch.py`. Prints one JSON object. `--formats
//! mlx_affine` times MLX's affine format on its decode kernel
//! (`qmatmul_affine`: there `--cols` is columns per SIMD group, `--words`
//! packed words per lane and load (1, 2 or 4), K is never split) and, with
//! `--variants coop`, on the cooperative kernel; no other tensor-core run
//! is added for it.
//!
//! For each format and M it quantizes one random `K × N` matrix, uploads
//! enough copies of it that together they are at least four times the L2
//! cache (an H100 has 50 MB), and times every threadgroup size × columns per
//! thread asked for: each timed call reads the next copy, so the weights
//! come from DRAM as in a model's decode step (`hot_median_us` is the same
//! kernel re-reading one copy, from L2). Also swept: packed words per loop
//! iteration (`--words`; those that do not divide the group's are skipped)
//! and how many ways K is split over threadgroups (`--splits`, each
//! `Options::k_splits`: `auto` for the library's default,
//! `qmatmul::default_splits`, or a count from 1 up to K / group; each row
//! prints the count that ran as `splits`) and, for FP4/INT4, the chunks
//! staged ahead by asynchronous copies (`--stages`, `QmatmulOptions::stages`:
//! `auto` for the default, 0: the register prefetch). Each configuration is first
//! checked against the f64 product of `A` and the dequantised weights.
//!
//! `--variants` picks the kernels: `decode` (the sweep above), `separate`
//! (the tensor-core kernel with B staged in threadgroup memory,
//! `Ops::qmatmul_tiled`, at any M, once per tile of `--separate-tiles`
//! (`auto`: its default for M, or `TMxTNx32/ROWSxCOLS`) and stage count of
//! `--stages` (`auto`: two where they fit), and split of `--splits`) and `fused` (seed 002's fused kernel, `Ops::qmatmul_fused`, at any
//! M, once per tile of `--fused-tiles`: `auto` for seed 002 §9.1's tile for
//! M, or `TMxTNxTK/ROWSxCOLS` such as the seed's `64x64x32/2x2`,
//! `128x64x16/4x1`, `32x128x32/1x4`, `128x128x16/2x2`; its default split,
//! or each count of `--splits`), and `fragments` (the same weights packed in
//! fragment order, `QuantizedWeights::upload_in`, through `Ops::qmatmul`:
//! up to `qmatmul_fragments::DECODE_ROWS` rows the decode row
//! `qmatmul_fragments` with the splits of
//! `--splits`, above them the separate kernel with the tiles, stages and
//! splits of `separate`), and `coop` (the quantized GEMM on cooperative
//! tensors, `qgemm_cooperative`, which `Ops::qmatmul` runs when
//! `GemmOptions::cooperative` asks for it: at any M, its tile for M and
//! the device or each of `--coop-tiles`, once per stage count of
//! `--stages` and split of `--splits`), and `coop_fragments` (the same on
//! weights in fragment order). Each row names its `variant` (and for
//! `separate`, `fused`, `fragments` and the `coop` ones its `tile`).
//! `--split-sum kernel|reduction` has the kernels (the decode kernel's and
//! the tensor-core ones') sum their K splits themselves
//! (`Options::split_sum`, one dispatch) or leave them to the reduction's
//! second dispatch; without it each takes its default.
//! Times are medians of `repeats` CUDA-event device times of a call's
//! dispatches (with K split, the kernel and the reduction) run back to back
//! in a held batch (`Runtime::begin_held_batch`: the device starts them only
//! once the host has queued them, so the host's launch latency is not in the
//! time). `launched_median_us` is the older figure: each dispatch timed on
//! its own, from its start event, which includes the launch latency.
//!
//! Usage (on a CUDA machine; every flag is optional):
//!
//! ```text
//! qmatmul_cuda [--m 1,16] [--n 11008] [--k 4096] [--group 128] [--formats fp4,int4]
//!              [--threads 128,256,512,1024] [--cols 1,2,4] [--words 4,8,16]
//!              [--splits auto,1,2,4] [--copies N] [--repeats 50]
//!              [--variants decode,separate,fused,fragments,coop,coop_fragments] [--fused-tiles auto]
//!              [--separate-tiles auto] [--coop-tiles auto] [--stages auto,2,3] [--split-sum reduction|kernel]
//!              [--tile-copies auto,off,on]
//! ```
//!
//! `--fragment-blocking`: the `fragments` runs' decode row (up to
//! `qmatmul_fragments::DECODE_ROWS` rows) with threads, rows per
//! threadgroup and K steps per iteration fixed, each `auto` (the
//! selection's) or letters with numbers: `t128r16s2` is 128 threads,
//! 16-row tiles and 2 steps (any may be left out).
//!
//! `--tile-copies`: the `coop` runs with their operands staged by each
//! thread's asynchronous copies (`off`), by tile copies (`on`: the tensor
//! copy engine), or as the selection chooses (`auto`).
//!
//! For example, the separate and the fused kernel at M = 16 and 64, the
//! fused one on §9.1's tile and on 64×64×32:
//!
//! ```text
//! qmatmul_cuda --m 16,64 --variants separate,fused --fused-tiles auto,64x64x32/2x2
//! ```
//!
//! For example, the kernel on cooperative tensors beside the separate one
//! at M = 16, 64 and 128:
//!
//! ```text
//! qmatmul_cuda --m 16,64,128 --variants separate,coop
//! ```
//!
//! For example, the split sweep at M = 1 on an H100:
//!
//! ```text
//! qmatmul_cuda --m 1 --threads 128,256 --cols 1,2,4 --words 8 --splits auto,1,2,3,4,6,8
//! ```

use enigma_ir::Scalar;
use enigma_kernels::library::{qmatmul, qmatmul_affine};
use enigma_ops::{download, quant, upload, DType, GemmOptions, GemmTile, Ops, Options, QmatmulOptions, QuantLayout, QuantizedWeights, SplitSum};
use std::time::Duration;

/// The bytes the copies of the weights must span together (4 × 50 MB).
const ROTATION_BYTES: usize = 200 << 20;

/// One decode-kernel configuration of the sweep: threads, columns per
/// thread, packed words per iteration, K splits asked for (`None`: auto),
/// chunks staged ahead (`None`: auto).
type Config = (u32, u32, u32, Option<u32>, Option<u32>);

/// One timed run: a decode-kernel configuration, the separate tensor-core
/// kernel, or the fused one on a tile (`None`: seed 002 §9.1's for M) with
/// K splits asked for (`None`: its default).
#[derive(Clone, Copy)]
enum Run {
    Decode(Config),
    Separate(Option<GemmTile>, Option<u32>, Option<u32>),
    Fused(Option<GemmTile>, Option<u32>),
    /// The separate kernel on weights in fragment order (`Ops::qmatmul`),
    /// and on them the decode row's blocking.
    Fragments(Option<GemmTile>, Option<u32>, Option<u32>, FragmentSpec),
    /// The quantized GEMM on cooperative tensors with the tile, stages, K
    /// splits and staging asked for (`None`: auto), on weights in fragment
    /// order where the last is true.
    Coop(Option<GemmTile>, Option<u32>, Option<u32>, Option<bool>, bool),
}

impl Run {
    /// The `variant` a row names.
    fn variant(&self) -> &'static str {
        match self {
            Run::Decode(_) => "decode",
            Run::Separate(..) => "separate",
            Run::Fused(..) => "fused",
            Run::Fragments(..) => "fragments",
            Run::Coop(.., false) => "coop",
            Run::Coop(.., true) => "coop_fragments",
        }
    }
}

/// The fragment decode row's threads, rows per threadgroup and K steps
/// per iteration asked for (`None`: the selection's).
#[derive(Clone, Copy, Default)]
struct FragmentSpec {
    threads: Option<u32>,
    rows: Option<u32>,
    steps: Option<u32>,
}

impl FragmentSpec {
    /// `auto`, or letters each followed by a number: `t` threads, `r`
    /// rows, `s` steps (`t128r16s2`, `r8`).
    fn parse(text: &str) -> FragmentSpec {
        let mut spec = FragmentSpec::default();
        if text == "auto" {
            return spec;
        }
        let mut rest = text;
        while let Some(letter) = rest.chars().next() {
            if !['t', 'r', 's'].contains(&letter) {
                usage_error(&format!("--fragment-blocking: `{letter}` in `{text}` is not t, r or s"));
            }
            let digits = rest[1..].find(|c: char| !c.is_ascii_digit()).map_or(rest.len(), |i| i + 1);
            let value: u32 = rest[1..digits].parse().unwrap_or_else(|_| usage_error(&format!("--fragment-blocking: `{text}` needs a number after `{letter}`")));
            match letter {
                't' => spec.threads = Some(value),
                'r' => spec.rows = Some(value),
                _ => spec.steps = Some(value),
            }
            rest = &rest[digits..];
        }
        spec
    }

    fn name(&self) -> String {
        let part = |letter: char, v: Option<u32>| v.map_or(String::new(), |v| format!("{letter}{v}"));
        let name = format!("{}{}{}", part('t', self.threads), part('r', self.rows), part('s', self.steps));
        if name.is_empty() { "auto".to_string() } else { name }
    }
}

struct Args {
    m: Vec<usize>,
    n: usize,
    k: usize,
    group: usize,
    formats: Vec<quant::Format>,
    threads: Vec<u32>,
    cols: Vec<u32>,
    words: Vec<u32>,
    /// `Options::k_splits` to sweep (`None`: the default).
    splits: Vec<Option<u32>>,
    copies: Option<usize>,
    repeats: usize,
    /// `decode`, `separate`, `fused`, `fragments`, `coop`: the kernels timed.
    variants: Vec<String>,
    /// The fused kernel's tiles (`None`: `auto`).
    fused_tiles: Vec<Option<GemmTile>>,
    /// The separate kernel's tiles (`None`: `auto`).
    separate_tiles: Vec<Option<GemmTile>>,
    /// Tiles of the `coop` runs (`None`: the selection's).
    coop_tiles: Vec<Option<GemmTile>>,
    /// The separate kernel's stage counts (`None`: `auto`).
    stages: Vec<Option<u32>>,
    /// Who sums the tensor-core kernels' K splits (`None`: the default).
    split_sum: Option<SplitSum>,
    /// The `coop` runs' staging: tile copies or not (`None`: the selection's).
    tile_copies: Vec<Option<bool>>,
    /// The `fragments` runs' decode-row blockings.
    fragment_blocking: Vec<FragmentSpec>,
}

/// A list of tiles: `auto` (`None`) or `TMxTNxTK/ROWSxCOLS`.
fn tiles(flag: &str, value: &str) -> Vec<Option<GemmTile>> {
    value.split(',').map(|t| if t.trim() == "auto" { None } else { Some(t.trim().parse().unwrap_or_else(|e| usage_error(&format!("{flag}: {e}")))) }).collect()
}

fn list<T: std::str::FromStr>(flag: &str, text: &str) -> Vec<T> {
    text.split(',').map(|p| p.trim().parse().unwrap_or_else(|_| usage_error(&format!("{flag}: `{p}` is not a number")))).collect()
}

/// The flags, for `--help` and after a bad command line.
const USAGE: &str = "usage: qmatmul_cuda [--m 1,16] [--n 11008] [--k 4096] [--group 128] [--formats fp4,int4,mlx_affine] \
[--threads …] [--cols …] [--words …] [--splits auto,2,…] [--copies N] [--repeats N] [--variants decode,separate,fused,fragments,coop,coop_fragments] \
[--separate-tiles auto,TMxTNxTK/RxC] [--coop-tiles auto,TMxTNx64/RxC] [--stages auto,2,…] [--fused-tiles auto,TMxTNxTK/RxC] [--split-sum reduction|kernel] [--tile-copies auto,off,on] [--fragment-blocking auto,t128r16s2,…]
(the header of bench/src/bin/qmatmul_cuda.rs says what each does)";

/// Prints `message` and the flags to stderr and exits with status 2.
fn usage_error(message: &str) -> ! {
    eprintln!("qmatmul_cuda: {message}\n{USAGE}");
    std::process::exit(2)
}

fn parse_args() -> Args {
    let mut a = Args {
        m: vec![1, 16],
        n: 11008,
        k: 4096,
        group: 128,
        formats: vec![quant::Format::Fp4, quant::Format::Int4],
        threads: vec![128, 256, 512, 1024],
        cols: vec![1, 2, 4],
        words: vec![4, 8, 16],
        splits: vec![None],
        copies: None,
        repeats: 50,
        variants: vec!["decode".to_string(), "separate".to_string()],
        fused_tiles: vec![None],
        separate_tiles: vec![None],
        coop_tiles: vec![None],
        stages: vec![None],
        split_sum: None,
        tile_copies: vec![None],
        fragment_blocking: vec![FragmentSpec::default()],
    };
    let argv: Vec<String> = std::env::args().skip(1).collect();
    if argv.iter().any(|a| a == "--help" || a == "-h") {
        println!("{USAGE}");
        std::process::exit(0);
    }
    for pair in argv.chunks(2) {
        let (flag, value) = (pair[0].as_str(), pair.get(1).map(String::as_str).unwrap_or_else(|| usage_error(&format!("{} needs a value", pair[0]))));
        match flag {
            "--m" => a.m = list(flag, value),
            "--n" => a.n = list(flag, value)[0],
            "--k" => a.k = list(flag, value)[0],
            "--group" => a.group = list(flag, value)[0],
            "--formats" => a.formats = value.split(',').map(|f| quant::Format::parse(f).unwrap_or_else(|e| usage_error(&e.to_string()))).collect(),
            "--threads" => a.threads = list(flag, value),
            "--cols" => a.cols = list(flag, value),
            "--words" => a.words = list(flag, value),
            "--splits" => a.splits = value.split(',').map(|p| if p.trim() == "auto" { None } else { Some(list(flag, p)[0]) }).collect(),
            "--copies" => a.copies = Some(list(flag, value)[0]),
            "--repeats" => a.repeats = list::<usize>(flag, value)[0].max(1),
            "--variants" => {
                a.variants = value.split(',').map(|v| v.trim().to_string()).collect();
                if let Some(v) = a.variants.iter().find(|v| !["decode", "separate", "fused", "fragments", "coop", "coop_fragments"].contains(&v.as_str())) {
                    usage_error(&format!("--variants: `{v}` is not decode, separate, fused, fragments, coop or coop_fragments"));
                }
            }
            "--separate-tiles" => a.separate_tiles = tiles(flag, value),
            "--coop-tiles" => a.coop_tiles = tiles(flag, value),
            "--stages" => a.stages = value.split(',').map(|s| if s.trim() == "auto" { None } else { Some(list::<u32>(flag, s)[0]) }).collect(),
            "--fused-tiles" => a.fused_tiles = tiles(flag, value),
            "--fragment-blocking" => a.fragment_blocking = value.split(',').map(|v| FragmentSpec::parse(v.trim())).collect(),
            "--tile-copies" => {
                a.tile_copies = value
                    .split(',')
                    .map(|v| match v.trim() {
                        "auto" => None,
                        "on" => Some(true),
                        "off" => Some(false),
                        other => usage_error(&format!("--tile-copies: `{other}` is not auto, on or off")),
                    })
                    .collect()
            }
            "--split-sum" => {
                a.split_sum = Some(match value {
                    "reduction" => SplitSum::Reduction,
                    "kernel" => SplitSum::LastThreadgroup,
                    other => usage_error(&format!("--split-sum: `{other}` is not reduction or kernel")),
                })
            }
            other => usage_error(&format!("unknown flag {other}")),
        }
    }
    a
}


fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn main() {
    let args = parse_args();
    let Some(rt) = enigma_bench::cuda_runtime_or_skip() else { return };
    let (n, k, group) = (args.n, args.k, args.group);
    let mut rows = vec![];
    for &format in &args.formats {
        eprintln!("{format}: quantizing {k} x {n}, group {group}");
        let q = enigma_ops::quantize_weights(format, &enigma_kernels::test_data(k * n, 1), k, n, group).unwrap_or_else(|e| panic!("{e}"));
        let w = enigma_ops::dequantize_weights(&q).unwrap_or_else(|e| panic!("{e}"));
        let weight_bytes = k * n / 2 + k / group * n * 2 * if format.has_biases() { 2 } else { 1 };
        let copies = args.copies.unwrap_or(ROTATION_BYTES.div_ceil(weight_bytes)).max(1);
        let weights: Vec<QuantizedWeights> = (0..copies).map(|_| QuantizedWeights::upload(&rt, &q).unwrap_or_else(|e| panic!("{e}"))).collect();
        // The same weights in fragment order, where that variant runs.
        let fragment_weights: Vec<QuantizedWeights> = match args.variants.iter().any(|v| v == "fragments" || v == "coop_fragments") && !format.has_biases() {
            true => (0..copies).map(|_| QuantizedWeights::upload_in(&rt, &q, QuantLayout::Fragments).unwrap_or_else(|e| panic!("{e}"))).collect(),
            false => vec![],
        };
        for &m in &args.m {
            let mut a = enigma_kernels::test_data(m * k, 2 + m as u64);
            enigma_ops::quantize(DType::F16, &mut a);
            let ab = upload(&rt, Scalar::F16, &a).unwrap_or_else(|e| panic!("{e}"));
            eprintln!("{format} m={m}: f64 reference");
            let want = qmatmul::reference(&a, &w, m, n, k);
            let levels = 2.0 * ((k + 2) as f64).log2() + 4.0;
            // Per element: the sum of |products| (for MLX's affine format
            // of |scale · code · a| + |bias · a|, which its kernel sums
            // apart), and the bound with no staging rounding; the
            // tensor-core kernels add one f16 rounding of each dequantized
            // weight (|products| · 2^-11), the decode kernel its f16
            // partial sums (`qmatmul::kernel_product_error`).
            let abs_sums = q.abs_products(&a, m);
            let bound = |i: usize, kernel: &str| {
                let staging = qmatmul::kernel_product_error(kernel, format);
                abs_sums[i] * (f32::EPSILON as f64 * levels + staging) + want[i].abs() * DType::F16.unit_roundoff() * 1.01 + DType::F16.underflow_error() * 1.01
            };
            let bytes = (m * k * 2 + weight_bytes + m * n * 2) as u64;
            let mut configs = vec![];
            let variant = |v: &str| args.variants.iter().any(|x| x == v);
            for &threads in args.threads.iter().filter(|_| variant("decode")) {
                for &cols in &args.cols {
                    let runs_words = |w: u32| if format.has_biases() { qmatmul_affine::LOAD_WORDS.contains(&w) } else { (group / 8) % w as usize == 0 };
                    for &words in args.words.iter().filter(|&&w| runs_words(w)) {
                        // MLX's affine kernel has no stages.
                        let stage_counts = if format.has_biases() { vec![None] } else { args.stages.clone() };
                        for stages in stage_counts {
                            configs.extend(args.splits.iter().map(|&splits| (threads, cols, words, splits, stages)));
                        }
                    }
                }
            }
            // Above 8 rows the separate tensor-core kernel (`qgemm_*`,
            // through `Ops::qmatmul_tiled`, its default split) runs too,
            // and at any M the fused one (`qgemm_fused_*`) on each tile
            // and split asked for; the sweep's options keep the decode
            // kernel.
            let mut runs: Vec<Run> = vec![];
            if !format.has_biases() {
                if variant("separate") {
                    for &tile in &args.separate_tiles {
                        for &stages in &args.stages {
                            runs.extend(args.splits.iter().map(|&splits| Run::Separate(tile, stages, splits)));
                        }
                    }
                }
                if variant("fragments") {
                    for &tile in &args.separate_tiles {
                        for &stages in &args.stages {
                            for &spec in &args.fragment_blocking {
                                runs.extend(args.splits.iter().map(|&splits| Run::Fragments(tile, stages, splits, spec)));
                            }
                        }
                    }
                }
                if variant("fused") {
                    for &tile in &args.fused_tiles {
                        runs.extend(args.splits.iter().map(|&splits| Run::Fused(tile, splits)));
                    }
                }
            }
            // The cooperative kernel takes every format (MLX's affine in its
            // own columns, never in fragment order).
            for fragments in [false, true] {
                if !variant(if fragments { "coop_fragments" } else { "coop" }) || (fragments && format.has_biases()) {
                    continue;
                }
                for &tile in &args.coop_tiles {
                    for &stages in &args.stages {
                        for &tile_copies in &args.tile_copies {
                            runs.extend(args.splits.iter().map(|&splits| Run::Coop(tile, stages, splits, tile_copies, fragments)));
                        }
                    }
                }
            }
            runs.extend(configs.into_iter().map(Run::Decode));
            for run in runs {
                let options = match run {
                    // MLX's affine kernel: columns per SIMD group and words per load.
                    Run::Decode((threads, cols, words, k_splits, _)) if format.has_biases() => Options { threads: Some(threads), qmatmul: QmatmulOptions { columns_per_simdgroup: Some(cols), words_per_load: Some(words), ..QmatmulOptions::default() }, gemm: GemmOptions { k_splits, ..GemmOptions::default() }, ..Options::default() },
                    Run::Decode((threads, cols, words, k_splits, stages)) => Options { threads: Some(threads), qmatmul: QmatmulOptions { columns_per_thread: Some(cols), words_per_iteration: Some(words), stages, ..QmatmulOptions::default() }, gemm: GemmOptions { k_splits, split_sum: args.split_sum, ..GemmOptions::default() }, ..Options::default() },
                    Run::Separate(gemm_tile, stages, k_splits) => Options { gemm: GemmOptions { tile: gemm_tile, stages, k_splits, split_sum: args.split_sum, ..GemmOptions::default() }, ..Options::default() },
                    Run::Fragments(gemm_tile, stages, k_splits, spec) => Options {
                        gemm: GemmOptions { tile: gemm_tile, stages, k_splits, split_sum: args.split_sum, ..GemmOptions::default() },
                        qmatmul: QmatmulOptions { rows_per_threadgroup: spec.rows, k_steps_per_iteration: spec.steps, ..QmatmulOptions::default() },
                        threads: spec.threads,
                        ..Options::default()
                    },
                    Run::Fused(gemm_tile, k_splits) => Options { gemm: GemmOptions { tile: gemm_tile, k_splits, ..GemmOptions::default() }, ..Options::default() },
                    Run::Coop(tile, stages, k_splits, tile_copies, _) => Options { gemm: GemmOptions { cooperative: Some(true), tile, stages, k_splits, split_sum: args.split_sum, tile_copies }, ..Options::default() },
                };
                let ops = Ops::new(&rt).with_options(options);
                let (threads, cols, words, asked) = match run {
                    Run::Decode((threads, cols, words, splits, _)) => (threads, cols, words, splits),
                    Run::Separate(_, _, splits) | Run::Fragments(_, _, splits, _) => (0, 0, 0, splits),
                    Run::Fused(_, splits) => (0, 0, 0, splits),
                    Run::Coop(_, _, splits, ..) => (0, 0, 0, splits),
                };
                let asked = asked.map_or_else(|| "auto".to_string(), |s| s.to_string());
                let mut base = serde_json::json!({ "variant": run.variant(), "format": format.name(), "m": m, "n": n, "k": k, "group": group, "threads": threads, "cols": cols, "words": words, "splits_asked": asked });
                if let Run::Fused(tile, _) | Run::Separate(tile, _, _) | Run::Fragments(tile, _, _, _) | Run::Coop(tile, ..) = run {
                    base["tile"] = tile.map_or_else(|| "auto".to_string(), |t| t.to_string()).into();
                }
                if let Run::Fragments(_, _, _, spec) = run {
                    base["fragment_blocking"] = spec.name().into();
                }
                if let Run::Separate(_, stages, _) | Run::Fragments(_, stages, _, _) | Run::Decode((_, _, _, _, stages)) | Run::Coop(_, stages, ..) = run {
                    base["stages_asked"] = stages.map_or_else(|| "auto".to_string(), |s| s.to_string()).into();
                }
                let copies_of_run = if let Run::Fragments(..) | Run::Coop(.., true) = run { &fragment_weights } else { &weights };
                let call = |w: &QuantizedWeights| match run {
                    Run::Decode(_) | Run::Fragments(..) | Run::Coop(..) => ops.qmatmul(&ab, w, m, DType::F16),
                    Run::Separate(..) => ops.qmatmul_tiled(&ab, w, m, DType::F16),
                    Run::Fused(..) => ops.qmatmul_fused(&ab, w, m, DType::F16),
                };
                let first = match call(&copies_of_run[0]) {
                    Ok(c) => c,
                    Err(e) => {
                        let mut row = base;
                        row["error"] = e.to_string().into();
                        rows.push(row);
                        continue;
                    }
                };
                // The kernel, then with K split the reduction; the kernel's
                // grid z is its split count (the batch is 1).
                let launches = ops.take_launches();
                let launch = &launches[0];
                let splits = launch.dispatch.size[2];
                let kernels: Vec<&str> = launches.iter().map(|l| l.kernel.as_str()).collect();
                let got = download(&first, Scalar::F16, m * n).unwrap_or_else(|e| panic!("{e}"));
                let failures = got.iter().zip(&want).enumerate().filter(|(i, (g, w))| ((*g - *w).abs() > bound(*i, &launch.kernel)) || g.is_nan()).count();
                let max_abs_error = got.iter().zip(&want).map(|(g, w)| (g - w).abs()).fold(0.0, f64::max);
                // Held: each call in a batch the device starts only once the
                // host has queued it (`Runtime::begin_held_batch`), so the
                // time is the dispatches' own, back to back. Launched: the
                // dispatches' own device times summed, each from the start
                // event to its end, which includes the host's launch latency.
                let time = |rotate: bool, held: bool| -> Duration {
                    let mut times = vec![];
                    for i in 0..5 + args.repeats {
                        let copy = if rotate { &copies_of_run[i % copies] } else { &copies_of_run[0] };
                        if held {
                            rt.begin_held_batch(enigma_ops::BENCH_HOLD).unwrap_or_else(|e| panic!("{e}"));
                        }
                        call(copy).unwrap_or_else(|e| panic!("{e}"));
                        let launches = ops.take_launches();
                        let batch = if held { rt.end_batch().unwrap_or_else(|e| panic!("{e}")) } else { None };
                        if i >= 5 {
                            times.push(batch.unwrap_or_else(|| launches.iter().map(|l| l.report.device_time.unwrap_or(l.report.wall_time)).sum()));
                        }
                    }
                    median(times)
                };
                let cold = time(true, true);
                let hot = time(false, true);
                let launched = time(true, false);
                eprintln!(
                    "{format} m={m} {} {} threads={threads} cols={cols} words={words} splits={splits} (asked {asked}): {:.2} us (hot {:.2} us, launched one by one {:.2} us), {failures} failures",
                    run.variant(),
                    launch.kernel,
                    cold.as_secs_f64() * 1e6,
                    hot.as_secs_f64() * 1e6,
                    launched.as_secs_f64() * 1e6
                );
                let mut row = base;
                let extra = serde_json::json!({
                    "kernel": launch.kernel,
                    "kernels": kernels,
                    "splits": splits,
                    "grid": launch.dispatch.size,
                    "passed": failures == 0,
                    "failures": failures,
                    "max_abs_error": max_abs_error,
                    "device_timed": launches.iter().all(|l| l.report.device_time.is_some()),
                    "median_us": cold.as_secs_f64() * 1e6,
                    "hot_median_us": hot.as_secs_f64() * 1e6,
                    "launched_median_us": launched.as_secs_f64() * 1e6,
                    "bytes": bytes,
                    "tb_per_s": bytes as f64 / cold.as_secs_f64() / 1e12,
                });
                for (key, v) in extra.as_object().into_iter().flatten() {
                    row[key] = v.clone();
                }
                rows.push(row);
            }
        }
    }
    let out = serde_json::json!({ "device": rt.device().name, "rotation_bytes": ROTATION_BYTES, "rows": rows });
    println!("{out}");
}
