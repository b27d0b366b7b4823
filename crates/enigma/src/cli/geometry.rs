//! `enigma geometry`: how a dispatch is cut into threadgroups and SIMD groups
//! (threadgroup count, threads that run and are launched, idle lanes, waste,
//! non-uniform edges, warnings), as `enigma_analysis::geometry` computes it.

use std::process::ExitCode;

use enigma_analysis::geometry::{self, DispatchMode};
use enigma_analysis::text::{dims, thousands};

use super::common::{self, parse_dims};

/// `--mode`'s parser: `threads` (dispatch_threads: --grid is the grid in
/// threads; edge threadgroups are non-uniform) or `threadgroups`
/// (dispatch_threadgroups: --grid is the number of threadgroups).
fn dispatch_mode() -> impl clap::builder::TypedValueParser<Value = DispatchMode> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(["threads", "threadgroups"]).map(|name| match name.as_str() {
        "threads" => DispatchMode::Threads,
        _ => DispatchMode::Threadgroups,
    })
}

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Threads per grid (threads mode) or threadgroups per grid (threadgroups
    /// mode): X[,Y[,Z]].
    #[arg(long, value_parser = parse_dims, required_unless_present = "data", conflicts_with = "data")]
    pub grid: Option<[u32; 3]>,
    /// Threads per threadgroup: X[,Y[,Z]].
    #[arg(long, value_parser = parse_dims)]
    pub threads: [u32; 3],
    /// Which dispatch call: threads (--grid in threads, non-uniform edge
    /// threadgroups) or threadgroups (--grid in threadgroups).
    #[arg(long, value_parser = dispatch_mode(), default_value = "threads")]
    pub mode: DispatchMode,
    /// Data extent to cover, one thread per element, instead of --grid: in
    /// threadgroups mode the threadgroup count is ceil(data / threads) and the
    /// report says whether the kernel must bounds-check.
    #[arg(long, value_parser = parse_dims)]
    pub data: Option<[u32; 3]>,
    /// Catalogue device (e.g. m4-max): its limits apply and too few
    /// threadgroups for its cores are warned about.
    #[arg(long)]
    pub device: Option<String>,
    /// Print the geometry as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let device = args.device.as_deref().map(common::device).transpose()?;
    let mode = args.mode;
    let (geo, cover) = match (args.grid, args.data, mode) {
        (_, Some(data), DispatchMode::Threadgroups) => {
            let plan = geometry::cover_with_threadgroups(data, args.threads, device.as_ref())?;
            (plan.geometry.clone(), Some(plan))
        }
        (_, Some(data), DispatchMode::Threads) | (Some(data), None, _) => {
            (geometry::plan_dispatch(mode, data, args.threads, device.as_ref())?, None)
        }
        (None, None, _) => anyhow::bail!("give --grid or --data"),
    };

    if args.json {
        let text = match &cover {
            Some(plan) => serde_json::to_string_pretty(plan)?,
            None => serde_json::to_string_pretty(&geo)?,
        };
        println!("{text}");
        return Ok(ExitCode::SUCCESS);
    }

    let tg_threads: u64 = geo.threads_per_threadgroup.iter().map(|&v| u64::from(v)).product();
    match mode {
        DispatchMode::Threads => println!(
            "dispatch_threads: grid {} threads, threadgroup {} ({} threads)",
            dims(geo.grid),
            dims(geo.threads_per_threadgroup),
            tg_threads
        ),
        DispatchMode::Threadgroups => println!(
            "dispatch_threadgroups: {} threadgroups of {} ({} threads)",
            dims(geo.threadgroups),
            dims(geo.threads_per_threadgroup),
            tg_threads
        ),
    }
    let mut pairs = vec![
        ("threadgroups".to_string(), format!("{} = {}", dims(geo.threadgroups), thousands(geo.total_threadgroups))),
        ("grid (threads that run)".to_string(), dims(geo.grid)),
        ("threads that run".to_string(), thousands(geo.total_threads)),
        ("threads launched".to_string(), thousands(geo.launched_threads)),
    ];
    if let Some(edge) = geo.edge_threadgroup {
        pairs.push(("edge threadgroup".to_string(), format!("{} (non-uniform)", dims(edge))));
    }
    pairs.push((
        "SIMD groups per threadgroup".to_string(),
        format!("{} ({} idle lanes)", geo.simdgroups_per_threadgroup, geo.idle_lanes_per_threadgroup),
    ));
    pairs.push(("waste (idle SIMD lanes)".to_string(), format!("{:.1} %", geo.waste_percent)));
    if let Some(plan) = &cover {
        pairs.push(("data".to_string(), format!("{} = {} elements", dims(plan.data), thousands(plan.data_elements))));
        pairs.push(("out-of-bounds threads".to_string(), thousands(plan.out_of_bounds_threads)));
        pairs.push(("kernel must bounds-check".to_string(), if plan.needs_bounds_check { "yes" } else { "no" }.to_string()));
    }
    if let Some(d) = &device {
        let w = geometry::waves(geo.total_threadgroups, d, 1)?;
        let t = geometry::threadgroup_targets(d);
        pairs.push((
            "device".to_string(),
            format!(
                "{}: {} cores; {:.2} waves at one threadgroup per core; aim for ≥ {} threadgroups, better {}+",
                d.name, d.gpu_cores, w.waves_exact, t.minimum, t.better
            ),
        ));
    }
    common::print_pairs(&pairs);
    for w in &geo.warnings {
        println!("warning: {w}");
    }
    Ok(ExitCode::SUCCESS)
}
