//! The GDN decode / spec-verify step (crate `gdn_decode`): 14 positional
//! arguments, plus `conv_bias` with `has_bias` and `accepted` when
//! `tokens > 1`.

use gdn_decode::kernel::{BuildError, MAX_GROUP, Schedule};
use gdn_decode::{Arg, ConvLayout, GdnArgs, GdnConfig, GenOptions};
use kda_host::HostTensor;
use kda_ir::Kernel;

use super::{Named, scalar};
use crate::engine::Family;

/// Lane widths the kernel is built for (`gdn_decode::kernel::build`).
const LANES: [u32; 3] = [8, 16, 32];

/// A configuration and the schedule its kernel is built with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GdnLaunch {
    pub cfg: GdnConfig,
    pub schedule: Schedule,
}

pub struct Gdn {
    pub launch: GdnLaunch,
}

impl Gdn {
    /// Everything the kernel build would reject, checked up front.
    pub fn new(
        num_k_heads: u32,
        num_v_heads: u32,
        tokens: u32,
        has_bias: bool,
        lanes: u32,
    ) -> Result<Self, String> {
        let cfg = GdnConfig::new(num_k_heads, num_v_heads, tokens, has_bias)
            .map_err(|e| format!("GdnDecode: {e}"))?;
        if !LANES.contains(&lanes) {
            return Err(format!("GdnDecode: {}", BuildError::Lanes(lanes)));
        }
        let group = num_v_heads / num_k_heads;
        if group > MAX_GROUP {
            return Err(format!("GdnDecode: {}", BuildError::Group(group)));
        }
        Ok(Gdn {
            launch: GdnLaunch {
                cfg,
                schedule: Schedule::lanes(lanes),
            },
        })
    }
}

impl Family for Gdn {
    type Config = GdnLaunch;
    type Args = GdnArgs;
    crate_checks!(gdn_decode, |l| &l.cfg);
    const CLASS: &'static str = "GdnDecode";

    fn params(&self) -> Vec<(&'static str, bool)> {
        Arg::for_config(&self.launch.cfg)
            .iter()
            .map(|a| (a.name(), a.is_scalar()))
            .collect()
    }

    fn aligned16(&self) -> &'static [&'static str] {
        &["state"]
    }

    fn tokens(&self) -> u32 {
        self.launch.cfg.tokens
    }

    /// The batch's default schedule (`Schedule::for_batch`) with the lane
    /// width asked for: one kernel below the tuned batch, one from it on.
    fn config(&self, requests: u32) -> Result<GdnLaunch, String> {
        let GdnLaunch { cfg, schedule } = self.launch;
        let batch = usize::try_from(requests).map_err(|e| format!("GdnDecode: {e}"))?;
        Ok(GdnLaunch {
            cfg,
            schedule: Schedule {
                lanes: schedule.lanes,
                ..Schedule::for_batch(cfg.tokens, batch)
            },
        })
    }

    fn assemble(&self, tensors: Vec<HostTensor>, scalars: &[f32]) -> GdnArgs {
        let mut t = Named::new(&self.params(), tensors);
        GdnArgs {
            x: t.take("x"),
            conv_weight: t.take("conv_weight"),
            conv_bias: t.optional("conv_bias"),
            conv_state: t.take("conv_state"),
            a: t.take("a"),
            beta: t.take("beta"),
            a_log: t.take("a_log"),
            dt_bias: t.take("dt_bias"),
            slots: t.take("slots"),
            state: t.take("state"),
            output: t.take("output"),
            z: t.take("z"),
            norm_weight: t.take("norm_weight"),
            scale: scalar(scalars, 0),
            eps: scalar(scalars, 1),
            accepted: t.optional("accepted"),
        }
    }

    fn kernel_for(l: &GdnLaunch, args: &GdnArgs) -> Result<Kernel, String> {
        gdn_decode::run::kernel_for(&l.cfg, args, &l.schedule).map_err(|e| e.to_string())
    }

    fn contiguous_kernel(l: &GdnLaunch) -> Result<Kernel, String> {
        Self::kernel_for(l, &contiguous_case(&l.cfg))
    }

    fn grid(l: &GdnLaunch, requests: u32) -> [u32; 3] {
        [l.cfg.num_v_heads, requests, 1]
    }

    fn describe(l: &GdnLaunch) -> Vec<(&'static str, String)> {
        let c = &l.cfg;
        vec![
            ("num_k_heads", c.num_k_heads.to_string()),
            ("num_v_heads", c.num_v_heads.to_string()),
            ("tokens", c.tokens.to_string()),
            ("has_bias", c.has_bias.to_string()),
            ("lanes", l.schedule.lanes.to_string()),
            ("schedule", l.schedule.label()),
            ("cluster", c.group().to_string()),
        ]
    }
}

/// One request of contiguous tensors (bf16 weights, DS conv layout): the
/// layout `.ptx()` shows when nothing has been launched.
fn contiguous_case(cfg: &GdnConfig) -> GdnArgs {
    let options = GenOptions::new(1)
        .num_slots(1 + cfg.tokens as usize)
        .padding(0.0)
        .holes(0.0)
        .conv_layout(ConvLayout::Ds);
    gdn_decode::generate(cfg, &options)
}
