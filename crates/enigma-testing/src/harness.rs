//! Running a corpus [`Launch`]: its buffers and arguments on a runtime, the
//! sanitized dispatch through the runtime, and the simulator run of a kernel
//! that validation rejects only for a barrier in thread-dependent control
//! flow. `enigma check`, `enigma-runtime/tests/sanitizer_corpus.rs` and the
//! `corpus_cuda` benchmark all go through these.

#![allow(clippy::result_large_err)] // RuntimeError is the runtime's own error type, returned as is.

use crate::corpus::{ArgSpec, Launch};
use enigma_backend::{ArgValue, Backend, BufferStorage};
use enigma_ir::{validate, Kernel, ValidationOptions};
use enigma_runtime::{Arg, Buffer, DispatchReport, Finding, Options, Runtime, RuntimeError, SpecValues};

/// A buffer on `rt` for each buffer argument of `launch`, holding its bytes
/// (`None` for by-value arguments).
pub fn buffers(rt: &Runtime, launch: &Launch) -> Result<Vec<Option<Buffer>>, RuntimeError> {
    launch
        .args
        .iter()
        .map(|a| match a {
            ArgSpec::Buffer { elem, bytes } => rt.buffer_from_bytes(*elem, bytes).map(Some),
            ArgSpec::Value(_) => Ok(None),
        })
        .collect()
}

/// The arguments of `launch` over the buffers [`buffers`] made.
pub fn args<'b>(launch: &Launch, buffers: &'b [Option<Buffer>]) -> Vec<Arg<'b>> {
    launch
        .args
        .iter()
        .zip(buffers)
        .map(|(a, b)| match (a, b) {
            (ArgSpec::Value(lit), _) => Arg::Value(*lit),
            (ArgSpec::Buffer { .. }, Some(b)) => Arg::from(b),
            (ArgSpec::Buffer { .. }, None) => unreachable!("`buffers` makes one buffer per buffer argument"),
        })
        .collect()
}

/// Validates and compiles `kernel` on `rt`, makes the buffers of `launch`
/// and dispatches it with `options`: the runtime's own outcome (a sanitizer
/// error finding fails the dispatch with `RuntimeError::Sanitizer`).
pub fn dispatch(rt: &Runtime, kernel: &Kernel, launch: &Launch, options: &Options) -> Result<DispatchReport, RuntimeError> {
    let pipeline = rt.pipeline(kernel)?;
    let buffers = buffers(rt, launch)?;
    rt.dispatch(&pipeline, &args(launch, &buffers), launch.mode, launch.size, launch.threads_per_threadgroup, options)
}

/// The findings of a dispatch's outcome, errors included: a
/// `RuntimeError::Sanitizer` becomes its findings; any other error stays one.
pub fn findings(outcome: Result<DispatchReport, RuntimeError>) -> Result<Vec<Finding>, RuntimeError> {
    match outcome {
        Ok(report) => Ok(report.findings),
        Err(RuntimeError::Sanitizer { findings, .. }) => Ok(findings),
        Err(e) => Err(e),
    }
}

/// Runs a kernel that validation rejects only for a non-uniform barrier on
/// the simulator backend directly, validated with every other rule
/// (`ValidationOptions::allowing_divergent_barriers`), with the sanitizer on
/// and the rest of `options`: every finding, errors included, so that the
/// divergence shows at run time. A kernel that fails validation for another
/// reason is `RuntimeError::Validation`.
pub fn run_unvalidated(kernel: &Kernel, launch: &Launch, options: &Options) -> Result<Vec<Finding>, RuntimeError> {
    let info = validate(kernel, &ValidationOptions::allowing_divergent_barriers())?;
    let backend = enigma_sim::SimBackend::new();
    let compiled = backend.compile(kernel, &info, &SpecValues::default())?;
    let storages: Vec<Option<Box<dyn BufferStorage>>> = launch
        .args
        .iter()
        .map(|a| match a {
            ArgSpec::Buffer { bytes, .. } => {
                let s = backend.allocate(bytes.len())?;
                s.write(0, bytes)?;
                Ok(Some(s))
            }
            ArgSpec::Value(_) => Ok(None),
        })
        .collect::<Result<_, RuntimeError>>()?;
    let values: Vec<ArgValue<'_>> = launch
        .args
        .iter()
        .zip(&storages)
        .map(|(a, s)| match (a, s) {
            (ArgSpec::Buffer { elem, .. }, Some(s)) => ArgValue::Buffer { storage: s.as_ref(), elem: Some(*elem) },
            (ArgSpec::Value(lit), _) => ArgValue::literal(*lit),
            (ArgSpec::Buffer { .. }, None) => unreachable!("a storage was made for every buffer argument"),
        })
        .collect();
    let geometry =
        enigma_backend::check_dispatch(backend.info(), compiled.as_ref(), &values, launch.mode, launch.size, launch.threads_per_threadgroup)?;
    let options = Options { sanitize: true, ..options.clone() };
    Ok(backend.dispatch(compiled.as_ref(), &values, &geometry, &options)?.findings)
}
