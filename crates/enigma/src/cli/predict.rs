//! `enigma predict`: the roofline prediction of a library operation at one
//! shape on catalogue devices (by default the M4 Max and the M5): the bytes
//! it must move and the FLOPs it must do, at the device's peak bandwidth and
//! FP16 throughput (`enigma_analysis::roofline`). A model, not a
//! measurement; a roof whose figure the catalogue lacks prints as unknown.
//!
//! Exit status: 0, or 2 on errors (a bad shape, an unknown device).

use std::process::ExitCode;

use enigma_analysis::roofline::{predict, Precision, Roof, RooflinePrediction, Workload};
use enigma_analysis::text::number;
use enigma_analysis::tiles::WeightFormat;

use super::common::{self, print_table};

/// The operation on the command line.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    /// `C = A·B`: --shape M,N,K or B,M,N,K (batched).
    Gemm,
    /// 4-bit weights (--weights, --group): --shape M,N,K.
    Qmatmul,
    /// `y = W·x`: --shape ROWS,COLS.
    Gemv,
    /// One decode step: --shape B,HQ,HKV,KEYS,D.
    AttentionDecode,
    /// Attention over a sequence: --shape B,HQ,HKV,SQ,SKV,D (--causal).
    AttentionPrefill,
}

/// Element type on the command line.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dtype {
    F16,
    Bf16,
    F32,
}

/// 4-bit weight format on the command line.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Weights {
    Int4,
    Fp4,
}

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The operation.
    #[arg(value_enum)]
    pub operation: Operation,
    /// Its shape, comma-separated (see each operation).
    #[arg(long)]
    pub shape: String,
    /// Element type of the inputs (and of C for gemm; qmatmul is always f16).
    #[arg(long, value_enum, default_value_t = Dtype::F16)]
    pub dtype: Dtype,
    /// gemm: write C in f32 instead of the input's type.
    #[arg(long)]
    pub f32_output: bool,
    /// qmatmul: the weights' format.
    #[arg(long, value_enum, default_value_t = Weights::Int4)]
    pub weights: Weights,
    /// qmatmul: K values per scale.
    #[arg(long, default_value_t = 128)]
    pub group: u64,
    /// attention-prefill: the causal (top-left) mask.
    #[arg(long)]
    pub causal: bool,
    /// Catalogue devices, comma-separated.
    #[arg(long, default_value = "m4-max,m5")]
    pub devices: String,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `--shape`: `count` positive integers.
fn dims(shape: &str, names: &[&str]) -> anyhow::Result<Vec<u64>> {
    let parts: Vec<&str> = shape.split([',', 'x', 'X', '×']).map(str::trim).collect();
    anyhow::ensure!(parts.len() == names.len(), "--shape `{shape}` has {} dimensions; expected {} ({})", parts.len(), names.len(), names.join(","));
    parts
        .iter()
        .zip(names)
        .map(|(p, name)| match p.parse::<u64>() {
            Ok(0) => anyhow::bail!("--shape `{shape}`: {name} = 0; every dimension must be at least 1"),
            Ok(v) if v > u64::from(u32::MAX) => anyhow::bail!("--shape `{shape}`: {name} = {v} is above 2^32 - 1"),
            Ok(v) => Ok(v),
            Err(e) => anyhow::bail!("--shape `{shape}`: `{p}` ({name}) is not a count: {e}"),
        })
        .collect()
}

/// The workload the arguments describe.
pub fn workload(args: &Args) -> anyhow::Result<Workload> {
    let precision = if args.dtype == Dtype::F32 { Precision::Single } else { Precision::Half };
    Ok(match args.operation {
        Operation::Gemm => {
            let d = match args.shape.split([',', 'x', 'X', '×']).count() {
                4 => dims(&args.shape, &["B", "M", "N", "K"])?,
                _ => [vec![1], dims(&args.shape, &["M", "N", "K"])?].concat(),
            };
            let output = if args.f32_output { Precision::Single } else { precision };
            Workload::Gemm { batch: d[0], m: d[1], n: d[2], k: d[3], input: precision, output }
        }
        Operation::Qmatmul => {
            anyhow::ensure!(args.dtype != Dtype::F32, "qmatmul takes f16 activations (--dtype f16)");
            let d = dims(&args.shape, &["M", "N", "K"])?;
            anyhow::ensure!(args.group > 0 && d[2] % args.group == 0, "--group {} must divide K = {}", args.group, d[2]);
            let weights = match args.weights {
                Weights::Int4 => WeightFormat::Int4U4B8,
                Weights::Fp4 => WeightFormat::Fp4E2M1,
            };
            Workload::QuantMatmul { m: d[0], n: d[1], k: d[2], group: args.group, weights }
        }
        Operation::Gemv => {
            let d = dims(&args.shape, &["ROWS", "COLS"])?;
            Workload::Gemv { rows: d[0], cols: d[1], weights: precision }
        }
        Operation::AttentionDecode => {
            let d = dims(&args.shape, &["B", "HQ", "HKV", "KEYS", "D"])?;
            anyhow::ensure!(d[1] % d[2] == 0, "HQ = {} is not a multiple of HKV = {}", d[1], d[2]);
            Workload::AttentionDecode { batch: d[0], q_heads: d[1], kv_heads: d[2], keys: d[3], d: d[4], precision }
        }
        Operation::AttentionPrefill => {
            let d = dims(&args.shape, &["B", "HQ", "HKV", "SQ", "SKV", "D"])?;
            anyhow::ensure!(d[1] % d[2] == 0, "HQ = {} is not a multiple of HKV = {}", d[1], d[2]);
            Workload::AttentionPrefill { batch: d[0], q_heads: d[1], kv_heads: d[2], q_len: d[3], kv_len: d[4], d: d[5], causal: args.causal, precision }
        }
    })
}

fn micros(seconds: Option<f64>) -> String {
    seconds.map_or_else(|| "unknown".to_string(), |s| number(s * 1e6, 1))
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let workload = workload(&args)?;
    let predictions: Vec<RooflinePrediction> = args
        .devices
        .split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .map(|d| common::device(d).map(|spec| predict(&spec, workload)))
        .collect::<anyhow::Result<_>>()?;
    anyhow::ensure!(!predictions.is_empty(), "--devices names no device");
    if args.json {
        println!("{}", serde_json::to_string_pretty(&predictions)?);
        return Ok(ExitCode::SUCCESS);
    }
    let first = &predictions[0];
    println!(
        "{}: {} MB moved at least, {} GFLOP, {} FLOPs/byte",
        clap::ValueEnum::to_possible_value(&args.operation).map_or_else(String::new, |v| v.get_name().to_string()),
        number(first.bytes / 1e6, 2),
        number(first.flops / 1e9, 3),
        number(first.arithmetic_intensity, 1)
    );
    let rows: Vec<Vec<String>> = predictions
        .iter()
        .map(|p| {
            let predicted = match (p.seconds, p.lower_bound_seconds()) {
                (Some(s), _) => micros(Some(s)),
                (None, Some(bound)) => format!("≥ {}", micros(Some(bound))),
                (None, None) => "unknown".to_string(),
            };
            let roof = match p.roof {
                Roof::Memory => "memory",
                Roof::Compute => "compute",
                Roof::Unknown => "unknown",
            };
            vec![p.device.clone(), micros(p.memory_seconds), micros(p.compute_seconds), predicted, roof.to_string()]
        })
        .collect();
    print_table(&["device", "memory µs", "compute µs", "predicted µs", "roof"], &rows);
    println!("A roofline model (each input read once at the peak bandwidth, the FLOPs at the peak FP16 throughput), not a measurement.");
    Ok(ExitCode::SUCCESS)
}
