//! `gen-case`: write a generated case file (spec §10) with the f64 reference
//! results as `expected.*` (unless `--no-expected`).

use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use kda_split::generator::{GenError, case_limit};
use kda_split::{Case, CaseMeta, GenOptions, KdaConfig, generate};
use serde_json::json;

use super::options::{
    BiasArgs, ConvLayoutArg, DtBiasArg, GateInputsArg, RawGateOrderArg, fmt_duration, name,
};
use super::{CliResult, Failure};

#[derive(Debug, Clone, Args)]
pub struct GenCaseArgs {
    /// Where to write the case (`.safetensors`).
    #[arg(long, short, value_name = "FILE")]
    pub out: PathBuf,
    /// Heads per launch. (The defaults make a small case, about 1 MiB.)
    #[arg(long, default_value_t = 2)]
    pub heads: u32,
    /// Requests B.
    #[arg(long, default_value_t = 4)]
    pub batch: u32,
    /// Tokens per request T, 1..=8.
    #[arg(long, default_value_t = 1)]
    pub tokens: u32,
    #[command(flatten)]
    pub bias: BiasArgs,
    /// Seed of every random draw.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// How the raw gate's operands (f_a = `raw_gate`, `f_b_weight`) are drawn.
    #[arg(long, value_enum, default_value_t = GateInputsArg::Grid)]
    pub gate_inputs: GateInputsArg,
    /// How `dt_bias` is drawn.
    #[arg(long, value_enum, default_value_t = DtBiasArg::Spread)]
    pub dt_bias: DtBiasArg,
    /// Probability that a request is padding (read slot 0 or -1).
    #[arg(long, default_value_t = 0.25)]
    pub padding: f64,
    /// Probability that an eligible write slot of an active T > 1 request
    /// is a hole (0 or -1): its output is computed, its state not stored.
    #[arg(long, default_value_t = 0.25)]
    pub holes: f64,
    /// Cache slots S (at least 1 + B*T). Default: B*T + 3.
    #[arg(long)]
    pub num_slots: Option<usize>,
    /// Store `weights` as F32 (vLLM keeps conv weights in f32).
    #[arg(long)]
    pub weights_f32: bool,
    /// Memory layout behind the `[slot, 3*dim, width]` conv-state view.
    #[arg(long, value_enum, default_value_t = ConvLayoutArg::Ds)]
    pub conv_layout: ConvLayoutArg,
    /// Conv-state columns beyond the ones the launch uses (never touched).
    #[arg(long, default_value_t = 0)]
    pub conv_extra: usize,
    /// `slots` columns beyond T for T > 1 (never read).
    #[arg(long, default_value_t = 0)]
    pub slot_extra: usize,
    /// The decay's lower bound (log-space).
    #[arg(long, default_value_t = -5.0, allow_negative_numbers = true)]
    pub lower_bound: f32,
    /// RMSNorm epsilon (finite, at least 0).
    #[arg(long, default_value_t = 1e-5)]
    pub eps: f32,
    /// Summation order of the reference's raw gates: `exact` matches every
    /// gate mode on grid inputs; `mode2` matches gate mode 2 bit for bit on
    /// any inputs.
    #[arg(long, value_enum, default_value_t = RawGateOrderArg::Exact)]
    pub raw_gate_order: RawGateOrderArg,
    /// Write the inputs only (`run` then computes the reference itself).
    #[arg(long)]
    pub no_expected: bool,
}

pub fn gen_case(a: &GenCaseArgs) -> CliResult {
    // The shapes must make a valid launch: the constructor's checks.
    KdaConfig::new(a.heads, a.batch, 0, a.bias.has_bias(), &[0, 0, 0], a.tokens)
        .map_err(|e| Failure::config(&e))?;
    for (name, p) in [("--padding", a.padding), ("--holes", a.holes)] {
        if !(0.0..=1.0).contains(&p) {
            return Err(Failure::usage(format!(
                "{name} is a probability in [0, 1]; got {p}"
            )));
        }
    }
    for (name, v) in [("--lower-bound", a.lower_bound), ("--eps", a.eps)] {
        if !v.is_finite() {
            return Err(Failure::usage(format!("{name} must be finite; got {v}")));
        }
    }
    // RMSNorm adds eps to a mean of squares under a square root: a negative
    // one gives NaN for small rows (issue 32 item 7: `--eps=-1` was written
    // into the case file).
    if a.eps < 0.0 {
        return Err(Failure::usage(format!(
            "--eps is RMSNorm's epsilon and must be at least 0; got {}",
            a.eps
        )));
    }
    let mut options = GenOptions::new(a.heads, a.batch as usize, a.tokens)
        .seed(a.seed)
        .has_bias(a.bias.has_bias())
        .gate_inputs(a.gate_inputs.into())
        .dt_bias(a.dt_bias.into())
        .padding(a.padding)
        .holes(a.holes)
        .weights_f32(a.weights_f32)
        .conv_layout(a.conv_layout.into())
        .conv_extra(a.conv_extra)
        .slot_extra(a.slot_extra)
        .lower_bound(a.lower_bound)
        .eps(a.eps);
    if let Some(slots) = a.num_slots {
        options = options.num_slots(slots);
    }
    // Sizes first (checked arithmetic, the memory limit), then the output
    // path: nothing is allocated or computed before both are known to work.
    check_options(&options, a)?;
    super::output::check(&a.out)?;
    let start = Instant::now();
    let case = if a.no_expected {
        let mut extra = serde_json::Map::new();
        extra.insert("gate_inputs".into(), json!(name(a.gate_inputs)));
        extra.insert("dt_bias".into(), json!(name(a.dt_bias)));
        Case {
            meta: CaseMeta {
                heads: a.heads,
                batch: a.batch,
                tokens: a.tokens,
                has_bias: a.bias.has_bias(),
                seed: a.seed,
                num_slots: options.resolved_num_slots(),
                extra,
            },
            args: generate(&options),
            expected: None,
        }
    } else {
        Case::generate(&options, a.raw_gate_order.into())
            .map_err(|e| Failure::input(format!("generating the case: {e}")))?
    };
    let elapsed = start.elapsed();
    case.write(&a.out)
        .map_err(|e| Failure::input(format!("writing the case: {e}")))?;
    let bytes = std::fs::metadata(&a.out).map(|m| m.len()).unwrap_or(0);
    say!(
        "wrote {}: heads {}, {} requests x {} tokens, bias {}, {} cache slots, seed {}, {} gate inputs, {} dt_bias, {} ({:.1} MiB)",
        a.out.display(),
        a.heads,
        a.batch,
        a.tokens,
        if a.bias.has_bias() { "on" } else { "off" },
        options.resolved_num_slots(),
        a.seed,
        name(a.gate_inputs),
        name(a.dt_bias),
        if a.no_expected {
            "inputs only".to_string()
        } else {
            format!(
                "expected.* from the f64 reference ({} raw-gate order) in {}",
                name(a.raw_gate_order),
                fmt_duration(elapsed)
            )
        },
        bytes as f64 / (1 << 20) as f64
    );
    Ok(())
}

/// What the generator would panic, abort or swap on, as exit 2 naming the
/// flag or the limit.
fn check_options(options: &GenOptions, a: &GenCaseArgs) -> CliResult {
    match options.check(&case_limit(), !a.no_expected) {
        Ok(_) => Ok(()),
        Err(GenError::TooFewSlots { slots, .. }) => Err(Failure::usage(format!(
            "--num-slots {slots} is too small: each of the {} requests draws {} distinct slots \
             and slot 0 is the null block, so at least {} are needed",
            a.batch,
            a.tokens,
            u64::from(a.batch) * u64::from(a.tokens) + 1
        ))),
        Err(GenError::Probability { name, p }) => Err(Failure::usage(format!(
            "--{name} is a probability in [0, 1]; got {p}"
        ))),
        Err(e @ GenError::SlotIds { .. }) => Err(Failure::usage(format!("--num-slots: {e}"))),
        Err(e @ GenError::Limit(_)) => Err(Failure::usage(format!(
            "--heads {}, --batch {}, --tokens {}, {} slots, --conv-extra {}, --slot-extra {}: {e}",
            a.heads,
            a.batch,
            a.tokens,
            options.resolved_num_slots(),
            a.conv_extra,
            a.slot_extra
        ))),
    }
}
