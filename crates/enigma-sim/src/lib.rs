//! enigma's CPU simulator: the reference implementation of the execution
//! model (see `enigma_ir`'s semantics).
//!
//! Each SIMD group runs its 32 lanes in lockstep with an active-lane mask;
//! every instruction works on all 32 lanes at once (the interpreter's cost is
//! paid per SIMD group, not per thread). Threadgroups run in parallel on a
//! rayon pool. Threadgroup memory starts filled with [`memory::POISON_WORD`].
//! Out-of-bounds accesses, integer division by zero and barriers not reached
//! by the whole threadgroup are errors naming the kernel, the thread and the
//! IR location — never a panic. A kernel that never ends is stopped by the
//! dispatch's step budget, timeout or cancel flag
//! ([`enigma_backend::DispatchOptions`]), with an error naming the loop.

mod cooperative;
mod dispatch;
mod exec;
mod geometry;
mod layout;
pub mod memory;
mod ops;
mod print;
mod program;
mod sanitizer;
mod state;
mod tile_copy;

use enigma_backend::{
    own_buffer, own_kernel, ArgValue, Backend, BufferStorage, CompiledKernel, DeviceInfo, DeviceKind, DispatchGeometry, DispatchOptions,
    DispatchReport, Finding, FindingKind, ReadWriteTier, RuntimeError, Severity, SpecValues,
};
use enigma_ir::{Kernel, KernelInfo};
use memory::SimBuffer;
use std::any::Any;
use std::sync::{Arc, Mutex};
use std::time::Instant;

pub use enigma_ir::limits::{MAX_THREADGROUP_MEMORY_BYTES, MAX_THREADS_PER_THREADGROUP};

/// The simulator as a [`Backend`]. Each dispatch in flight runs its
/// threadgroups on a worker pool of its own (pools are made when no idle
/// one is left and kept for the next dispatches), so a long or runaway
/// dispatch never holds up another: neither another runtime's nor one on
/// the same runtime from another thread (front ends share one runtime per
/// device).
/// The step budget of a sanitized dispatch that asks for none: loop
/// iterations per SIMD group (a few seconds of sanitized simulation), so a
/// loop that never ends stops with `StopReason::StepBudget`, naming the
/// loop, instead of running until killed. Ask for more with
/// `DispatchOptions::max_loop_iterations` where the work is real.
pub const SANITIZER_LOOP_BUDGET: u64 = 1 << 22;

#[derive(Debug)]
pub struct SimBackend {
    info: DeviceInfo,
    /// Idle worker pools.
    pools: Mutex<Vec<rayon::ThreadPool>>,
    /// Where the lines of `print` go: standard output, or these lines.
    printed: Option<Arc<Mutex<Vec<String>>>>,
}

impl Default for SimBackend {
    fn default() -> Self {
        SimBackend::new()
    }
}

impl SimBackend {
    pub fn new() -> SimBackend {
        let threads = rayon::current_num_threads() as u32;
        SimBackend {
            info: DeviceInfo {
                kind: DeviceKind::Simulator,
                name: format!("enigma simulator (CPU, {threads} threads)"),
                max_threads_per_threadgroup: MAX_THREADS_PER_THREADGROUP,
                max_threadgroup_memory_bytes: MAX_THREADGROUP_MEMORY_BYTES,
                simd_width: 32,
                compute_units: threads,
                memory_bytes: None,
                features: enigma_ir::capabilities::all_features(),
                cooperative_lowering: Some(enigma_backend::CooperativeLowering::Reference),
                // The simulator reads and writes every format.
                read_write_textures: ReadWriteTier::Tier2,
            },
            pools: Mutex::new(Vec::new()),
            printed: None,
        }
    }

    /// The simulator appending the lines kernels `print` (and the note of
    /// those left out) to `lines` instead of writing them to standard
    /// output, for a program that shows them its own way, or a test.
    pub fn printing_to(mut self, lines: Arc<Mutex<Vec<String>>>) -> SimBackend {
        self.printed = Some(lines);
        self
    }

    /// The simulator reporting read-write texture tier `tier` (and saying so
    /// in its name) instead of tier 2, so that tests can see a device of that
    /// tier refuse read_write textures of the formats it lacks; the
    /// simulator itself reads and writes every format.
    pub fn with_read_write_textures(mut self, tier: ReadWriteTier) -> SimBackend {
        self.info.read_write_textures = tier;
        self.info.name = format!("{} posing as a GPU of {tier}", self.info.name);
        self
    }

    /// The simulator offering `bytes` of threadgroup memory to one
    /// threadgroup (and saying so in its name) instead of Apple GPUs' 32
    /// KiB, so that tests can run what a library plans for a device with
    /// more (a CUDA GPU's 227 KiB); the simulator itself has no such limit.
    pub fn with_threadgroup_memory(mut self, bytes: u64) -> SimBackend {
        self.info.max_threadgroup_memory_bytes = bytes;
        self.info.name = format!("{} posing as a GPU of {bytes} bytes of threadgroup memory", self.info.name);
        self
    }

    /// The simulator listing every optional feature but `feature` (and
    /// saying so in its name), so that tests can see what a device without
    /// it refuses; the simulator itself still runs it.
    pub fn without_feature(mut self, feature: enigma_ir::Feature) -> SimBackend {
        self.info.features.remove(&feature);
        self.info.name = format!("{} posing as a GPU without {feature}", self.info.name);
        self
    }

    /// Runs `work` on an idle worker pool of this backend (a new one if
    /// every pool is busy), which is idle again afterwards.
    fn on_pool<T: Send>(&self, work: impl FnOnce() -> T + Send) -> Result<T, RuntimeError> {
        let idle = self.pools.lock().unwrap_or_else(|e| e.into_inner()).pop();
        let pool = match idle {
            Some(pool) => pool,
            None => rayon::ThreadPoolBuilder::new()
                .num_threads(self.info.compute_units as usize)
                .thread_name(|i| format!("enigma-sim-{i}"))
                .build()
                .map_err(|e| RuntimeError::Backend { backend: "simulator", message: format!("cannot start the worker threads: {e}") })?,
        };
        let result = pool.install(work);
        self.pools.lock().unwrap_or_else(|e| e.into_inner()).push(pool);
        Ok(result)
    }
}

/// A kernel lowered for the simulator.
#[derive(Debug)]
pub struct SimKernel {
    kernel: Kernel,
    info: KernelInfo,
    /// The specialisation values the program was lowered with.
    spec: Vec<enigma_ir::Literal>,
    /// Lowered with layout 0 of every cooperative tensor.
    program: program::Program,
}

impl CompiledKernel for SimKernel {
    fn kernel(&self) -> &Kernel {
        &self.kernel
    }
    fn max_total_threads_per_threadgroup(&self) -> u32 {
        MAX_THREADS_PER_THREADGROUP
    }
    fn thread_execution_width(&self) -> u32 {
        32
    }
    fn static_threadgroup_memory_length(&self) -> u64 {
        self.info.threadgroup_memory_bytes
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl Backend for SimBackend {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn allocate(&self, bytes: usize) -> Result<Box<dyn BufferStorage>, RuntimeError> {
        Ok(Box::new(SimBuffer::try_new(bytes)?))
    }

    fn compile(&self, kernel: &Kernel, info: &KernelInfo, spec: &SpecValues) -> Result<Box<dyn CompiledKernel>, RuntimeError> {
        let spec = spec.resolve(kernel);
        let layouts = layout::Layout::all(&kernel.cooperative_tensors, &[]);
        let program = program::lower(kernel, &spec, &layouts);
        Ok(Box::new(SimKernel { kernel: kernel.clone(), info: info.clone(), spec, program }))
    }

    fn dispatch(
        &self,
        compiled: &dyn CompiledKernel,
        args: &[ArgValue<'_>],
        geometry: &DispatchGeometry,
        options: &DispatchOptions,
    ) -> Result<DispatchReport, RuntimeError> {
        let start = Instant::now();
        let sim: &SimKernel = own_kernel(compiled, "simulator")?;
        let mut buffers = Vec::with_capacity(args.len());
        let mut values = Vec::with_capacity(args.len());
        let mut textures = Vec::with_capacity(args.len());
        for arg in args {
            textures.push(match arg {
                ArgValue::Texture { desc, .. } => Some(*desc),
                _ => None,
            });
            match arg {
                ArgValue::Buffer { storage, .. } | ArgValue::Texture { storage, .. } => {
                    let buf: &SimBuffer = own_buffer(*storage, "simulator", &sim.kernel.name)?;
                    buffers.push(Some((&buf.words, buf.len_bytes)));
                    values.push([0; 4]);
                }
                ArgValue::Value { ty, bytes } => {
                    let size = ty.elem().size_bytes() as usize;
                    let mut comps = [0u64; 4];
                    for (c, comp) in comps.iter_mut().enumerate().take(ty.width() as usize) {
                        let mut raw = [0u8; 8];
                        raw[..size].copy_from_slice(&bytes[c * size..(c + 1) * size]);
                        *comp = ops::norm(ty.elem(), u64::from_le_bytes(raw));
                    }
                    buffers.push(None);
                    values.push(comps);
                }
            }
        }
        let limits = state::Limits {
            max_loop_iterations: options.max_loop_iterations.or(options.sanitize.then_some(SANITIZER_LOOP_BUDGET)),
            deadline: options.timeout.map(|t| (start + t, t.as_secs_f64())),
            cancel: options.cancel.clone(),
        };
        let print_log = print::PrintLog::default();
        let env = state::Env {
            program: &sim.program,
            buffers,
            textures,
            values,
            threads_per_grid: geometry.grid,
            threadgroups_per_grid: geometry.threadgroups,
            threadgroup_size: geometry.threads_per_threadgroup,
            tracker: None,
            limits: &limits,
            print_log: Some(&print_log),
        };
        let findings = self.on_pool(|| {
            if options.sanitize {
                self.sanitized(sim, &env, geometry, options)
            } else {
                dispatch::run_dispatch(&sim.kernel, &env, geometry, 0).map(|()| vec![])
            }
        });
        // The lines are shown when the dispatch fails too: they may say why
        // (collected ones only with a report, when it succeeds).
        let collected = Mutex::new(Vec::new());
        let sink = if options.collect_printed { Some(&collected) } else { self.printed.as_deref() };
        let print_note = print_log.write_out(sink);
        let findings = findings??;
        let mut notes = geometry.warnings.clone();
        notes.extend(print_note);
        let printed = collected.into_inner().unwrap_or_else(|e| e.into_inner());
        Ok(DispatchReport { device_time: None, wall_time: start.elapsed(), notes, findings, printed })
    }
}

impl SimBackend {
    /// Runs the dispatch under the sanitizer in several SIMD-group schedules
    /// and returns the findings; the buffers end with schedule 0's results.
    fn sanitized(
        &self,
        sim: &SimKernel,
        env: &state::Env<'_>,
        geometry: &DispatchGeometry,
        options: &DispatchOptions,
    ) -> Result<Vec<Finding>, RuntimeError> {
        let buffers = &env.buffers;
        let kernel = &sim.kernel;
        let schedules = if options.schedules == 0 { 3 } else { options.schedules };
        // Copies of every buffer (the inputs, schedule 0's results): sizes the
        // user chose, so their allocation is fallible.
        let snapshot = |bufs: &[Option<(&memory::Words, usize)>]| -> Result<Vec<Option<Vec<u32>>>, RuntimeError> {
            bufs.iter()
                .map(|b| {
                    b.map(|(w, len)| {
                        let mut words = w.0.iter().map(|x| x.load(std::sync::atomic::Ordering::Relaxed));
                        memory::try_filled(w.0.len(), || words.next().unwrap_or(0), len as u128, "the sanitizer's copy of a buffer")
                    })
                    .transpose()
                })
                .collect()
        };
        let restore = |saved: &[Option<Vec<u32>>]| {
            for (b, s) in buffers.iter().zip(saved) {
                if let (Some((w, _)), Some(s)) = (b, s) {
                    for (x, v) in w.0.iter().zip(s) {
                        x.store(*v, std::sync::atomic::Ordering::Relaxed);
                    }
                }
            }
        };
        let inputs = snapshot(buffers)?;
        let sizes: Vec<Option<usize>> = buffers.iter().map(|b| b.map(|(_, len)| len)).collect();
        let mut findings: Vec<Finding> = vec![];
        let mut first_results: Option<Vec<Option<Vec<u32>>>> = None;
        let compared = order_compared(kernel, &sim.info);
        for schedule in 0..schedules {
            if schedule > 0 {
                restore(&inputs);
            }
            if schedule > 0 {
                // The shadow-memory checks do not depend on the order SIMD
                // groups run in (they follow barrier epochs and active
                // masks, not timing), so they run once; later schedules run
                // plain and only their results are compared. A plain run
                // stops at the first out-of-bounds access or divergent
                // barrier, which the tracked run has already reported.
                if let Err(e) = dispatch::run_dispatch(kernel, &env.quiet(), geometry, schedule) {
                    if findings.iter().any(|f| f.severity == Severity::Error) {
                        break;
                    }
                    return Err(e);
                }
                let results = snapshot(buffers)?;
                if let Some(first) = &first_results {
                    if let Some(f) = order_finding(kernel, &env.textures, first, &results, schedule, &compared) {
                        if !findings.iter().any(|g| g.kind == FindingKind::OrderDependence && g.variable == f.variable) {
                            findings.push(f);
                        }
                    }
                }
                continue;
            }
            let tracker = sanitizer::DispatchTracker::new(kernel, &sizes, &env.textures)?;
            dispatch::run_dispatch(kernel, &env.with_tracker(Some(&tracker)), geometry, schedule)?;
            {
                for param in &sim.info.written_buffers {
                    if sim.info.atomic_memories.contains(&enigma_ir::Memory::Buffer(*param)) {
                        continue;
                    }
                    let (missing, ranges) = tracker.unwritten_ranges(param.0, 4);
                    if missing > 0 {
                        tracker.add(coverage_finding(kernel, &kernel.params[param.0 as usize].name, missing, &ranges, &sizes, param.0));
                    }
                }
                for param in &sim.info.written_textures {
                    let (missing, ranges) = tracker.unwritten_ranges(param.0, 4);
                    if let (true, Some(desc)) = (missing > 0, env.textures[param.0 as usize]) {
                        tracker.add(texture_coverage_finding(kernel, &kernel.params[param.0 as usize].name, missing, &ranges, &desc));
                    }
                }
            }
            for f in tracker.into_findings() {
                let seen = findings.iter().any(|g| {
                    g.kind == f.kind
                        && g.variable == f.variable
                        && g.first.as_ref().map(|t| &t.location) == f.first.as_ref().map(|t| &t.location)
                        && g.second.as_ref().map(|t| &t.location) == f.second.as_ref().map(|t| &t.location)
                });
                if !seen {
                    findings.push(f);
                }
            }
            first_results = Some(snapshot(buffers)?);
        }
        if let Some(first) = first_results.as_ref().filter(|_| !findings.iter().any(|f| f.severity == Severity::Error)) {
            // Each cooperative tensor in other layouts, the others in layout 0.
            'tensors: for (t, tensor) in kernel.cooperative_tensors.iter().enumerate() {
                for seed in 1..=layout::SANITIZER_LAYOUTS {
                    let mut seeds = vec![0; kernel.cooperative_tensors.len()];
                    seeds[t] = seed;
                    let program = program::lower(kernel, &sim.spec, &layout::Layout::all(&kernel.cooperative_tensors, &seeds));
                    restore(&inputs);
                    dispatch::run_dispatch(kernel, &env.quiet().with_program(&program), geometry, 0)?;
                    let results = snapshot(buffers)?;
                    if let Some(f) = layout_finding(kernel, first, &results, &compared, &tensor.name, seed) {
                        findings.push(f);
                        continue 'tensors;
                    }
                }
            }
        }
        if let Some(first) = &first_results {
            restore(first);
        }
        if let Some(cause) = partial_threadgroup_cause(kernel, geometry) {
            for f in findings.iter_mut().filter(|f| matches!(f.kind, FindingKind::DeviceRace | FindingKind::Coverage)) {
                f.hint = format!("{cause}; {}", f.hint);
            }
        }
        findings.sort_by_key(|f| (f.severity == Severity::Warning, f.kind.report_order()));
        Ok(findings)
    }
}

/// The likely cause of a device race or a coverage gap in a dispatch by
/// threads whose grid is not a multiple of the threadgroup size, when the
/// kernel reads `threads_per_threadgroup`: an index formula such as
/// `tg * threads_per_threadgroup + lid` assumes uniform threadgroups, but
/// the last threadgroup is partial and its `threads_per_threadgroup` is
/// smaller, so its threads land on other threadgroups' elements.
fn partial_threadgroup_cause(kernel: &Kernel, geometry: &DispatchGeometry) -> Option<String> {
    let edge = geometry.edge_threadgroup.filter(|_| geometry.mode == enigma_backend::DispatchMode::Threads)?;
    let mut reads_size = false;
    kernel.walk_exprs(|e| reads_size |= matches!(e, enigma_ir::Expr::Builtin(enigma_ir::Builtin::ThreadsPerThreadgroup)));
    if !reads_size {
        return None;
    }
    let (grid, full) = (geometry.grid, geometry.threads_per_threadgroup);
    let partial: Vec<usize> = (0..3).filter(|&a| grid[a] % full[a] != 0).collect();
    let one_axis = partial == [0] && grid[1] == 1 && grid[2] == 1;
    let parts: Vec<String> = partial
        .iter()
        .map(|&a| {
            let (along, component) = if one_axis { (String::new(), "") } else { (format!(" along {}", ["x", "y", "z"][a]), [".x", ".y", ".z"][a]) };
            format!(
                "the last threadgroup{along} is partial: its threads_per_threadgroup{component} is {} ({} = {}·{} + {})",
                edge[a],
                grid[a],
                grid[a] / full[a],
                full[a],
                edge[a]
            )
        })
        .collect();
    Some(format!("{}; index with thread_position_in_grid instead", parts.join("; ")))
}

/// Texels of a written texture that no thread wrote, by coordinate.
fn texture_coverage_finding(kernel: &Kernel, name: &str, missing: u64, ranges: &[(u64, u64)], desc: &enigma_backend::TextureDesc) -> Finding {
    let at = |i: u64| format!("({}, {})", i % desc.width as u64, i / desc.width as u64);
    let shown: Vec<String> = ranges.iter().map(|(a, b)| if b - a == 1 { at(*a) } else { format!("{} to {}", at(*a), at(b - 1)) }).collect();
    let message = format!(
        "{missing} of the {} texels of the {}×{} texture were never written (first unwritten, as (x, y), row by row: {})",
        desc.texels(),
        desc.width,
        desc.height,
        shown.join(", ")
    );
    let hint = "check the dispatch: one thread per texel needs a grid of the texture's width × height threads (dispatch_threads), or that many rounded up to whole threadgroups (dispatch_threadgroups) with a bounds check";
    coverage(kernel, name, missing, ranges, message, hint)
}

/// A coverage warning: `missing` elements of `name` never written, the
/// first unwritten range's start as the index.
fn coverage(kernel: &Kernel, name: &str, missing: u64, ranges: &[(u64, u64)], message: String, hint: &str) -> Finding {
    Finding {
        kind: FindingKind::Coverage,
        severity: Severity::Warning,
        kernel: kernel.name.clone(),
        variable: Some(name.to_string()),
        index: ranges.first().map(|r| r.0),
        first: None,
        second: None,
        message,
        hint: hint.into(),
        count: missing,
    }
}

fn coverage_finding(kernel: &Kernel, name: &str, missing: u64, ranges: &[(u64, u64)], sizes: &[Option<usize>], param: u32) -> Finding {
    let elem_bytes = match kernel.params[param as usize].kind {
        enigma_ir::ParamKind::Buffer { elem, .. } => elem.size_bytes() as u64,
        enigma_ir::ParamKind::Value { ty } => ty.size_bytes() as u64,
        enigma_ir::ParamKind::Texture { .. } => 1,
    };
    let total = sizes[param as usize].unwrap_or(0) as u64 / elem_bytes.max(1);
    let shown: Vec<String> = ranges.iter().map(|(a, b)| if b - a == 1 { format!("{a}") } else { format!("{a}..{b}") }).collect();
    let message = format!("{missing} of {total} elements were never written (first unwritten: {})", shown.join(", "));
    let hint = "check the dispatch: dispatch_threads counts threads, dispatch_threadgroups counts threadgroups; a grid given in the wrong unit covers only part of the output";
    coverage(kernel, name, missing, ranges, message, hint)
}

/// Which buffers the schedules' results are compared on. Atomics are not
/// races, and what they leave may rightly depend on the order threads run
/// (an f32 atomic add rounds differently; a slot taken with
/// `atomic_fetch_add` lands data elsewhere), an order no schedule fixes:
/// threadgroups run in parallel. So buffers updated atomically are not
/// compared, and no buffer is when the kernel uses an atomic's result.
fn order_compared(kernel: &Kernel, info: &KernelInfo) -> Vec<bool> {
    let mut uses_atomic_result = false;
    kernel.walk_stmts(|_, stmt| {
        uses_atomic_result |= matches!(stmt.kind, enigma_ir::StmtKind::Atomic { .. } | enigma_ir::StmtKind::AtomicCompareExchange { .. })
            && stmt.kind.assigned().is_some();
    });
    (0..kernel.params.len())
        .map(|p| !uses_atomic_result && !info.atomic_memories.contains(&enigma_ir::Memory::Buffer(enigma_ir::ParamId(p as u32))))
        .collect()
}

/// The first element of a compared buffer that differs between layout 0
/// and layout `seed` of cooperative tensor `tensor`.
fn layout_finding(kernel: &Kernel, first: &[Option<Vec<u32>>], other: &[Option<Vec<u32>>], compared: &[bool], tensor: &str, seed: u32) -> Option<Finding> {
    for (param, (a, b)) in first.iter().zip(other).enumerate() {
        let (Some(a), Some(b), true) = (a, b, compared[param]) else { continue };
        let Some(word) = a.iter().zip(b).position(|(x, y)| x != y) else { continue };
        let name = kernel.params[param].name.clone();
        let byte = word as u64 * 4 + ((a[word] ^ b[word]).trailing_zeros() / 8) as u64;
        let elem_bytes = match kernel.params[param].kind {
            enigma_ir::ParamKind::Buffer { elem, .. } => elem.size_bytes() as u64,
            _ => 4,
        };
        let index = byte / elem_bytes.max(1);
        return Some(Finding {
            kind: FindingKind::LayoutDependence,
            severity: Severity::Error,
            kernel: kernel.name.clone(),
            variable: Some(name.clone()),
            index: Some(index),
            first: None,
            second: None,
            message: format!(
                "this result depends on the cooperative tensor's layout: `{name}` differs when cooperative tensor `{tensor}` is laid out another way (layout {seed}); first at element {index} (the 32-bit word at byte {}: {:#010x} vs {:#010x})",
                word * 4,
                a[word],
                b[word]
            ),
            hint: format!("which thread holds which element of `{tensor}` is unspecified (it differs between GPUs): address its slots through get_multidimensional_index(i) and is_valid_element(i), or store it whole with store(), instead of assuming slot i of thread t is a fixed element"),
            count: 1,
        });
    }
    None
}

fn order_finding(
    kernel: &Kernel,
    textures: &[Option<enigma_backend::TextureDesc>],
    first: &[Option<Vec<u32>>],
    other: &[Option<Vec<u32>>],
    schedule: u32,
    compared: &[bool],
) -> Option<Finding> {
    for (param, (a, b)) in first.iter().zip(other).enumerate() {
        let (Some(a), Some(b), true) = (a, b, compared[param]) else { continue };
        if let Some(word) = a.iter().zip(b).position(|(x, y)| x != y) {
            let name = kernel.params[param].name.clone();
            // The element holding the first differing byte (little-endian words).
            let byte = word as u64 * 4 + ((a[word] ^ b[word]).trailing_zeros() / 8) as u64;
            let elem_bytes = match kernel.params[param].kind {
                enigma_ir::ParamKind::Buffer { elem, .. } => elem.size_bytes() as u64,
                enigma_ir::ParamKind::Value { ty } => ty.size_bytes() as u64,
                // The texel's index, counting bytes of the stored format.
                enigma_ir::ParamKind::Texture { .. } => textures[param].map_or(1, |d| d.format.bytes_per_texel() as u64),
            };
            return Some(Finding {
                kind: FindingKind::OrderDependence,
                severity: Severity::Error,
                kernel: kernel.name.clone(),
                variable: Some(name.clone()),
                index: Some(byte / elem_bytes.max(1)),
                first: None,
                second: None,
                message: format!(
                    "`{name}` differs between SIMD-group schedule 0 and schedule {schedule} (first in the 32-bit word at byte {}: {:#010x} vs {:#010x})",
                    word * 4,
                    a[word],
                    b[word]
                ),
                hint: "the result depends on the order SIMD groups run: look for a missing barrier or a non-atomic update shared between SIMD groups".into(),
                count: 1,
            });
        }
    }
    None
}
