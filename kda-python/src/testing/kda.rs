//! KdaSplit's generator, run path, reference and comparison (crate
//! `kda_split`).

use kda_host::kernel::CallArgs;
use kda_host::{Actual, Expected, Report};
use kda_runtime::Device;
use kda_split::{
    Arg, ConvLayout, GateMode, GenOptions, KdaArgs, KdaConfig, KdaSplitKernel, RawGateOrder,
};

use super::{Gen, Generated, Item};

impl Generated for KdaSplitKernel {
    type Args = KdaArgs;
    const HOLES: bool = true;
    const EXTRA: bool = false;

    fn generate(&self, g: &Gen) -> KdaArgs {
        let options = GenOptions::new(self.heads(), g.requests, self.tokens())
            .seed(g.seed)
            .has_bias(self.has_bias())
            .padding(g.padding)
            .holes(g.holes())
            .conv_layout(super::conv_layout(g, ConvLayout::Sd, ConvLayout::Ds))
            .weights_f32(g.weights_f32);
        kda_split::generate(&options)
    }

    fn call_args(&self, args: &KdaArgs) -> CallArgs {
        KdaSplitKernel::call_args(self, args)
    }

    fn item<'a>(args: &'a KdaArgs, name: &str) -> Option<Item<'a>> {
        let arg = Arg::from_name(name)?;
        match args.scalar(arg) {
            Some(v) => Some(Item::Scalar(v)),
            None => args.tensor(arg).map(Item::Tensor),
        }
    }

    fn run<D: Device>(dev: &D, cfg: &KdaConfig, args: &KdaArgs) -> Result<Actual, String> {
        kda_split::run::run(dev, cfg, args).map_err(|e| e.to_string())
    }

    /// In the order of operations the gate mode's kernel uses.
    fn reference(cfg: &KdaConfig, args: &KdaArgs) -> Result<Expected, String> {
        let order = if cfg.gate_mode == GateMode::Fma {
            RawGateOrder::Mode2
        } else {
            RawGateOrder::Exact
        };
        kda_split::reference(cfg, args, order).map_err(|e| format!("{e:?}"))
    }

    fn compare(cfg: &KdaConfig, args: &KdaArgs, actual: &Actual, expected: &Expected) -> Report {
        kda_split::compare(cfg, args, actual, expected)
    }
}
