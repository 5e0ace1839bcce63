//! Run the Mamba-2 decode kernel on any `kda_runtime::Device`: validate the
//! arguments (a bad call touches nothing), build the kernel for the conv
//! weights' dtypes, specialise it on the call's strides, upload each tensor's
//! storage as it is, launch on [`Plan::grid`] (clusters of a group's heads)
//! and read back what the kernel writes. The device plumbing is the shared runner's
//! ([`kda_host::Prepared`]).

use kda_host::{Actual, DType, HostTensor, KernelArgs, Prepared};
use kda_runtime::{Device, RuntimeError};
use thiserror::Error;

use crate::args::Mamba2Args;
use crate::config::Mamba2Config;
use crate::kernel::{Plan, build};
use crate::validate::{ArgError, validate};

/// Why a run did not happen. Every valid call builds: the conv dtypes
/// [`validate`] accepts are exactly the kernel's instantiations.
#[derive(Debug, Error)]
pub enum RunError {
    #[error("invalid arguments: {0:?}")]
    Args(Vec<ArgError>),
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
}

/// The tensors in kernel parameter order (crate doc §1, absent optionals
/// left out).
pub fn tensor_args(args: &Mamba2Args) -> Vec<&HostTensor> {
    args.tensors()
}

/// Validate, build, load and upload.
pub fn prepare<D: Device>(
    dev: &D,
    cfg: &Mamba2Config,
    args: &Mamba2Args,
) -> Result<Prepared<D>, RunError> {
    let errors = validate(cfg, args);
    if !errors.is_empty() {
        return Err(RunError::Args(errors));
    }
    let f32_bias = args.conv_bias.as_ref().map(HostTensor::dtype) == Some(DType::F32);
    let kernel = build(cfg, args.conv_weight.dtype() == DType::F32, f32_bias);
    let grid = Plan::new(cfg).grid(cfg, args.requests() as u32);
    Ok(Prepared::new(dev, kernel, args, grid, &[])?)
}

/// Validate, run once and read back output, state and conv state.
pub fn run<D: Device>(dev: &D, cfg: &Mamba2Config, args: &Mamba2Args) -> Result<Actual, RunError> {
    let prepared = prepare(dev, cfg, args)?;
    prepared.launch(dev)?;
    Ok(prepared.results(dev, args)?)
}
