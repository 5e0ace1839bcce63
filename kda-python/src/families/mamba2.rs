//! The Mamba-2 decode step (crate `mamba2_decode`): 9 positional tensors,
//! plus `conv_bias`, `d` and `z` with their flags; one token per request,
//! no scalars.

use kda_host::{DType, HostTensor, KernelArgs};
use kda_ir::Kernel;
use mamba2_decode::kernel::{Plan, build};
use mamba2_decode::{Arg, ConvLayout, GenOptions, Mamba2Args, Mamba2Config};

use super::Named;
use crate::engine::Family;

pub struct Mamba2 {
    pub cfg: Mamba2Config,
}

impl Family for Mamba2 {
    type Config = Mamba2Config;
    type Args = Mamba2Args;
    crate_checks!(mamba2_decode, |cfg| cfg);
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

    /// Nothing depends on the batch: one kernel serves every batch size.
    fn config(&self, _requests: u32) -> Result<Mamba2Config, String> {
        Ok(self.cfg)
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

    /// What `mamba2_decode::run::prepare` builds and `Prepared::new`
    /// specialises.
    fn kernel_for(cfg: &Mamba2Config, args: &Mamba2Args) -> Result<Kernel, String> {
        let f32_bias = args.conv_bias.as_ref().map(HostTensor::dtype) == Some(DType::F32);
        let kernel = build(cfg, args.conv_weight.dtype() == DType::F32, f32_bias);
        kda_host::run::specialize(kernel, &args.named_tensors(), &[]).map_err(|e| e.to_string())
    }

    fn contiguous_kernel(cfg: &Mamba2Config) -> Result<Kernel, String> {
        let options = GenOptions::new(1)
            .num_slots(2)
            .padding(0.0)
            .conv_layout(ConvLayout::Ds);
        Self::kernel_for(cfg, &mamba2_decode::generate(cfg, &options))
    }

    fn grid(cfg: &Mamba2Config, requests: u32) -> [u32; 3] {
        Plan::new(cfg).grid(cfg, requests)
    }

    fn describe(cfg: &Mamba2Config) -> Vec<(&'static str, String)> {
        let p = Plan::new(cfg);
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
        ]
    }
}
