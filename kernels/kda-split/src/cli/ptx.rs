//! `ptx`: the source-annotated PTX (or the scheduled IR) of a configuration.
//! Each PTX instruction group is preceded by a `//` comment naming the DSL
//! source line (`kernels/kda-split/src/kernel.rs:LINE`) and its IR.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;
use kda_ir::Kernel;
use kda_ir::pipeline::{self, Options};
use kda_split::KdaConfig;
use kda_split::kernel::{Dtypes, build};
use kda_split::run::{contiguous_kernel, kernel_for};

use super::options::{ConfigArgs, describe};
use super::{CliResult, Failure};

#[derive(Debug, Clone, Args)]
pub struct PtxArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Build for F32 conv `weights` (vLLM's dtype) instead of BF16.
    #[arg(long)]
    pub weights_f32: bool,
    /// Build exactly what `run --case FILE` launches: the file's heads,
    /// batch, tokens and bias, its tensors' dtypes and strides (with
    /// `--gate-mode` and `--schedule` from the flags).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["heads", "batch", "tokens", "bias", "no_bias", "weights_f32", "symbolic_strides"])]
    pub case: Option<PathBuf>,
    /// Leave every stride a launch-time parameter (the generic kernel)
    /// instead of specialising for contiguous tensors as `run` does.
    #[arg(long)]
    pub symbolic_strides: bool,
    /// Print the scheduled IR (text form) instead of the PTX.
    #[arg(long)]
    pub ir: bool,
    /// Write to FILE instead of standard output.
    #[arg(long, short, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

pub fn ptx(a: &PtxArgs) -> CliResult {
    if let Some(out) = &a.out {
        if let Some(case) = &a.case {
            super::output::not_the_input(case, out, "--out")?;
        }
        super::output::check(out)?;
    }
    let (cfg, kernel) = match &a.case {
        Some(path) => {
            let case = super::run::read_case(path)?;
            let cfg = super::run::case_config(&case, a.config.gate_mode, &a.config.schedule)?;
            super::exec::check_contract(&cfg, &case.args)?;
            let kernel = kernel_for(&cfg, &case.args).map_err(|e| Failure::input(e.to_string()))?;
            (cfg, kernel)
        }
        None => {
            let cfg = a.config.config()?;
            let kernel = kernel(&cfg, a.weights_f32, a.symbolic_strides)?;
            (cfg, kernel)
        }
    };
    let compiled = pipeline::compile(&kernel, &Options::default())
        .map_err(|e| Failure::device(format!("compiling the kernel: {e}")))?;
    let text = if a.ir {
        kda_ir::write::write_kernel(&compiled.scheduled)
    } else {
        compiled.ptx
    };
    let header = header(&cfg, a.ir);
    match &a.out {
        Some(path) => {
            super::output::write(path, format!("{header}{text}").as_bytes())?;
            eprintln!(
                "wrote {} ({} lines) for {}",
                path.display(),
                text.lines().count(),
                describe(&cfg)
            );
            Ok(())
        }
        None => {
            let mut stdout = std::io::stdout().lock();
            match stdout
                .write_all(header.as_bytes())
                .and_then(|()| stdout.write_all(text.as_bytes()))
                .and_then(|()| stdout.flush())
            {
                // `kda-split ptx | head` closes the pipe early: not an error.
                Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
                    Err(Failure::input(format!("writing the PTX: {e}")))
                }
                _ => Ok(()),
            }
        }
    }
}

/// The kernel `run` would launch for contiguous tensors of `cfg` (strides
/// as PTX constants), or with `symbolic` the generic one whose strides are
/// parameters ([`contiguous_kernel`]).
pub fn kernel(cfg: &KdaConfig, weights_f32: bool, symbolic: bool) -> Result<Kernel, Failure> {
    if symbolic {
        return build(cfg, &dtypes(weights_f32)).map_err(|e| Failure::input(e.to_string()));
    }
    contiguous_kernel(cfg, weights_f32).map_err(|e| Failure::input(e.to_string()))
}

fn dtypes(weights_f32: bool) -> Dtypes {
    Dtypes {
        weights: if weights_f32 {
            kda_ir::Scalar::F32
        } else {
            kda_ir::Scalar::BF16
        },
        ..Dtypes::default()
    }
}

/// A comment naming the configuration, in the output's comment syntax.
fn header(cfg: &KdaConfig, ir: bool) -> String {
    let comment = if ir { ";" } else { "//" };
    format!("{comment} kda-split: {}\n", describe(cfg))
}
