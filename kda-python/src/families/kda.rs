//! KdaSplit (spec `KDA.md`): the 17 positional arguments, plus `accepted`
//! when `tokens > 1`.

use kda_host::HostTensor;
use kda_ir::Kernel;
use kda_split::{Arg, KdaArgs, KdaConfig};

use super::{Named, scalar};
use crate::engine::Family;

/// `schedule="auto"` (the tuned table, chosen per batch) or an explicit
/// `[early, lanes, occupancy[, cluster[, evict[, bulk_store[, balance]]]]]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ScheduleChoice {
    Auto,
    Explicit(Vec<u32>),
}

pub struct Kda {
    pub heads: u32,
    pub tokens: u32,
    pub gate_mode: u32,
    pub has_bias: bool,
    pub schedule: ScheduleChoice,
}

impl Family for Kda {
    type Config = KdaConfig;
    type Args = KdaArgs;
    crate_checks!(kda_split, |cfg| cfg);
    const CLASS: &'static str = "KdaSplit";

    fn params(&self) -> Vec<(&'static str, bool)> {
        Arg::for_tokens(self.tokens)
            .iter()
            .map(|a| (a.name(), a.is_scalar()))
            .collect()
    }

    fn aligned16(&self) -> &'static [&'static str] {
        &["raw_gate", "state", "f_b_weight"]
    }

    fn tokens(&self) -> u32 {
        self.tokens
    }

    fn config(&self, requests: u32) -> Result<KdaConfig, String> {
        let (h, t, g, b) = (self.heads, self.tokens, self.gate_mode, self.has_bias);
        match &self.schedule {
            ScheduleChoice::Auto => KdaConfig::tuned(h, requests, g, b, t),
            ScheduleChoice::Explicit(s) => KdaConfig::new(h, requests, g, b, s, t),
        }
        .map_err(|e| format!("KdaSplit: {e}"))
    }

    fn assemble(&self, tensors: Vec<HostTensor>, scalars: &[f32]) -> KdaArgs {
        let mut t = Named::new(&self.params(), tensors);
        KdaArgs {
            x: t.take("x"),
            weights: t.take("weights"),
            bias: t.take("bias"),
            conv_state: t.take("conv_state"),
            raw_gate: t.take("raw_gate"),
            beta: t.take("beta"),
            a_log: t.take("a_log"),
            dt_bias: t.take("dt_bias"),
            slots: t.take("slots"),
            state: t.take("state"),
            output: t.take("output"),
            gate: t.take("gate"),
            norm_weight: t.take("norm_weight"),
            lower_bound: scalar(scalars, 0),
            scale: scalar(scalars, 1),
            eps: scalar(scalars, 2),
            f_b_weight: t.take("f_b_weight"),
            accepted: t.optional("accepted"),
        }
    }

    fn kernel_for(cfg: &KdaConfig, args: &KdaArgs) -> Result<Kernel, String> {
        kda_split::run::kernel_for(cfg, args).map_err(|e| e.to_string())
    }

    fn contiguous_kernel(cfg: &KdaConfig) -> Result<Kernel, String> {
        kda_split::run::contiguous_kernel(cfg, false).map_err(|e| e.to_string())
    }

    fn grid(cfg: &KdaConfig, requests: u32) -> [u32; 3] {
        [cfg.cluster(), cfg.heads, requests]
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
            // Schedule entry 6 (T > 1: each token's state rows through shared
            // memory, one bulk store per token); `schedule` shows it too.
            d.push(("bulk_store", "true".into()));
        }
        if s.balance {
            // Schedule entry 7 (clusters of > 1 CTA: the load-balancing
            // cluster scheduling policy); `schedule` shows it too.
            d.push(("balance", "true".into()));
        }
        d
    }
}
