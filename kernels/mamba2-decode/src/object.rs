//! The Mamba-2 decode step as one object ([`kda_host::kernel::HostKernel`]):
//! what the Python binding, the bench and the host programs read. The
//! parameter list is the kernel signature's (`kernel::mamba2_decode::params`).

use kda_host::kernel::{self, ArgError, CallArgs, HostKernel};
use kda_host::{ConvLayout, DType, KernelArgs};
use kda_ir::Kernel;
use kda_ir::desc::ParamDesc;

use crate::args::Mamba2Args;
use crate::config::Mamba2Config;
use crate::generator::{GenOptions, generate};
use crate::kernel::{self as k, Plan, Schedule, build_with};
use crate::validate::{ArgError as Mamba2Error, validate_layout};

/// A configuration and the schedule its kernel is built with (the batch's
/// default, [`Schedule::for_batch`]): kernels are cached by it, so launches
/// below and from the tuned batch get distinct kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Mamba2Launch {
    /// Heads, groups, dimensions, optional inputs.
    pub cfg: Mamba2Config,
    /// The batch's schedule.
    pub schedule: Schedule,
}

impl Mamba2Launch {
    /// The launch's plan: [`HostKernel::config`] only picks schedules that fit.
    pub fn plan(&self) -> Result<Plan, String> {
        Plan::with(&self.cfg, &self.schedule).map_err(|e| e.to_string())
    }
}

/// Mamba-2 decode for one configuration (the Python class `Mamba2Decode`).
#[derive(Clone, Debug)]
pub struct Mamba2Kernel {
    /// Validated by [`Mamba2Kernel::new`], so its default schedules fit.
    cfg: Mamba2Config,
}

impl Mamba2Kernel {
    /// The kernel of a validated configuration.
    pub fn new(cfg: Mamba2Config) -> Result<Self, String> {
        let cfg = cfg.validated().map_err(|e| format!("Mamba2Decode: {e}"))?;
        Ok(Mamba2Kernel { cfg })
    }

    /// The validated configuration.
    pub fn cfg(&self) -> &Mamba2Config {
        &self.cfg
    }

    /// The crate's argument struct of a call (zeros where the elements are
    /// on the GPU).
    pub fn assemble(args: &CallArgs) -> Mamba2Args {
        let t = |n| args.host_or_zeros(n);
        let opt = |n| args.tensor(n).map(|_| t(n));
        Mamba2Args {
            xbc: t("xbc"),
            conv_weight: t("conv_weight"),
            conv_bias: opt("conv_bias"),
            conv_state: t("conv_state"),
            dt: t("dt"),
            dt_bias: t("dt_bias"),
            a: t("a"),
            d: opt("d"),
            z: opt("z"),
            slots: t("slots"),
            state: t("state"),
            output: t("output"),
        }
    }

    /// A generated case's arguments as a call's.
    pub fn call_args(&self, args: &Mamba2Args) -> CallArgs {
        kernel::call_args(&self.params(), &args.named_tensors(), &[])
    }

    fn launch(&self, batch: usize) -> Mamba2Launch {
        Mamba2Launch {
            cfg: self.cfg,
            schedule: Schedule::for_batch(&self.cfg, batch),
        }
    }
}

impl HostKernel for Mamba2Kernel {
    type Config = Mamba2Launch;

    fn name(&self) -> &'static str {
        "Mamba2Decode"
    }

    fn params(&self) -> Vec<ParamDesc> {
        let l = self.launch(1);
        let plan = l
            .plan()
            .expect("the default schedules fit every validated config");
        k::mamba2_decode::params(&l.cfg, &plan, &l.schedule)
    }

    /// The batch's default schedule ([`Schedule::for_batch`]).
    fn config(&self, args: &CallArgs) -> Result<Mamba2Launch, String> {
        Ok(self.launch(args.extent("slots", 0).max(1)))
    }

    fn build(l: &Mamba2Launch, args: &CallArgs) -> Result<Kernel, String> {
        let f32 = |n| args.tensor(n).map(|t| t.dtype) == Some(DType::F32);
        build_with(&l.cfg, f32("conv_weight"), f32("conv_bias"), &l.schedule)
            .map_err(|e| e.to_string())
    }

    fn grid(l: &Mamba2Launch, args: &CallArgs) -> Result<[u32; 3], String> {
        let b = kernel::grid_requests(args)?;
        Ok(l.plan()?.grid(&l.cfg, b))
    }

    fn check_layout(&self, l: &Mamba2Launch, args: &CallArgs) -> Vec<ArgError> {
        let errors = validate_layout(&l.cfg, &Self::assemble(args));
        kernel::arg_errors(errors, |e| matches!(e, Mamba2Error::Dtype { .. }))
    }

    fn value_params(&self) -> &'static [&'static str] {
        &["slots"]
    }

    fn check_values(&self, _: &Mamba2Launch, args: &CallArgs) -> Vec<ArgError> {
        kernel::slot_table_errors(1, args)
    }

    /// The configuration of `size` requests (default 1), shown on one
    /// request of contiguous tensors (bf16 weights, DS conv layout).
    fn example(&self, size: Option<u32>) -> Result<(Mamba2Launch, CallArgs), String> {
        let options = GenOptions::new(1)
            .num_slots(2)
            .padding(0.0)
            .conv_layout(ConvLayout::Ds);
        let args = self.call_args(&generate(&self.cfg, &options));
        Ok((self.launch(size.unwrap_or(1).max(1) as usize), args))
    }

    /// The batch's default schedule first, then the crate's sweep list
    /// (the schedules its bench compares), each once.
    fn schedules(&self, l: &Mamba2Launch) -> Vec<Mamba2Launch> {
        let fits = k::sweep_schedules()
            .into_iter()
            .filter(|s| Plan::with(&l.cfg, s).is_ok());
        kernel::schedule_space(*l, fits.map(|schedule| Mamba2Launch { schedule, ..*l }))
    }

    fn schedule_label(l: &Mamba2Launch) -> String {
        l.schedule.label()
    }

    fn describe(l: &Mamba2Launch) -> Vec<(&'static str, String)> {
        let cfg = &l.cfg;
        let mut d = vec![
            ("heads", cfg.heads.to_string()),
            ("n_groups", cfg.n_groups.to_string()),
            ("head_dim", cfg.head_dim.to_string()),
            ("d_state", cfg.d_state.to_string()),
            ("has_z", cfg.has_z.to_string()),
            ("has_d", cfg.has_d.to_string()),
            ("has_conv_bias", cfg.has_conv_bias.to_string()),
        ];
        if let Ok(p) = l.plan() {
            d.push(("cluster", p.cluster.to_string()));
            d.push(("heads_per_cta", p.heads_per_cta.to_string()));
            d.push(("lanes", p.lanes.to_string()));
        }
        d.push(("schedule", l.schedule.label()));
        d
    }
}
