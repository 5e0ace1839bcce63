//! Flags shared by several subcommands, and how configurations are printed.

use std::time::Duration;

use clap::{Args, ValueEnum};
use kda_split::{ConvLayout, DtBias, GateInputs, KdaConfig, RawGateOrder};

/// `--schedule` of every command (`kda_split::bench::Candidate`: one parser
/// for all).
pub use kda_split::bench::Candidate as Schedule;

use super::Failure;

/// The default configuration of the demo and `ptx`: 12 heads (a
/// tensor-parallel rank of 8 for 96 heads, the seed's fast-math case), 64
/// requests, single-token decode, gate mode 0, bias on, the tuned schedule
/// (`--schedule auto`). The simulator runs it in about a second.
pub const DEFAULT_HEADS: u32 = 12;
pub const DEFAULT_BATCH: u32 = 64;

/// A single configuration: the `KdaSplit` constructor's arguments.
#[derive(Debug, Clone, Args)]
pub struct ConfigArgs {
    /// Heads per launch (grid y).
    #[arg(long, default_value_t = DEFAULT_HEADS)]
    pub heads: u32,
    /// Requests B (the constructor's `batch`; it picks the default cluster
    /// and lanes).
    #[arg(long, default_value_t = DEFAULT_BATCH)]
    pub batch: u32,
    /// Tokens per request T, 1..=8 (T > 1: speculative verify).
    #[arg(long, default_value_t = 1)]
    pub tokens: u32,
    /// F_B reduction order: 0 (one MMA chain), 1 (four MMA chains), 2 (f32
    /// FMA chains, exactly reproducible).
    #[arg(long, default_value_t = 0)]
    pub gate_mode: u32,
    #[command(flatten)]
    pub bias: BiasArgs,
    /// Schedule: `auto` (the tuned table's for this configuration), `seed`
    /// (the seed's defaults, 0,0,0), one of the bench's names (e1, e2-c2, ...)
    /// or `early,lanes,occupancy[,cluster[,evict[,bulk_store[,balance]]]]` (zeros select the seed's
    /// defaults).
    #[arg(long, default_value = "auto")]
    pub schedule: Schedule,
}

impl ConfigArgs {
    /// The validated configuration, or exit 2 with the constructor's error.
    pub fn config(&self) -> Result<KdaConfig, Failure> {
        self.schedule
            .config(|raw| {
                KdaConfig::new(
                    self.heads,
                    self.batch,
                    self.gate_mode,
                    self.bias.has_bias(),
                    raw,
                    self.tokens,
                )
            })
            .map_err(|e| Failure::config(&e))
    }
}

/// `--bias` (the default) or `--no-bias`.
#[derive(Debug, Clone, Copy, Args)]
pub struct BiasArgs {
    /// Add the conv bias (the default).
    #[arg(long, overrides_with = "no_bias")]
    bias: bool,
    /// Leave the conv bias out.
    #[arg(long, overrides_with = "bias")]
    no_bias: bool,
}

impl BiasArgs {
    pub fn has_bias(self) -> bool {
        !self.no_bias
    }
}

/// Where to run.
/// Most `--repeat` replays: each keeps one event time, and more than this is
/// seconds of GPU time for no better median.
pub const MAX_REPEAT: usize = 100_000;

fn repeat_count(text: &str) -> Result<usize, String> {
    let n: usize = text.parse().map_err(|e| format!("{e}"))?;
    if n > MAX_REPEAT {
        return Err(format!("at most {MAX_REPEAT} replays; got {n}"));
    }
    Ok(n)
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum DeviceArg {
    /// GPU 0 if a CUDA driver and an sm_90 GPU are there, else the simulator.
    #[default]
    Auto,
    /// GPU 0; fail if there is none.
    Cuda,
    /// The CPU simulator.
    Sim,
}

/// Device and timing flags of the commands that launch.
#[derive(Debug, Clone, Args)]
pub struct DeviceArgs {
    /// Where to run.
    #[arg(long, value_enum, default_value_t = DeviceArg::Auto)]
    pub device: DeviceArg,
    /// GPU: timed graph replays of the launch (the median is printed), at
    /// most 100000.
    #[arg(long, default_value_t = 50, value_parser = repeat_count)]
    pub repeat: usize,
    /// Simulator: seeded random warp interleavings instead of the
    /// deterministic round robin.
    #[arg(long)]
    pub sim_seed: Option<u64>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum GateInputsArg {
    /// f_a and f_b on grids where every f32 partial sum is exact: raw gates
    /// are bit-identical in every gate mode.
    #[default]
    Grid,
    /// Plain bf16 Gaussians: about 4 in 65 536 raw gates may flip by one bf16
    /// ulp between orders.
    Gaussian,
}

impl From<GateInputsArg> for GateInputs {
    fn from(g: GateInputsArg) -> Self {
        match g {
            GateInputsArg::Grid => GateInputs::Grid,
            GateInputsArg::Gaussian => GateInputs::Gaussian,
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum DtBiasArg {
    /// N(-1, 1): decays spread over [e^lower_bound, 1].
    #[default]
    Spread,
    /// fla's inverse-softplus init: almost every decay is exactly 1.
    Fla,
}

impl From<DtBiasArg> for DtBias {
    fn from(d: DtBiasArg) -> Self {
        match d {
            DtBiasArg::Spread => DtBias::Spread,
            DtBiasArg::Fla => DtBias::Fla,
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum ConvLayoutArg {
    /// vLLM's DS layout (blocks, dim, state_len): taps contiguous.
    #[default]
    Ds,
    /// vLLM's SD layout (blocks, state_len, dim): channels contiguous.
    Sd,
}

impl From<ConvLayoutArg> for ConvLayout {
    fn from(c: ConvLayoutArg) -> Self {
        match c {
            ConvLayoutArg::Ds => ConvLayout::Ds,
            ConvLayoutArg::Sd => ConvLayout::Sd,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RawGateOrderArg {
    /// The exact dot product, rounded once (every mode with grid inputs).
    Exact,
    /// Gate mode 2's f32 order, bit-exact with the kernel in mode 2.
    Mode2,
}

impl From<RawGateOrderArg> for RawGateOrder {
    fn from(o: RawGateOrderArg) -> Self {
        match o {
            RawGateOrderArg::Exact => RawGateOrder::Exact,
            RawGateOrderArg::Mode2 => RawGateOrder::Mode2,
        }
    }
}

/// The raw-gate order whose expectations match a gate mode bit for bit.
pub fn order_for(cfg: &KdaConfig) -> RawGateOrder {
    match cfg.gate_mode {
        kda_split::GateMode::Fma => RawGateOrder::Mode2,
        _ => RawGateOrder::Exact,
    }
}

/// One line naming a configuration and what its schedule resolves to.
pub fn describe(cfg: &KdaConfig) -> String {
    let s = &cfg.schedule;
    format!(
        "heads {}, batch {}, tokens {}, gate mode {}, bias {}; schedule [{}]: cluster {}, lanes {}, early {}, occupancy {}, evict {}{}{}{}",
        cfg.heads,
        cfg.batch,
        cfg.tokens,
        cfg.gate_mode as u32,
        if cfg.has_bias { "on" } else { "off" },
        raw_schedule(cfg),
        cfg.cluster(),
        cfg.lanes(),
        s.early,
        if s.occupancy == 0 {
            "-".to_string()
        } else {
            s.occupancy.to_string()
        },
        if s.evict { "on" } else { "off" },
        if s.bulk_store { ", bulk store" } else { "" },
        if s.balance { ", balance" } else { "" },
        if cfg.fast_math() { ", fast math" } else { "" },
    )
}

/// The schedule as `early,lanes,occupancy,cluster,evict` (raw values),
/// `,1` after them with bulk_store (schedule entry 6) on, `,0,1` or `,1,1`
/// with balance (entry 7) on.
pub fn raw_schedule(cfg: &KdaConfig) -> String {
    cfg.schedule.raw().flag()
}

/// A compact label: `H12 B8 T1 mode0 bias1 sched[0,0,0,0,0]`.
pub fn label(cfg: &KdaConfig) -> String {
    format!(
        "H{} B{} T{} mode{} bias{} sched[{}]",
        cfg.heads,
        cfg.batch,
        cfg.tokens,
        cfg.gate_mode as u32,
        u8::from(cfg.has_bias),
        raw_schedule(cfg)
    )
}

/// `812 µs`, `12.3 ms`, `1.52 s`.
pub fn fmt_duration(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s < 1e-3 {
        format!("{:.0} µs", s * 1e6)
    } else if s < 1.0 {
        format!("{:.1} ms", s * 1e3)
    } else {
        format!("{s:.2} s")
    }
}

/// The command-line spelling of a value (`grid`, `mode2`, ...).
pub fn name<T: ValueEnum>(value: T) -> String {
    value
        .to_possible_value()
        .map(|v| v.get_name().to_string())
        .unwrap_or_default()
}
