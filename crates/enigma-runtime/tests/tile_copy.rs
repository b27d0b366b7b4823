//! Tile copies on the simulator at their edges: a pipeline whose threads
//! wait for each box before reading it and pass a barrier before refilling
//! its stage is clean under the sanitizer and copies the boxes (zeros
//! outside the matrix); reading a box before its `tile_wait`, or
//! overwriting a stage other threads read since the last barrier, is
//! reported; two copies on one barrier land at its one wait; and the rules
//! a GPU would hang on (a wait with no copy, a copy right after a wait with
//! no barrier between), a copy never waited for, a misaligned pitch and a
//! box starting off 16 bytes into its row fail with the numbers.

use enigma_ir::builder::*;
use enigma_ir::{Access, Kernel, MemFlags, Scalar, Type};
use enigma_runtime::{Arg, Device, DispatchMode, FindingKind, Options, Runtime, RuntimeError};

/// Threads of the threadgroup.
const T: u32 = 32;
/// The box: 4 rows of 8 f32 (32-byte rows).
const BOX: (u32, u32) = (4, 8);

/// How the test kernel breaks the rules.
#[derive(Clone, Copy, PartialEq)]
enum Fault {
    None,
    /// Reads the second box's stage before its wait.
    ReadEarly,
    /// Waits on a barrier no copy was issued on.
    WaitWithoutCopy,
    /// Issues the second box on the first box's barrier: both land at its
    /// one wait.
    CopyTwice,
    /// Issues the second box on the first box's barrier right after its
    /// wait, with no threadgroup barrier between.
    CopyAfterWait,
    /// Issues the second box into the first's stage while the threads
    /// still read it (no barrier between).
    OverwriteRead,
    /// Never waits for the second box: the threadgroup ends with it in
    /// flight.
    NeverWaited,
}

/// Copies two boxes of the `rows × cols` matrix (a row every `pitch` f32)
/// at (row, col) and (row + 4, col) into two stages on barriers 0 and 1 and
/// writes both to `out`, thread `lid` elements `lid` of each box.
fn kernel(fault: Fault) -> Kernel {
    let mut k = KernelBuilder::new("tiles");
    let src = k.buffer("src", Type::F32, Access::Read);
    let out = k.buffer("out", Type::F32, Access::ReadWrite);
    let rows = k.value("rows", Type::U32);
    let cols = k.value("cols", Type::U32);
    let pitch = k.value("pitch", Type::U32);
    let row = k.value("row", Type::I32);
    let col = k.value("col", Type::I32);
    let stage = k.threadgroup_array("stage", Type::F32, 2 * BOX.0 * BOX.1);
    let lid = k.let_("lid", thread_index_in_threadgroup());
    let matrix = TileSource { mem: src, extents: [rows, cols], pitch };
    let n = BOX.0 * BOX.1;
    let second_row: Ex = row + BOX.0 as i32;
    k.tile_copy(0u32, stage.at(0u32), matrix, [row, col], BOX);
    match fault {
        Fault::CopyTwice => k.tile_copy(0u32, stage.at(n), matrix, [second_row, col], BOX),
        Fault::OverwriteRead | Fault::CopyAfterWait => {}
        _ => k.tile_copy(1u32, stage.at(n), matrix, [second_row, col], BOX),
    }
    if fault == Fault::ReadEarly {
        k.store(out.at(lid + n), stage.get(lid + n));
    }
    if fault == Fault::WaitWithoutCopy {
        k.tile_wait(2u32);
    }
    k.tile_wait(0u32);
    k.store(out.at(lid), stage.get(lid));
    if fault == Fault::CopyTwice {
        k.store(out.at(lid + n), stage.get(lid + n));
        return k.finish().unwrap();
    }
    match fault {
        Fault::CopyAfterWait => k.tile_copy(0u32, stage.at(n), matrix, [second_row, col], BOX),
        Fault::OverwriteRead => k.tile_copy(1u32, stage.at(0u32), matrix, [second_row, col], BOX),
        _ => {}
    }
    if fault == Fault::NeverWaited {
        return k.finish().unwrap();
    }
    k.tile_wait(if fault == Fault::CopyAfterWait { 0u32 } else { 1u32 });
    let second = if fault == Fault::OverwriteRead { 0 } else { n };
    k.store(out.at(lid + n), stage.get(lid + second));
    k.threadgroup_barrier(MemFlags::Threadgroup);
    k.finish().unwrap()
}

/// The matrix: 10 rows of 13 columns, a pitch of 16, element (r, c) = 100r + c.
const ROWS: u32 = 10;
const COLS: u32 = 13;

fn matrix(pitch: u32) -> Vec<f32> {
    (0..ROWS * pitch).map(|i| if i % pitch < COLS { (100 * (i / pitch) + i % pitch) as f32 } else { -7.0 }).collect()
}

/// Runs `kernel` on one threadgroup: the output and the kinds of the
/// sanitizer's findings.
fn run(kernel: &Kernel, pitch: u32, origin: (i32, i32), options: &Options) -> Result<(Vec<f32>, Vec<FindingKind>), RuntimeError> {
    let rt = Runtime::new(Device::Sim).unwrap();
    let src = rt.buffer_from(&matrix(pitch))?;
    let out = rt.buffer_from(&vec![-1.0f32; 2 * (BOX.0 * BOX.1) as usize])?;
    let p = rt.pipeline(kernel)?;
    let args = [Arg::from(&src), Arg::from(&out), Arg::u32(ROWS), Arg::u32(COLS), Arg::u32(pitch), Arg::i32(origin.0), Arg::i32(origin.1)];
    let findings = match rt.dispatch(&p, &args, DispatchMode::Threadgroups, [1, 1, 1], [T, 1, 1], options) {
        Ok(report) => report.findings,
        Err(RuntimeError::Sanitizer { findings, .. }) => findings,
        Err(e) => return Err(e),
    };
    Ok((out.to_vec::<f32>()?, findings.iter().map(|f| f.kind).collect()))
}

fn sanitized() -> Options {
    Options { sanitize: true, ..Options::default() }
}

#[test]
fn boxes_land_with_zeros_outside_the_matrix() {
    // Boxes hanging over the last rows, the last columns, both, and inside.
    for origin in [(5, 0), (3, 8), (5, 12), (0, 4)] {
        let (out, findings) = run(&kernel(Fault::None), 16, origin, &sanitized()).unwrap();
        assert!(findings.is_empty(), "{findings:?}");
        let want: Vec<f32> = (0..2 * BOX.0 * BOX.1)
            .map(|i| {
                let (b, e) = (i / (BOX.0 * BOX.1), i % (BOX.0 * BOX.1));
                let (r, c) = (origin.0 + (b * BOX.0 + e / BOX.1) as i32, origin.1 + (e % BOX.1) as i32);
                if (0..ROWS as i32).contains(&r) && (0..COLS as i32).contains(&c) { (100 * r + c) as f32 } else { 0.0 }
            })
            .collect();
        assert_eq!(out, want, "origin {origin:?}");
    }
}

#[test]
fn copies_on_one_barrier_land_at_its_wait() {
    let (twice, findings) = run(&kernel(Fault::CopyTwice), 16, (1, 4), &sanitized()).unwrap();
    assert!(findings.is_empty(), "{findings:?}");
    let (once, _) = run(&kernel(Fault::None), 16, (1, 4), &sanitized()).unwrap();
    assert_eq!(twice, once);
}

#[test]
fn reading_a_box_before_its_wait_is_reported() {
    let (_, findings) = run(&kernel(Fault::ReadEarly), 16, (0, 0), &sanitized()).unwrap();
    assert!(findings.contains(&FindingKind::AsyncCopyInFlight), "{findings:?}");
}

#[test]
fn overwriting_a_stage_other_threads_read_is_reported() {
    let (_, findings) = run(&kernel(Fault::OverwriteRead), 16, (0, 0), &sanitized()).unwrap();
    assert!(findings.contains(&FindingKind::ThreadgroupRace), "{findings:?}");
}

#[test]
fn the_barrier_protocol_is_checked() {
    for (fault, expect) in [
        (Fault::WaitWithoutCopy, "tile_wait on barrier 2 with no tile_copy in flight on it"),
        (Fault::CopyAfterWait, "tile_copy on barrier 0 with no threadgroup_barrier since the tile_wait on it"),
        (Fault::NeverWaited, "tile_copy on barrier 1 at "),
        (Fault::NeverWaited, "never waited for: threadgroup (0,0,0) ended with it in flight"),
    ] {
        let err = run(&kernel(fault), 16, (0, 0), &Options::default()).unwrap_err().to_string();
        assert!(err.contains(expect), "{err}");
    }
}

#[test]
fn a_box_starting_outside_the_matrix_fails_with_the_numbers() {
    for (origin, expect) in [((-1, 0), "starts at row -1, column 0"), ((0, 13), "starts at row 0, column 13")] {
        let err = run(&kernel(Fault::None), 16, origin, &Options::default()).unwrap_err().to_string();
        assert!(err.contains(expect) && err.contains("outside the 10 × 13 matrix"), "{err}");
    }
}

#[test]
fn a_pitch_off_16_bytes_fails_with_the_numbers() {
    // 14 f32 is 56 bytes.
    let err = run(&kernel(Fault::None), 14, (0, 0), &Options::default()).unwrap_err().to_string();
    assert!(err.contains("a pitch of 14 elements: the pitch must be a multiple of 16 bytes"), "{err}");
}

#[test]
fn a_box_starting_off_16_bytes_into_its_row_fails_with_the_numbers() {
    // Column 2 of f32 is 8 bytes into the row.
    let err = run(&kernel(Fault::None), 16, (0, 2), &Options::default()).unwrap_err().to_string();
    assert!(err.contains("the box starts at column 2, 8 bytes into its row; the copy engine reads a box from a multiple of 16 bytes"), "{err}");
}

#[test]
fn validation_refuses_extents_that_are_not_dispatch_constants() {
    let mut k = KernelBuilder::new("tiles");
    let src = k.buffer("src", Type::F32, Access::Read);
    let stage = k.threadgroup_array("stage", Type::F32, 32);
    let rows = k.let_("rows", src.get(0u32).cast(Scalar::U32));
    let matrix = TileSource { mem: src, extents: [rows, 8u32.into()], pitch: 8u32.into() };
    k.tile_copy(0u32, stage.at(0u32), matrix, [0i32.into(), 0i32.into()], BOX);
    k.tile_wait(0u32);
    let err = enigma_ir::validate(&k.finish().unwrap(), &enigma_ir::ValidationOptions::default()).unwrap_err().to_string();
    assert!(err.contains("needs its row count fixed for the whole dispatch"), "{err}");
}
