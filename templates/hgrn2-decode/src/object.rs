//! The kernel as one object ([`HostKernel`]): what kda's binding layer
//! (`python/`), benches and tools read. The parameters come from the
//! signature (`hgrn2_decode::params`); this adds the configuration, the
//! grid and the spec's rules the signature cannot state.

use kda::ir::{Kernel, desc::ParamDesc};
use kda_host::kernel::{ArgError, CallArgs, HostKernel, example_args};

use crate::kernel::{Config, hgrn2_decode};

/// HGRN-2 decode for one [`Config`] (the Python class `Hgrn2Decode`).
#[derive(Clone, Debug)]
pub struct Hgrn2 {
    pub cfg: Config,
}

impl HostKernel for Hgrn2 {
    type Config = Config;

    fn name(&self) -> &'static str {
        "Hgrn2Decode"
    }

    fn params(&self) -> Vec<ParamDesc> {
        hgrn2_decode::params(&self.cfg)
    }

    fn config(&self, _: &CallArgs) -> Result<Config, String> {
        Ok(self.cfg)
    }

    fn build(cfg: &Config, _: &CallArgs) -> Result<Kernel, String> {
        Ok(hgrn2_decode(cfg))
    }

    /// `[V / 32, H, B]`; B and H are `q`'s extents 0 and 2.
    fn grid(cfg: &Config, args: &CallArgs) -> Result<[u32; 3], String> {
        let (b, h) = (args.extent("q", 0), args.extent("q", 2));
        if b > 65_535 || h > 65_535 {
            return Err(format!(
                "q: {b} requests of {h} heads exceed the launch grid (65535)"
            ));
        }
        Ok(cfg.grid(b, h))
    }

    /// The spec's rule the signature cannot state: a lower bound in [0, 1).
    fn check_values(&self, _: &Config, args: &CallArgs) -> Vec<ArgError> {
        let bad = args
            .data("lower_bound")
            .and_then(|lb| lb.values().into_iter().find(|x| !(0.0..1.0).contains(x)));
        bad.map(|x| ArgError::value(format!("lower_bound: {x} is outside [0, 1)")))
            .into_iter()
            .collect()
    }

    fn value_params(&self) -> &'static [&'static str] {
        &["lower_bound"]
    }

    /// `size` requests (default 1) of one head.
    fn example(&self, size: Option<u32>) -> Result<(Config, CallArgs), String> {
        let batch = size.unwrap_or(1) as usize;
        let args = example_args(
            &hgrn2_decode(&self.cfg),
            &self.params(),
            &[("batch", batch)],
        )?;
        Ok((self.cfg, args))
    }
}
