//! `kda-split`: the KdaSplit command line. With no arguments it builds the
//! kernel for a default configuration, runs a generated case on the GPU (else
//! on the CPU simulator) and checks it against the float64 reference; the
//! subcommands run case files, write them, and print PTX and ptxas reports.
//! See `docs/kda-split.md`.

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
