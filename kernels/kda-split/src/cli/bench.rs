//! `bench`: KdaSplit's step time on the GPU (`kda_split::bench`), and
//! `autotune`: the search for the tuned table (`kda_split::bench::autotune`).
//! Their flags are `kda_split::bench::Options` and
//! `kda_split::bench::autotune::Options`, which share
//! `kda_split::bench::SweepArgs`.

use super::{CliResult, Failure};

pub use kda_split::bench::Options as BenchArgs;
pub use kda_split::bench::autotune::Options as AutotuneArgs;

pub fn bench(a: &BenchArgs) -> CliResult {
    if a.sim {
        let ignored = a.flags_ignored_by_sim();
        if !ignored.is_empty() {
            // A usage error (exit 2), not a device failure.
            let e = kda_split::bench::BenchError::SimFlags(ignored);
            return Err(Failure::usage(format!("bench: {e}")));
        }
    }
    kda_split::bench::main(a).map_err(|e| Failure::device(format!("bench: {e}")))
}

/// `command`: the command line as typed, recorded in the table.
pub fn autotune(a: &AutotuneArgs) -> CliResult {
    let command = std::iter::once("kda-split autotune".to_string())
        .chain(
            std::env::args_os()
                .skip(2)
                .map(|a| a.to_string_lossy().into_owned()),
        )
        .collect::<Vec<_>>()
        .join(" ");
    kda_split::bench::autotune::main(a, &command)
        .map_err(|e| Failure::device(format!("autotune: {e}")))
}
