//! `enigma info`: the device catalogue (`--catalog`) and, once the runtime
//! adds it, the devices this machine can run on.

use std::process::ExitCode;

use enigma_analysis::catalog;
use enigma_analysis::text::{number, thousands};

use super::common;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Print the built-in device catalogue (Apple M1–M4 from the seeds).
    #[arg(long)]
    pub catalog: bool,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let devices = catalog::all();
    if args.json {
        println!("{}", serde_json::to_string_pretty(&serde_json::json!({ "catalog": devices }))?);
        return Ok(ExitCode::SUCCESS);
    }
    println!("device catalogue (figures from the seeds; \"-\" where no seed gives one)");
    let opt = |v: Option<f64>, d: usize| v.map_or("-".to_string(), |v| number(v, d));
    let rows: Vec<Vec<String>> = devices
        .iter()
        .map(|d| {
            vec![
                d.id.clone(),
                d.name.clone(),
                d.family.clone().unwrap_or_else(|| "-".to_string()),
                d.cores_label(),
                opt(d.memory_bandwidth_gb_s, 0),
                opt(d.fp16_tflops, 0),
                opt(d.machine_balance(), 1),
                match d.bf16 {
                    Some(true) => "yes".to_string(),
                    Some(false) => "no".to_string(),
                    None => "-".to_string(),
                },
                d.simd_width.to_string(),
                d.max_threads_per_threadgroup.to_string(),
                thousands(u64::from(d.threadgroup_memory_bytes)),
            ]
        })
        .collect();
    common::print_table(
        &["id", "name", "family", "GPU cores", "GB/s", "FP16 TFLOPS", "FLOPs/byte", "bf16", "SIMD", "max TG", "TG memory"],
        &rows,
    );
    println!("core ranges default to the largest configuration; pick another with e.g. `--device m1-max-24`");
    if !args.catalog {
        println!("runtime devices: listing the devices this machine can run on is added by the runtime");
    }
    Ok(ExitCode::SUCCESS)
}
