//! What can go wrong in `kda-split bench` and `bench --sim`.

use kda_host::bench::same_copy::{CopyError, SizeError};
use kda_runtime::RuntimeError;
use thiserror::Error;

use super::workload::Point;
use crate::compare::Report;
use crate::validate::ArgError;

#[derive(Debug, Error)]
pub enum BenchError {
    /// The device or the driver failed.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// `--sim`: the copy kernel did not reproduce its source.
    #[error(
        "copy b{block} u{unroll}: element {index} is {got} after the copy, the source holds {want}"
    )]
    CopyMismatch {
        block: u32,
        unroll: u32,
        index: usize,
        got: f32,
        want: f32,
    },
    /// The same-bytes copy failed on the device, or its step did not write
    /// its source into every destination region.
    #[error(transparent)]
    SameCopy(#[from] CopyError),
    /// A point's sizes that the same-bytes copy cannot move: an overflow,
    /// more than one launch reads, or nothing at all.
    #[error("{point}: no same-bytes copy of this point: {why}")]
    SameCopySize { point: Point, why: SizeError },
    /// `--sim`: the workload's arguments break the kernel's contract.
    #[error("{point} {schedule}: invalid launch: {errors:?}")]
    InvalidLaunch {
        point: Point,
        schedule: String,
        errors: Vec<ArgError>,
    },
    /// `--sim`: a chained step does not match the float64 reference.
    #[error(
        "{point} {schedule} step {step} (slot group {group}): does not match the reference:\n{report}"
    )]
    Mismatch {
        point: Point,
        schedule: String,
        step: usize,
        group: usize,
        report: Box<Report>,
    },
    /// `--sim` with flags it would ignore (issue 32 item 7).
    #[error(
        "--sim checks the benchmark's kernels on fixed small workloads and takes no other \
         flag: {} would be ignored; drop {} or run without --sim (on a GPU)",
        .0.join(", "),
        if .0.len() == 1 { "it" } else { "them" }
    )]
    SimFlags(Vec<&'static str>),
    #[error("serializing the results: {0}")]
    Json(#[from] serde_json::Error),
    /// The output file cannot be written (checked before the work, or the
    /// write itself).
    #[error("writing {0}")]
    Output(String),
}

/// Step 0 of a measured schedule against the float64 reference (`--check`).
#[derive(Clone, Debug, Error)]
pub enum StepMismatch {
    #[error("invalid launch: {0:?}")]
    InvalidLaunch(Vec<ArgError>),
    #[error("{0}")]
    Report(Box<Report>),
}
