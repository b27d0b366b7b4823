//! `enigma info`: the devices this machine can run on (the simulator, and
//! each GPU backend with its limits, features and cooperative-tensor
//! lowering — the one its backend compiles with — or the reason it is
//! unavailable), then the built-in device catalogue; `--catalog` prints the
//! catalogue alone.

use std::process::ExitCode;

use enigma_analysis::catalog;
use enigma_analysis::text::{number, thousands};

use super::common;
use enigma_runtime::{Device, Runtime};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Print only the built-in device catalogue (Apple M1–M4 from the seeds, the M5 from its announcement).
    #[arg(long)]
    pub catalog: bool,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let devices = catalog::all();
    let runtime = if args.catalog { vec![] } else { runtime_devices() };
    if args.json {
        let mut out = serde_json::json!({ "catalog": devices });
        if !args.catalog {
            out["devices"] = serde_json::Value::Array(runtime.iter().map(RuntimeDevice::to_json).collect());
        }
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(ExitCode::SUCCESS);
    }
    if !args.catalog {
        println!("devices on this machine");
        let rows: Vec<Vec<String>> = runtime.iter().map(RuntimeDevice::row).collect();
        common::print_table(&["device", "name", "units", "SIMD", "max TG", "TG memory", "memory"], &rows);
        for d in &runtime {
            match &d.opened {
                Ok(i) => {
                    let features: Vec<&str> = i.features.iter().map(|f| f.describe()).collect();
                    println!("{}: runs {}", d.device, features.join(", "));
                    let lowering = i.cooperative_lowering.map_or("not run on this device", |l| l.describe());
                    println!("{}: cooperative tensors: {lowering}", d.device);
                }
                Err(why) => println!("{}: {why}", d.device),
            }
        }
        println!();
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
    Ok(ExitCode::SUCCESS)
}

/// One runtime device: opened (with what it reports) or unavailable (why).
struct RuntimeDevice {
    device: &'static str,
    opened: Result<enigma_runtime::DeviceInfo, String>,
}

/// Tries every backend this build knows.
fn runtime_devices() -> Vec<RuntimeDevice> {
    [("sim", Device::Sim), ("cuda", Device::Cuda), ("metal", Device::Metal)]
        .into_iter()
        .map(|(device, d)| RuntimeDevice { device, opened: Runtime::new(d).map(|rt| rt.device().clone()).map_err(|e| e.to_string()) })
        .collect()
}

impl RuntimeDevice {
    fn row(&self) -> Vec<String> {
        match &self.opened {
            Ok(i) => vec![
                self.device.to_string(),
                i.name.clone(),
                i.compute_units.to_string(),
                i.simd_width.to_string(),
                i.max_threads_per_threadgroup.to_string(),
                thousands(i.max_threadgroup_memory_bytes),
                i.memory_bytes.map_or("-".to_string(), |m| format!("{} GiB", number(m as f64 / (1u64 << 30) as f64, 1))),
            ],
            Err(_) => vec![self.device.to_string(), "unavailable (below)".to_string(), String::new(), String::new(), String::new(), String::new(), String::new()],
        }
    }

    fn to_json(&self) -> serde_json::Value {
        match &self.opened {
            Ok(i) => serde_json::json!({
                "device": self.device,
                "available": true,
                "kind": i.kind.name(),
                "name": i.name,
                "compute_units": i.compute_units,
                "simd_width": i.simd_width,
                "max_threads_per_threadgroup": i.max_threads_per_threadgroup,
                "max_threadgroup_memory_bytes": i.max_threadgroup_memory_bytes,
                "memory_bytes": i.memory_bytes,
                "features": i.features,
                "cooperative_lowering": i.cooperative_lowering,
            }),
            Err(why) => serde_json::json!({ "device": self.device, "available": false, "reason": why }),
        }
    }
}
