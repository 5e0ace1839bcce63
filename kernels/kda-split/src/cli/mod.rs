//! The `kda-split` command line: argument parsing, dispatch and exit codes.
//! One file per subcommand; `options` holds the shared flags, `exec` runs a
//! launch on a device and times it.
//!
//! Exit codes (also in `docs/kda-split.md`):
//!
//! | code | meaning |
//! |---|---|
//! | 0 | success (every check passed) |
//! | 1 | the results do not match the expected ones |
//! | 2 | usage error or invalid configuration (the constructor's constraints); shapes over the case limit; an output path that cannot be written or is the input file |
//! | 3 | bad input: an unreadable, malformed or mismatched case file, or arguments that break the caller contract |
//! | 4 | the device, the compiler, ptxas, the benchmark or the autotune failed (`bench` and `autotune` without a GPU too) |
//!
//! Output files are checked before the work and written by the one writer
//! (`output`: regular files atomically, keeping mode and owner; devices,
//! FIFOs and pipes written through; links followed); sizes are checked against the case limit before anything is
//! allocated (`kda_split::generator::case_limit`).

/// `println!` that ignores a closed standard output, so that
/// `kda-split info | head` ends quietly instead of panicking.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

mod bench;
mod demo;
mod exec;
mod gen_case;
mod info;
mod options;
mod output;
mod ptx;
mod run;

use std::fmt;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use kda_split::ConfigError;

/// KdaSplit, the fused KDA decode / spec-verify kernel: build it, run it on the
/// GPU or the CPU simulator, and check it against the float64 reference.
///
/// Without a subcommand: build the kernel for a configuration (the defaults
/// below), run a generated case on the GPU if there is one, else on the
/// simulator, check the results and print errors and timing.
#[derive(Debug, Parser)]
#[command(name = "kda-split", version, args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    demo: demo::DemoArgs,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a case file (spec §10) and check it against its `expected.*`
    /// tensors (or the f64 reference when it has none).
    Run(run::RunArgs),
    /// Generate a case (inputs and, by default, the f64 reference results)
    /// and write it as a `.safetensors` case file.
    GenCase(gen_case::GenCaseArgs),
    /// Print the source-annotated PTX of a configuration.
    Ptx(ptx::PtxArgs),
    /// Print ptxas's resource report (registers, spills, stack, shared
    /// memory) for one configuration or a list of them.
    Info(info::InfoArgs),
    /// Benchmark KdaSplit on the GPU against the copy ceiling and the graph
    /// node floor.
    ///
    /// Measures on GPU 0, in one run: the copy ceiling (a DSL copy kernel),
    /// the graph kernel-node floor, and KdaSplit over heads x batch x tokens x
    /// schedule (state rotating over >= 4 x L2, PDL-chained steps in CUDA
    /// graphs, medians of event-timed replays). Prints markdown tables with
    /// verdicts against the targets; --json writes everything. Without a GPU
    /// it says so, measures nothing and exits 4.
    #[command(args_override_self = true, after_help = kda_split::bench::AFTER_HELP)]
    Bench(bench::BenchArgs),
    /// Search the schedule space on the GPU and write the tuned table that
    /// `--schedule auto` uses.
    ///
    /// Searches KdaSplit's schedule space on GPU 0 for each (heads, batch,
    /// tokens) point with the bench's workload (state rotating over >= 4 x L2,
    /// PDL-chained steps in CUDA graphs): every valid schedule timed briefly,
    /// the fastest few and the seed's defaults timed again in full; writes the
    /// tuned table that `--schedule auto` and KdaConfig::tuned use. Schedules
    /// that spill registers under ptxas (-arch=sm_90a) are neither finalists
    /// nor chosen (not checked where ptxas is not found).
    #[command(
        args_override_self = true,
        after_help = kda_split::bench::autotune::AFTER_HELP
    )]
    Autotune(Box<bench::AutotuneArgs>),
}

/// Why a command failed, with the process exit code it maps to.
#[derive(Debug)]
pub struct Failure {
    pub code: u8,
    pub message: String,
}

impl Failure {
    /// Exit 1: the results are wrong.
    pub fn mismatch(message: impl Into<String>) -> Self {
        Self {
            code: 1,
            message: message.into(),
        }
    }

    /// Exit 2: a usage error.
    pub fn usage(message: impl Into<String>) -> Self {
        Self {
            code: 2,
            message: message.into(),
        }
    }

    /// Exit 2: the configuration breaks the constructor's constraints.
    pub fn config(error: &ConfigError) -> Self {
        Self::usage(format!("invalid configuration: {error}"))
    }

    /// Exit 3: a bad case file or arguments that break the caller contract.
    pub fn input(message: impl Into<String>) -> Self {
        Self {
            code: 3,
            message: message.into(),
        }
    }

    /// Exit 4: the device, the compiler or ptxas failed.
    pub fn device(message: impl Into<String>) -> Self {
        Self {
            code: 4,
            message: message.into(),
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

pub type CliResult = Result<(), Failure>;

/// clap's report of flags it cannot parse, with its exit code (2; 0 for
/// `--help` and `--version`), except that `bench` and `autotune` keep the
/// exit code 4 they had when they parsed their own flags.
fn bad_flags(e: &clap::Error) -> ExitCode {
    let _ = e.print();
    let tool = std::env::args_os().nth(1);
    let tool = tool.as_ref().and_then(|a| a.to_str());
    if e.use_stderr() && matches!(tool, Some("bench" | "autotune")) {
        ExitCode::from(4)
    } else {
        ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2))
    }
}

/// Parse the command line, run it, map the outcome to an exit code.
pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return bad_flags(&e),
    };
    // Ctrl-C or SIGTERM during a write removes the half-written temporary
    // file (issue 32 item 2); without it the signal still ends the run.
    if let Err(e) = kda_host::output::remove_temporaries_on_signals() {
        eprintln!("warning: temporary files will not be removed on a signal: {e}");
    }
    let result = match cli.command {
        None => demo::demo(&cli.demo),
        Some(Command::Run(args)) => run::run(&args),
        Some(Command::GenCase(args)) => gen_case::gen_case(&args),
        Some(Command::Ptx(args)) => ptx::ptx(&args),
        Some(Command::Info(args)) => info::info(&args),
        Some(Command::Bench(args)) => bench::bench(&args),
        Some(Command::Autotune(args)) => bench::autotune(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("error: {failure}");
            ExitCode::from(failure.code)
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::Cli;

    /// clap prints doc comments as written, so a rustdoc escape such as
    /// `\[` would show in `--help` verbatim: every command's help (short and
    /// long) is free of them.
    #[test]
    fn help_has_no_rustdoc_escapes() {
        fn check(cmd: &mut clap::Command, name: &str) {
            for help in [cmd.render_help(), cmd.render_long_help()] {
                let help = help.to_string();
                let escaped = |line: &&str| {
                    line.as_bytes()
                        .windows(2)
                        .any(|w| w[0] == b'\\' && w[1].is_ascii_punctuation())
                };
                if let Some(line) = help.lines().find(escaped) {
                    panic!("`{name} --help` prints a rustdoc escape: {line}");
                }
            }
            for sub in cmd.get_subcommands_mut() {
                let name = format!("{name} {}", sub.get_name());
                check(sub, &name);
            }
        }
        let mut cmd = Cli::command();
        cmd.build();
        check(&mut cmd, "kda-split");
    }
}
