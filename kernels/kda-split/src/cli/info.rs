//! `info`: ptxas's resource report per configuration. Every list flag takes
//! comma-separated values and the report covers their cross product; the
//! defaults are the default configurations of heads 6 / 12 / 32 at batch 1 /
//! 64 (the ones `tests/ptxas_matrix.rs` holds to zero spills).

use std::time::Instant;

use clap::Args;
use kda_ir::pipeline::{self, Options};
use kda_ir::ptxas::{self, PtxasError};
use kda_split::KdaConfig;
use kda_split::kernel::residency;

use super::options::{BiasArgs, Schedule, fmt_duration, label};
use super::ptx::kernel;
use super::{CliResult, Failure};

#[derive(Debug, Clone, Args)]
pub struct InfoArgs {
    /// Heads per launch (a comma-separated list).
    #[arg(long, value_delimiter = ',', default_value = "6,12,32")]
    pub heads: Vec<u32>,
    /// Requests B (a list).
    #[arg(long, value_delimiter = ',', default_value = "1,64")]
    pub batch: Vec<u32>,
    /// Tokens per request (a list).
    #[arg(long, value_delimiter = ',', default_value = "1")]
    pub tokens: Vec<u32>,
    /// Gate modes (a list).
    #[arg(long, value_delimiter = ',', default_value = "0")]
    pub gate_mode: Vec<u32>,
    #[command(flatten)]
    pub bias: BiasArgs,
    /// Schedule `early,lanes,occupancy[,cluster[,evict[,bulk_store[,balance]]]]`, `seed` (0,0,0) or
    /// `auto` (the tuned table's for each configuration); repeat the flag
    /// for several schedules.
    #[arg(long, default_value = "0,0,0")]
    pub schedule: Vec<Schedule>,
    /// Build for F32 conv `weights`.
    #[arg(long)]
    pub weights_f32: bool,
    /// Report the generic kernel (strides as launch parameters, as
    /// `tests/ptxas_matrix.rs` builds it) instead of the one `run` launches
    /// for contiguous tensors.
    #[arg(long)]
    pub symbolic_strides: bool,
    /// Also print ptxas's whole `-v` log for each configuration.
    #[arg(long)]
    pub log: bool,
}

pub fn info(a: &InfoArgs) -> CliResult {
    let Some(ptxas_path) = ptxas::find() else {
        return Err(Failure::device(PtxasError::NotFound.to_string()));
    };
    say!("ptxas: {} -arch=sm_90a -v", ptxas_path.display());
    let mut configs = Vec::new();
    for &heads in &a.heads {
        for &batch in &a.batch {
            for &tokens in &a.tokens {
                for &mode in &a.gate_mode {
                    for schedule in &a.schedule {
                        let bias = a.bias.has_bias();
                        let name = format!(
                            "H{heads} B{batch} T{tokens} mode{mode} bias{} sched[{}]",
                            u8::from(bias),
                            schedule.text()
                        );
                        let cfg = schedule
                            .config(|raw| KdaConfig::new(heads, batch, mode, bias, raw, tokens));
                        configs.push((name, cfg));
                    }
                }
            }
        }
    }
    say!(
        "{:<40} {:>2} {:>5} {:>4} {:>12} {:>6} {:>14} {:>4} {:>10} {:>9} {:>9}",
        "configuration",
        "C",
        "lanes",
        "regs",
        "spill st/ld",
        "stack",
        "smem st+dyn",
        "bars",
        "CTAs/SM",
        "state/SM",
        "ptxas"
    );
    let (mut invalid, mut spilled) = (0, 0);
    for (name, cfg) in &configs {
        let cfg = match cfg {
            Ok(cfg) => cfg,
            Err(e) => {
                invalid += 1;
                say!("{name:<40} invalid configuration: {e}");
                continue;
            }
        };
        let kernel = kernel(cfg, a.weights_f32, a.symbolic_strides)?;
        let compiled = pipeline::compile(&kernel, &Options::default())
            .map_err(|e| Failure::device(format!("{}: compiling: {e}", label(cfg))))?;
        let start = Instant::now();
        let report = ptxas::assemble(&compiled.ptx)
            .map_err(|e| Failure::device(format!("{}: {e}", label(cfg))))?;
        let took = start.elapsed();
        spilled += usize::from(report.spills() > 0);
        let shared = report.shared_bytes.saturating_add(compiled.layout.bytes);
        let (occupancy, state_kib) = residency(report.registers, shared, cfg.cluster());
        say!(
            "{:<40} {:>2} {:>5} {:>4} {:>12} {:>6} {:>14} {:>4} {:>10} {:>9} {:>9}{}",
            label(cfg),
            cfg.cluster(),
            cfg.lanes(),
            report.registers,
            format!("{}/{} B", report.spill_stores, report.spill_loads),
            format!("{} B", report.stack_frame),
            format!("{}+{} B", report.shared_bytes, compiled.layout.bytes),
            report.barriers,
            format!("{} {}", occupancy.ctas, occupancy.limiter.name()),
            format!("{state_kib} KiB"),
            fmt_duration(took),
            if report.spills() > 0 { "  SPILLS" } else { "" }
        );
        if a.log {
            for line in report.log.lines() {
                say!("    {line}");
            }
        }
    }
    if spilled > 0 {
        say!("{spilled} configuration(s) spill registers");
    }
    if invalid > 0 {
        return Err(Failure::usage(format!(
            "{invalid} of {} configurations are invalid (see above)",
            configs.len()
        )));
    }
    Ok(())
}
