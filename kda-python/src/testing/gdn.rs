//! GdnDecode's generator, run path, reference and comparison (crate
//! `gdn_decode`).

use gdn_decode::{Arg, ConvLayout, GdnArgs, GdnKernel, GdnLaunch, GenOptions};
use kda_host::kernel::CallArgs;
use kda_host::{Actual, Expected, Report};
use kda_runtime::Device;

use super::{Gen, Generated, Item};

impl Generated for GdnKernel {
    type Args = GdnArgs;
    const HOLES: bool = true;
    const EXTRA: bool = true;

    /// `extra` adds what the crate's test matrix varies besides the
    /// config: a spare conv column and slot column.
    fn generate(&self, g: &Gen) -> GdnArgs {
        let options = GenOptions::new(g.requests)
            .seed(g.seed)
            .padding(g.padding)
            .holes(g.holes())
            .conv_layout(super::conv_layout(g, ConvLayout::Sd, ConvLayout::Ds))
            .weights_f32(g.weights_f32)
            .conv_extra(g.extra as usize)
            .slot_extra(g.extra as usize);
        gdn_decode::generate(&self.launch.cfg, &options)
    }

    fn call_args(&self, args: &GdnArgs) -> CallArgs {
        GdnKernel::call_args(self, args)
    }

    fn item<'a>(args: &'a GdnArgs, name: &str) -> Option<Item<'a>> {
        let arg = Arg::from_name(name)?;
        match args.scalar(arg) {
            Some(v) => Some(Item::Scalar(v)),
            None => args.tensor(arg).map(Item::Tensor),
        }
    }

    /// With the instance's lanes.
    fn run<D: Device>(dev: &D, l: &GdnLaunch, args: &GdnArgs) -> Result<Actual, String> {
        gdn_decode::run::run_with(dev, &l.cfg, args, &l.schedule).map_err(|e| e.to_string())
    }

    fn reference(l: &GdnLaunch, args: &GdnArgs) -> Result<Expected, String> {
        gdn_decode::reference(&l.cfg, args).map_err(|e| format!("{e:?}"))
    }

    fn compare(l: &GdnLaunch, args: &GdnArgs, actual: &Actual, expected: &Expected) -> Report {
        gdn_decode::compare(&l.cfg, args, actual, expected)
    }
}
