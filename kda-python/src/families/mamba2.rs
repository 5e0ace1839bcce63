//! The Mamba-2 decode step (crate `mamba2_decode`): 9 positional tensors,
//! plus `conv_bias`, `d` and `z` with their flags; one token per request,
//! no scalars.

use kda_host::{HostTensor, KernelArgs};
use kda_ir::Kernel;
use mamba2_decode::kernel::{Plan, Schedule};
use mamba2_decode::{Arg, ConvLayout, GenOptions, Mamba2Args, Mamba2Config};

use super::Named;
use crate::engine::Family;

/// A configuration and the schedule its kernel is built with (the batch's
/// default, `Schedule::for_batch`): kernels are cached by it, so launches
/// below and from `TUNED_BATCH` requests get distinct kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Mamba2Launch {
    pub cfg: Mamba2Config,
    pub schedule: Schedule,
}

pub struct Mamba2 {
    pub cfg: Mamba2Config,
}

impl Family for Mamba2 {
    type Config = Mamba2Launch;
    type Args = Mamba2Args;
    crate_checks!(mamba2_decode, |l| &l.cfg);
    const CLASS: &'static str = "Mamba2Decode";

    fn params(&self) -> Vec<(&'static str, bool)> {
        Arg::for_config(&self.cfg)
            .iter()
            .map(|a| (a.name(), false))
            .collect()
    }

    fn aligned16(&self) -> &'static [&'static str] {
        &["state"]
    }

    fn tokens(&self) -> u32 {
        1
    }

    /// The batch's default schedule (`Schedule::for_batch`): one kernel
    /// below the tuned batch, one from it on (where the two differ).
    fn config(&self, requests: u32) -> Result<Mamba2Launch, String> {
        let batch = usize::try_from(requests).map_err(|e| format!("Mamba2Decode: {e}"))?;
        Ok(Mamba2Launch {
            cfg: self.cfg,
            schedule: Schedule::for_batch(&self.cfg, batch),
        })
    }

    fn assemble(&self, tensors: Vec<HostTensor>, _scalars: &[f32]) -> Mamba2Args {
        let mut t = Named::new(&self.params(), tensors);
        Mamba2Args {
            xbc: t.take("xbc"),
            conv_weight: t.take("conv_weight"),
            conv_bias: t.optional("conv_bias"),
            conv_state: t.take("conv_state"),
            dt: t.take("dt"),
            dt_bias: t.take("dt_bias"),
            a: t.take("a"),
            d: t.optional("d"),
            z: t.optional("z"),
            slots: t.take("slots"),
            state: t.take("state"),
            output: t.take("output"),
        }
    }

    /// What `mamba2_decode::run::prepare_with` builds and `Prepared::new`
    /// specialises.
    fn kernel_for(l: &Mamba2Launch, args: &Mamba2Args) -> Result<Kernel, String> {
        let kernel =
            mamba2_decode::run::kernel_for(&l.cfg, args, &l.schedule).map_err(|e| e.to_string())?;
        kda_host::run::specialize(kernel, &args.named_tensors(), &[]).map_err(|e| e.to_string())
    }

    fn contiguous_kernel(l: &Mamba2Launch) -> Result<Kernel, String> {
        let options = GenOptions::new(1)
            .num_slots(2)
            .padding(0.0)
            .conv_layout(ConvLayout::Ds);
        Self::kernel_for(l, &mamba2_decode::generate(&l.cfg, &options))
    }

    fn grid(l: &Mamba2Launch, requests: u32) -> [u32; 3] {
        plan(l).grid(&l.cfg, requests)
    }

    fn describe(l: &Mamba2Launch) -> Vec<(&'static str, String)> {
        let (cfg, p) = (&l.cfg, plan(l));
        vec![
            ("heads", cfg.heads.to_string()),
            ("n_groups", cfg.n_groups.to_string()),
            ("head_dim", cfg.head_dim.to_string()),
            ("d_state", cfg.d_state.to_string()),
            ("has_z", cfg.has_z.to_string()),
            ("has_d", cfg.has_d.to_string()),
            ("has_conv_bias", cfg.has_conv_bias.to_string()),
            ("cluster", p.cluster.to_string()),
            ("heads_per_cta", p.heads_per_cta.to_string()),
            ("lanes", p.lanes.to_string()),
            ("schedule", l.schedule.label()),
        ]
    }
}

/// The launch's plan: `Family::config` only picks schedules that fit.
fn plan(l: &Mamba2Launch) -> Plan {
    Plan::with(&l.cfg, &l.schedule).expect("the default schedules fit every config")
}
