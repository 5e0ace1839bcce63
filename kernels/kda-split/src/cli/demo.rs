//! No subcommand: the README's main job. Build KdaSplit for a configuration,
//! generate a case, run it on the GPU (else the simulator, saying so), check
//! it against the float64 reference and print errors and timing.

use std::time::Instant;

use clap::Args;
use kda_split::generator::case_limit;
use kda_split::{Case, GenOptions, Report, compare};

use super::exec::{Opened, phase};
use super::options::{ConfigArgs, DeviceArgs, GateInputsArg, describe, order_for};
use super::{CliResult, Failure};

#[derive(Debug, Clone, Args)]
pub struct DemoArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    #[command(flatten)]
    pub device: DeviceArgs,
    /// Seed of the generated case.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// How the raw gate's operands are drawn.
    #[arg(long, value_enum, default_value_t = GateInputsArg::Grid)]
    pub gate_inputs: GateInputsArg,
}

pub fn demo(a: &DemoArgs) -> CliResult {
    let cfg = a.config.config()?;
    say!("KdaSplit: {}", describe(&cfg));
    if let Some(note) = a.config.schedule.note(&cfg) {
        say!("{note}");
    }
    let options = GenOptions::new(cfg.heads, cfg.batch as usize, cfg.tokens)
        .seed(a.seed)
        .has_bias(cfg.has_bias)
        .gate_inputs(a.gate_inputs.into());
    // Before anything is allocated: a batch or head count this machine
    // cannot hold is a usage error naming the limit, not an abort.
    options
        .check(&case_limit(), true)
        .map_err(|e| Failure::usage(format!("--heads {} --batch {}: {e}", cfg.heads, cfg.batch)))?;
    let start = Instant::now();
    let case = Case::generate(&options, order_for(&cfg))
        .map_err(|e| Failure::input(format!("generating the case: {e}")))?;
    let generated = start.elapsed();
    say!(
        "case: generated (seed {}, {} gate inputs), {} requests of which {} padding, {} cache slots",
        a.seed,
        super::options::name(a.gate_inputs),
        cfg.batch,
        super::run::padding_requests(&cfg, &case.args),
        options.resolved_num_slots(),
    );
    let dev = Opened::open(&a.device)?;
    say!("{}", dev.line());
    phase_line_reference(generated);
    let actual = dev.execute(&cfg, &case.args, a.device.repeat)?;
    let expected = case
        .expected
        .as_ref()
        .expect("generated cases carry expectations");
    let report = compare(&cfg, &case.args, &actual, expected);
    finish(&report)
}

fn phase_line_reference(generated: std::time::Duration) {
    say!("reference:");
    phase(
        "generate + f64 reference (CPU)",
        generated,
        "spec §3 in float64",
    );
}

/// Prints the report; exit 1 if a check failed.
pub fn finish(report: &Report) -> CliResult {
    say!("check against the expected results (spec §10 tolerances):");
    for line in report.to_string().lines() {
        say!("  {line}");
    }
    if report.passed() {
        Ok(())
    } else {
        let failed: Vec<&str> = report
            .checks
            .iter()
            .filter(|c| !c.passed)
            .map(|c| c.name)
            .collect();
        Err(Failure::mismatch(format!(
            "results do not match: {}",
            failed.join(", ")
        )))
    }
}
