//! The GDN decode step as one object ([`kda_host::kernel::HostKernel`]):
//! what the Python binding, the bench and the host programs read. The
//! parameter list is the kernel signature's (`kernel::gdn_decode::params`).

use kda_host::kernel::{self, ArgError, CallArgs, HostKernel};
use kda_host::{ConvLayout, KernelArgs};
use kda_ir::desc::ParamDesc;
use kda_ir::{Kernel, Scalar};

use crate::args::GdnArgs;
use crate::config::GdnConfig;
use crate::generator::{GenOptions, generate};
use crate::kernel::{self as k, BuildError, Dtypes, MAX_GROUP, Schedule};
use crate::validate::{ArgError as GdnError, validate_layout};

/// Lane widths the kernel is built for ([`k::build`]).
const LANES: [u32; 3] = [8, 16, 32];

/// A configuration and the schedule its kernel is built with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GdnLaunch {
    /// Heads, tokens, bias.
    pub cfg: GdnConfig,
    /// The batch's schedule, with the lane width asked for.
    pub schedule: Schedule,
}

/// GDN decode for one configuration (the Python class `GdnDecode`).
#[derive(Clone, Debug)]
pub struct GdnKernel {
    /// The configuration and the lane width (the rest of the schedule is
    /// chosen per batch).
    pub launch: GdnLaunch,
}

impl GdnKernel {
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
        let schedule = Schedule::lanes(lanes);
        Ok(GdnKernel {
            launch: GdnLaunch { cfg, schedule },
        })
    }

    /// The crate's argument struct of a call (zeros where the elements are
    /// on the GPU).
    pub fn assemble(args: &CallArgs) -> GdnArgs {
        let t = |n| args.host_or_zeros(n);
        GdnArgs {
            x: t("x"),
            conv_weight: t("conv_weight"),
            conv_bias: args.tensor("conv_bias").map(|_| t("conv_bias")),
            conv_state: t("conv_state"),
            a: t("a"),
            beta: t("beta"),
            a_log: t("a_log"),
            dt_bias: t("dt_bias"),
            slots: t("slots"),
            state: t("state"),
            output: t("output"),
            z: t("z"),
            norm_weight: t("norm_weight"),
            scale: args.f32("scale"),
            eps: args.f32("eps"),
            accepted: args.tensor("accepted").map(|_| t("accepted")),
        }
    }

    /// A generated case's arguments as a call's.
    pub fn call_args(&self, args: &GdnArgs) -> CallArgs {
        let scalars = crate::run::scalars(args);
        kernel::call_args(&self.params(), &args.named_tensors(), &scalars)
    }
}

impl HostKernel for GdnKernel {
    type Config = GdnLaunch;

    fn name(&self) -> &'static str {
        "GdnDecode"
    }

    fn params(&self) -> Vec<ParamDesc> {
        k::gdn_decode::params(&self.launch.cfg, &self.launch.schedule)
    }

    /// The batch's default schedule ([`Schedule::for_batch`]) with the lane
    /// width asked for.
    fn config(&self, args: &CallArgs) -> Result<GdnLaunch, String> {
        let GdnLaunch { cfg, schedule } = self.launch;
        let batch = args.extent("slots", 0).max(1);
        Ok(GdnLaunch {
            cfg,
            schedule: Schedule {
                lanes: schedule.lanes,
                ..Schedule::for_batch(cfg.tokens, batch)
            },
        })
    }

    fn build(l: &GdnLaunch, args: &CallArgs) -> Result<Kernel, String> {
        let dt = |n| args.dtype(n).unwrap_or(Scalar::BF16);
        let dtypes = Dtypes {
            conv_weight: dt("conv_weight"),
            conv_bias: dt("conv_bias"),
            norm_weight: dt("norm_weight"),
        };
        k::build(&l.cfg, &dtypes, &l.schedule).map_err(|e| e.to_string())
    }

    fn grid(l: &GdnLaunch, args: &CallArgs) -> Result<[u32; 3], String> {
        let b = kernel::grid_requests(args)?;
        Ok([l.cfg.num_v_heads, b, 1])
    }

    fn check_layout(&self, l: &GdnLaunch, args: &CallArgs) -> Vec<ArgError> {
        let errors = validate_layout(&l.cfg, &Self::assemble(args));
        kernel::arg_errors(errors, |e| matches!(e, GdnError::Dtype { .. }))
    }

    fn value_params(&self) -> &'static [&'static str] {
        &["slots", "accepted"]
    }

    fn check_values(&self, l: &GdnLaunch, args: &CallArgs) -> Vec<ArgError> {
        kernel::slot_table_errors(l.cfg.tokens, args)
    }

    /// The configuration of `size` requests (default 1), shown on one
    /// request of contiguous tensors (bf16 weights, DS conv layout): the
    /// kernel does not depend on the batch beyond its schedule.
    fn example(&self, size: Option<u32>) -> Result<(GdnLaunch, CallArgs), String> {
        let cfg = &self.launch.cfg;
        let options = GenOptions::new(1)
            .num_slots(1 + cfg.tokens as usize)
            .padding(0.0)
            .holes(0.0)
            .conv_layout(ConvLayout::Ds);
        let args = self.call_args(&generate(cfg, &options));
        let launch = self.config(&args)?;
        let batch = size.unwrap_or(1).max(1) as usize;
        let schedule = Schedule {
            lanes: self.launch.schedule.lanes,
            ..Schedule::for_batch(cfg.tokens, batch)
        };
        Ok((GdnLaunch { schedule, ..launch }, args))
    }

    /// The batch's default schedule first, then the crate's sweep list
    /// (the schedules its bench compares), each once.
    fn schedules(&self, l: &GdnLaunch) -> Vec<GdnLaunch> {
        let sweep = k::sweep_schedules(l.cfg.tokens).into_iter();
        kernel::schedule_space(*l, sweep.map(|schedule| GdnLaunch { schedule, ..*l }))
    }

    fn schedule_label(l: &GdnLaunch) -> String {
        l.schedule.label()
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
