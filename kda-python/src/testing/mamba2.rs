//! Mamba2Decode's generator, run path, reference and comparison (crate
//! `mamba2_decode`).

use kda_host::kernel::CallArgs;
use kda_host::{Actual, Expected, Report};
use kda_runtime::Device;
use mamba2_decode::{Arg, ConvLayout, GenOptions, Mamba2Args, Mamba2Kernel, Mamba2Launch};

use super::{Gen, Generated, Item};

impl Generated for Mamba2Kernel {
    type Args = Mamba2Args;
    const HOLES: bool = false;
    const EXTRA: bool = true;

    /// `extra` adds a spare conv column.
    fn generate(&self, g: &Gen) -> Mamba2Args {
        let options = GenOptions::new(g.requests)
            .seed(g.seed)
            .padding(g.padding)
            .conv_layout(super::conv_layout(g, ConvLayout::Sd, ConvLayout::Ds))
            .weights_f32(g.weights_f32)
            .conv_extra(g.extra as usize);
        mamba2_decode::generate(self.cfg(), &options)
    }

    fn call_args(&self, args: &Mamba2Args) -> CallArgs {
        Mamba2Kernel::call_args(self, args)
    }

    /// Every argument is a tensor.
    fn item<'a>(args: &'a Mamba2Args, name: &str) -> Option<Item<'a>> {
        args.tensor(Arg::from_name(name)?).map(Item::Tensor)
    }

    /// With the launch's schedule (the batch's default).
    fn run<D: Device>(dev: &D, l: &Mamba2Launch, args: &Mamba2Args) -> Result<Actual, String> {
        mamba2_decode::run::run_with(dev, &l.cfg, args, &l.schedule).map_err(|e| e.to_string())
    }

    fn reference(l: &Mamba2Launch, args: &Mamba2Args) -> Result<Expected, String> {
        mamba2_decode::reference(&l.cfg, args).map_err(|e| format!("{e:?}"))
    }

    fn compare(
        l: &Mamba2Launch,
        args: &Mamba2Args,
        actual: &Actual,
        expected: &Expected,
    ) -> Report {
        mamba2_decode::compare(&l.cfg, args, actual, expected)
    }
}
