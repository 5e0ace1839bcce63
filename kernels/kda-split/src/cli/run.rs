//! `run --case FILE`: run a case file (spec §10) and check it.
//!
//! Every `expected.*` tensor is checked with the spec's tolerances (output
//! within about 1 bf16 ulp, written state pages within 1e-4 relative, the
//! conv state, the unwritten state pages and the padding rows bit-exact). A
//! case without expectations is checked against the f64 reference, computed
//! here. `--out` writes the call's results as a case file: the arguments as
//! they are after the call (`output`, `state` and `conv_state` hold the
//! results, the read-only inputs are unchanged) with the same `expected.*`,
//! so each result sits next to its expectation under the same shape.

use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use kda_split::{
    Actual, Case, CaseError, Expected, HostData, HostTensor, KdaArgs, KdaConfig, Request, compare,
    reference, resolve,
};
use serde_json::json;

use super::demo::finish;
use super::exec::{Opened, check_contract, phase};
use super::options::{DeviceArgs, Schedule, describe, order_for, raw_schedule};
use super::{CliResult, Failure};

/// `meta_json` key marking a file written by `run --out`.
const RESULTS_OF: &str = "results_of";

#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// The case file (`.safetensors`, spec §10).
    #[arg(long, value_name = "FILE")]
    pub case: PathBuf,
    #[command(flatten)]
    pub device: DeviceArgs,
    /// F_B reduction order 0, 1 or 2. Default: 2 if the case's expectations
    /// were computed in gate mode 2's order (`meta_json.raw_gate_order =
    /// "mode2"`), else 0.
    #[arg(long)]
    pub gate_mode: Option<u32>,
    /// Schedule: `auto` (the tuned table's for the case's heads, batch and
    /// tokens), `seed` (the seed's defaults, 0,0,0) or
    /// `early,lanes,occupancy[,cluster[,evict[,bulk_store[,balance]]]]` (zeros select the seed's
    /// defaults).
    #[arg(long, default_value = "auto")]
    pub schedule: Schedule,
    /// Write the results as a case file: the arguments after the call and
    /// the expected results.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

pub fn run(a: &RunArgs) -> CliResult {
    if let Some(out) = &a.out {
        super::output::not_the_input(&a.case, out, "--out")?;
        super::output::check(out)?;
    }
    let path = a.case.display();
    let start = Instant::now();
    let case = read_case(&a.case)?;
    let read = start.elapsed();
    if let Some(source) = case.meta.extra.get(RESULTS_OF) {
        return Err(Failure::input(format!(
            "{path} holds the results of an earlier run (meta_json.{RESULTS_OF} = {source}): its \
             output, state and conv_state are what that call wrote and its expected.* describe \
             that call, not a new one; run the original case instead"
        )));
    }
    let gate_mode = a.gate_mode.unwrap_or_else(|| {
        match case
            .meta
            .extra
            .get("raw_gate_order")
            .and_then(|v| v.as_str())
        {
            Some("mode2") => 2,
            _ => 0,
        }
    });
    let cfg = case_config(&case, gate_mode, &a.schedule)?;
    say!("case: {path}");
    say!("KdaSplit: {}", describe(&cfg));
    if let Some(note) = a.schedule.note(&cfg) {
        say!("{note}");
    }
    check_contract(&cfg, &case.args)?;
    say!(
        "case: {} requests of which {} padding, {} cache slots, seed {}",
        case.args.requests(),
        padding_requests(&cfg, &case.args),
        case.meta.num_slots,
        case.meta.seed
    );
    if let Some(note) = order_note(&case, &cfg) {
        say!("note: {note}");
    }
    let dev = Opened::open(&a.device)?;
    say!("{}", dev.line());
    say!("case file:");
    phase("read + validate the case file", read, "");
    let expected = match &case.expected {
        Some(expected) => expected.clone(),
        None => {
            let start = Instant::now();
            let expected = reference(&cfg, &case.args, order_for(&cfg)).map_err(|errors| {
                let list: Vec<String> = errors.iter().map(ToString::to_string).collect();
                Failure::input(format!("reference: {}", list.join("; ")))
            })?;
            phase("f64 reference (none in the file)", start.elapsed(), "");
            expected
        }
    };
    let actual = dev.execute(&cfg, &case.args, a.device.repeat)?;
    let report = compare(&cfg, &case.args, &actual, &expected);
    if let Some(out) = &a.out {
        let results = results_case(&case, &cfg, &actual, expected, &dev, report.passed())?;
        let bytes = results
            .to_bytes()
            .map_err(|e| Failure::input(format!("writing the results: {e}")))?;
        super::output::write(out, &bytes)?;
        say!("wrote the results to {}", out.display());
    }
    finish(&report)
}

/// The case's configuration for a gate mode and schedule (exit 2 if invalid).
pub fn case_config(case: &Case, gate_mode: u32, schedule: &Schedule) -> Result<KdaConfig, Failure> {
    schedule
        .config(|raw| case.meta.config(gate_mode, raw))
        .map_err(|e| Failure::config(&e))
}

/// Reads a case file; errors name the file once and the tensor (exit 3).
pub fn read_case(path: &std::path::Path) -> Result<Case, Failure> {
    Case::read(path).map_err(|e| match e {
        CaseError::Io { .. } | CaseError::TooLarge(_) => Failure::input(e.to_string()),
        CaseError::Changed(ref why) if why.starts_with(&path.display().to_string()) => {
            Failure::input(e.to_string())
        }
        _ => Failure::input(format!("{}: {e}", path.display())),
    })
}

/// Requests whose read slot is padding (spec §2). `args` must be valid.
pub fn padding_requests(cfg: &KdaConfig, args: &KdaArgs) -> usize {
    (0..args.requests())
        .filter(|&b| resolve(cfg.tokens, args, b) == Request::Padding)
        .count()
}

/// Warns when Gaussian gate inputs meet expectations of another raw-gate
/// order: a raw gate may then flip by one bf16 ulp (spec §5).
fn order_note(case: &Case, cfg: &KdaConfig) -> Option<String> {
    let extra = &case.meta.extra;
    let gaussian = extra.get("gate_inputs").and_then(|v| v.as_str()) == Some("gaussian");
    let order = extra.get("raw_gate_order").and_then(|v| v.as_str())?;
    let wanted = match order_for(cfg) {
        kda_split::RawGateOrder::Mode2 => "mode2",
        kda_split::RawGateOrder::Exact => "exact",
    };
    (gaussian && order != wanted).then(|| {
        format!(
            "Gaussian gate inputs with `{order}` raw-gate expectations in gate mode {}: a raw gate \
             may round the other way (spec §5) and move one decay column by a few percent",
            cfg.gate_mode as u32
        )
    })
}

/// The case after the call: results in `output`, `state`, `conv_state`.
fn results_case(
    case: &Case,
    cfg: &KdaConfig,
    actual: &Actual,
    expected: Expected,
    dev: &Opened,
    passed: bool,
) -> Result<Case, Failure> {
    let mut meta = case.meta.clone();
    meta.extra.insert(
        RESULTS_OF.into(),
        json!({
            "device": dev.line().trim_start_matches("device: "),
            "gate_mode": cfg.gate_mode as u32,
            "schedule": raw_schedule(cfg),
            "passed": passed,
        }),
    );
    let replace = |t: &HostTensor, data: HostData| {
        HostTensor::new(data, t.shape().to_vec())
            .map_err(|e| Failure::device(format!("the results do not fit the arguments: {e}")))
    };
    let args = &case.args;
    let args = KdaArgs {
        output: replace(&args.output, HostData::Bf16(actual.output.clone()))?,
        state: replace(&args.state, HostData::F32(actual.state.clone()))?,
        conv_state: replace(&args.conv_state, HostData::Bf16(actual.conv_state.clone()))?,
        ..args.clone()
    };
    Ok(Case {
        meta,
        args,
        expected: Some(expected),
    })
}
