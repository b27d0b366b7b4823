//! `enigma occupancy`: threadgroups per core for a threadgroup size and its
//! threadgroup memory on a catalogue device, with every bound that applies
//! and which one limits.

use std::process::ExitCode;

use enigma_analysis::occupancy::{self, OccupancyLimiter};
use enigma_analysis::text::{dims, thousands};

use super::common::{self, parse_dims};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Threadgroup memory per threadgroup, in bytes.
    #[arg(long = "tg-memory")]
    pub tg_memory: u32,
    /// Threads per threadgroup: a count or X[,Y[,Z]].
    #[arg(long, value_parser = parse_dims)]
    pub threads: [u32; 3],
    /// Catalogue device.
    #[arg(long, default_value = "m4-max")]
    pub device: String,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

fn bound(b: Option<u32>) -> String {
    b.map_or("no known limit".to_string(), |v| v.to_string())
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let device = common::device(&args.device)?;
    let total = u64::from(args.threads[0]) * u64::from(args.threads[1]) * u64::from(args.threads[2]);
    let threads = u32::try_from(total).map_err(|_| {
        anyhow::anyhow!("threadgroup {} has {} threads, far over any device's maximum", dims(args.threads), thousands(total))
    })?;
    let occ = occupancy::occupancy(&device, threads, args.tg_memory)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&occ)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "occupancy on {} ({} cores): threadgroup of {} threads ({} SIMD groups), {} bytes of threadgroup memory ({:.1} % of {})",
        occ.device,
        occ.cores,
        occ.threads_per_threadgroup,
        occ.simdgroups_per_threadgroup,
        thousands(u64::from(occ.threadgroup_memory_bytes)),
        occ.memory_percent,
        thousands(u64::from(device.threadgroup_memory_bytes)),
    );
    let limiter = |l: OccupancyLimiter| match l {
        OccupancyLimiter::ThreadgroupMemory => "threadgroup memory",
        OccupancyLimiter::Threads => "threads per core",
        OccupancyLimiter::Simdgroups => "SIMD groups per core",
        OccupancyLimiter::ThreadgroupSlots => "threadgroup slots per core",
    };
    let mut pairs = vec![
        (
            "bound by threadgroup memory".to_string(),
            match occ.by_threadgroup_memory {
                Some(v) => format!(
                    "{v} (floor({} / {}))",
                    thousands(u64::from(device.threadgroup_memory_per_core_bytes)),
                    thousands(u64::from(occ.threadgroup_memory_bytes))
                ),
                None => "none (no threadgroup memory)".to_string(),
            },
        ),
        ("bound by threads".to_string(), bound(occ.by_threads)),
        ("bound by SIMD groups".to_string(), bound(occ.by_simdgroups)),
        ("bound by threadgroup slots".to_string(), bound(occ.by_threadgroup_slots)),
    ];
    match (occ.threadgroups_per_core, occ.limiter) {
        (Some(t), Some(l)) => {
            pairs.push(("threadgroups per core".to_string(), format!("{t} (limited by {})", limiter(l))));
            pairs.push(("threads per core".to_string(), occ.threads_per_core.map_or_else(String::new, thousands)));
            pairs.push(("SIMD groups per core".to_string(), occ.simdgroups_per_core.map_or_else(String::new, thousands)));
            pairs.push((
                "threadgroups in flight".to_string(),
                occ.concurrent_threadgroups.map_or_else(String::new, |c| format!("{} ({} cores × {t})", thousands(c), occ.cores)),
            ));
        }
        _ => pairs.push(("threadgroups per core".to_string(), "unknown".to_string())),
    }
    common::print_pairs(&pairs);
    for n in &occ.notes {
        println!("note: {n}");
    }
    Ok(ExitCode::SUCCESS)
}
