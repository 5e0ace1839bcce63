//! KdaSplit as one object ([`kda_host::kernel::HostKernel`]): what the
//! Python binding, the bench and the host programs read. The parameter list
//! is the kernel signature's (`kernel::kda_split::params`).

use kda_host::KernelArgs;
use kda_host::kernel::{self, ArgError, CallArgs, HostKernel};
use kda_ir::desc::ParamDesc;
use kda_ir::{Kernel, Scalar};

use crate::args::KdaArgs;
use crate::config::KdaConfig;
use crate::kernel::{self as k, Dtypes};
use crate::validate::{ArgError as KdaError, validate_layout};

/// `schedule="auto"` (the tuned table, chosen per batch) or an explicit
/// `[early, lanes, occupancy[, cluster[, evict[, bulk_store[, balance]]]]]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ScheduleChoice {
    /// The tuned table's schedule for each batch.
    Auto,
    /// The same schedule at every batch.
    Explicit(Vec<u32>),
}

/// KdaSplit for one configuration (the Python class `KdaSplit`).
#[derive(Clone, Debug)]
///
/// Its fields are set by [`KdaSplitKernel::new`] only, which proves that some
/// batch size makes them a valid configuration.
pub struct KdaSplitKernel {
    heads: u32,
    tokens: u32,
    gate_mode: u32,
    has_bias: bool,
    schedule: ScheduleChoice,
}

impl KdaSplitKernel {
    /// The kernel of a configuration; an error where no batch size makes it
    /// valid.
    pub fn new(
        heads: u32,
        tokens: u32,
        gate_mode: u32,
        has_bias: bool,
        schedule: ScheduleChoice,
    ) -> Result<Self, String> {
        let k = KdaSplitKernel {
            heads,
            tokens,
            gate_mode,
            has_bias,
            schedule,
        };
        match (k.config_for(1), k.config_for(64)) {
            (Err(e), Err(_)) => Err(e),
            _ => Ok(k),
        }
    }

    /// Heads.
    pub fn heads(&self) -> u32 {
        self.heads
    }

    /// Tokens per request (T).
    pub fn tokens(&self) -> u32 {
        self.tokens
    }

    /// Spec §3.3's gate mode.
    pub fn gate_mode(&self) -> u32 {
        self.gate_mode
    }

    /// Whether the conv has a bias.
    pub fn has_bias(&self) -> bool {
        self.has_bias
    }

    /// The schedule, or how it is chosen.
    pub fn schedule(&self) -> &ScheduleChoice {
        &self.schedule
    }

    /// The configuration of a launch over `batch` requests.
    pub fn config_for(&self, batch: u32) -> Result<KdaConfig, String> {
        let (h, t, g, b) = (self.heads, self.tokens, self.gate_mode, self.has_bias);
        match &self.schedule {
            ScheduleChoice::Auto => KdaConfig::tuned(h, batch, g, b, t),
            ScheduleChoice::Explicit(s) => KdaConfig::new(h, batch, g, b, s, t),
        }
        .map_err(|e| format!("KdaSplit: {e}"))
    }

    /// The crate's argument struct of a call (zeros where the elements are
    /// on the GPU).
    pub fn assemble(args: &CallArgs) -> KdaArgs {
        let t = |n| args.host_or_zeros(n);
        KdaArgs {
            x: t("x"),
            weights: t("weights"),
            bias: t("bias"),
            conv_state: t("conv_state"),
            raw_gate: t("raw_gate"),
            beta: t("beta"),
            a_log: t("a_log"),
            dt_bias: t("dt_bias"),
            slots: t("slots"),
            state: t("state"),
            output: t("output"),
            gate: t("gate"),
            norm_weight: t("norm_weight"),
            lower_bound: args.f32("lower_bound"),
            scale: args.f32("scale"),
            eps: args.f32("eps"),
            f_b_weight: t("f_b_weight"),
            accepted: args.tensor("accepted").map(|_| t("accepted")),
        }
    }

    /// A generated case's arguments as a call's.
    pub fn call_args(&self, args: &KdaArgs) -> CallArgs {
        let scalars = crate::run::scalars(args);
        kernel::call_args(&self.params(), &args.named_tensors(), &scalars)
    }
}

impl HostKernel for KdaSplitKernel {
    type Config = KdaConfig;

    fn name(&self) -> &'static str {
        "KdaSplit"
    }

    /// The signature's parameters (they depend on the tokens only).
    fn params(&self) -> Vec<ParamDesc> {
        let cfg = self
            .config_for(1)
            .or_else(|_| self.config_for(64))
            .expect("checked by new: some batch size is valid");
        k::kda_split::params(&cfg)
    }

    fn config(&self, args: &CallArgs) -> Result<KdaConfig, String> {
        let batch = u32::try_from(args.extent("slots", 0).max(1))
            .map_err(|_| "slots: more requests than a launch grid holds".to_string())?;
        self.config_for(batch)
    }

    fn build(cfg: &KdaConfig, args: &CallArgs) -> Result<Kernel, String> {
        let dt = |n| args.dtype(n).unwrap_or(Scalar::BF16);
        let dtypes = Dtypes {
            weights: dt("weights"),
            bias: dt("bias"),
            beta: dt("beta"),
            gate: dt("gate"),
            norm_weight: dt("norm_weight"),
        };
        k::build(cfg, &dtypes).map_err(|e| e.to_string())
    }

    fn grid(cfg: &KdaConfig, args: &CallArgs) -> Result<[u32; 3], String> {
        let b = kernel::grid_requests(args)?;
        Ok([cfg.cluster(), cfg.heads, b])
    }

    fn check_layout(&self, cfg: &KdaConfig, args: &CallArgs) -> Vec<ArgError> {
        let errors = validate_layout(cfg, &Self::assemble(args));
        kernel::arg_errors(errors, |e| matches!(e, KdaError::Dtype { .. }))
    }

    fn value_params(&self) -> &'static [&'static str] {
        &["slots", "accepted"]
    }

    fn check_values(&self, cfg: &KdaConfig, args: &CallArgs) -> Vec<ArgError> {
        kernel::slot_table_errors(cfg.tokens, args)
    }

    /// The configuration of `size` requests (default 1), shown on one
    /// request of contiguous tensors.
    /// Layouts only (no case is built, so huge head counts cost nothing).
    fn example(&self, size: Option<u32>) -> Result<(KdaConfig, CallArgs), String> {
        let cfg = self.config_for(size.unwrap_or(1).max(1))?;
        let mut args = CallArgs::default();
        let layouts = crate::run::contiguous_layouts(cfg.heads, cfg.tokens, false);
        for p in self.params() {
            if let Some((_, dtype, shape)) = layouts.iter().find(|(n, ..)| *n == p.name) {
                let t = kda_host::kernel::ArgTensor {
                    dtype: *dtype,
                    shape: shape.shape.clone(),
                    strides: shape.strides.clone(),
                    data: None,
                };
                args.tensors.push((p.name, t));
            } else if p.is_scalar() {
                args.scalars
                    .push((p.name, kda_runtime::ScalarArg::F32(1.0)));
            }
        }
        Ok((cfg, args))
    }

    fn describe(cfg: &KdaConfig) -> Vec<(&'static str, String)> {
        let s = cfg.resolved_schedule();
        let mut d = vec![
            ("heads", cfg.heads.to_string()),
            ("tokens", cfg.tokens.to_string()),
            ("batch", cfg.batch.to_string()),
            ("gate_mode", (cfg.gate_mode as u32).to_string()),
            ("has_bias", cfg.has_bias.to_string()),
            ("schedule", format!("{:?}", cfg.schedule.raw())),
            ("early", s.early.to_string()),
            ("lanes", s.lanes.to_string()),
            ("occupancy", s.occupancy.to_string()),
            ("cluster", s.cluster.to_string()),
            ("evict", s.evict.to_string()),
        ];
        if s.bulk_store {
            d.push(("bulk_store", "true".into()));
        }
        if s.balance {
            d.push(("balance", "true".into()));
        }
        d
    }
}
