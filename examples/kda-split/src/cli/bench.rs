//! `bench`: KdaSplit's step time on the GPU (`kda_split::bench`, which has
//! its own flags: `kda-split bench --help`), and `autotune`: the search for
//! the tuned table (`kda_split::bench::autotune`, `kda-split autotune
//! --help`). Every argument after the subcommand is passed through unparsed.

use clap::Args;

use super::{CliResult, Failure};

#[derive(Debug, Clone, Args)]
#[command(disable_help_flag = true)]
pub struct BenchArgs {
    /// The command's flags (see `kda-split bench --help`, `kda-split
    /// autotune --help`).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
    pub args: Vec<String>,
}

pub fn bench(a: &BenchArgs) -> CliResult {
    kda_split::bench::main_with_args(&a.args).map_err(|e| Failure::device(format!("bench: {e}")))
}

pub fn autotune(a: &BenchArgs) -> CliResult {
    kda_split::bench::autotune::main_with_args(&a.args)
        .map_err(|e| Failure::device(format!("autotune: {e}")))
}
