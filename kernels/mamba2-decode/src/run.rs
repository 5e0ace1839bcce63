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
use crate::kernel::{Plan, Schedule, ScheduleError, build_with};
use crate::validate::{ArgError, validate};

/// Why a run did not happen. Every valid call builds: the conv dtypes
/// [`validate`] accepts are exactly the kernel's instantiations.
#[derive(Debug, Error)]
pub enum RunError {
    #[error("invalid arguments: {0:?}")]
    Args(Vec<ArgError>),
    #[error(transparent)]
    Schedule(#[from] ScheduleError),
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
}

/// The tensors in kernel parameter order (crate doc §1, absent optionals
/// left out).
pub fn tensor_args(args: &Mamba2Args) -> Vec<&HostTensor> {
    args.tensors()
}

/// Validate, build (the batch's default schedule, [`Schedule::for_batch`] at
/// `args.requests()`), load and upload.
pub fn prepare<D: Device>(
    dev: &D,
    cfg: &Mamba2Config,
    args: &Mamba2Args,
) -> Result<Prepared<D>, RunError> {
    prepare_with(dev, cfg, args, &Schedule::for_batch(cfg, args.requests()))
}

/// The kernel for these arguments' conv dtypes and `schedule` (not yet
/// specialised on their strides).
pub fn kernel_for(
    cfg: &Mamba2Config,
    args: &Mamba2Args,
    schedule: &Schedule,
) -> Result<kda_ir::Kernel, ScheduleError> {
    let f32_bias = args.conv_bias.as_ref().map(HostTensor::dtype) == Some(DType::F32);
    build_with(
        cfg,
        args.conv_weight.dtype() == DType::F32,
        f32_bias,
        schedule,
    )
}

/// Validate, build with `schedule`, load and upload.
pub fn prepare_with<D: Device>(
    dev: &D,
    cfg: &Mamba2Config,
    args: &Mamba2Args,
    schedule: &Schedule,
) -> Result<Prepared<D>, RunError> {
    let errors = validate(cfg, args);
    if !errors.is_empty() {
        return Err(RunError::Args(errors));
    }
    let kernel = kernel_for(cfg, args, schedule)?;
    let grid = Plan::with(cfg, schedule)?.grid(cfg, args.requests() as u32);
    Ok(Prepared::new(dev, kernel, args, grid, &[])?)
}

/// Validate, run once (the batch's default schedule, [`Schedule::for_batch`]
/// at `args.requests()`) and read back output, state and conv state.
pub fn run<D: Device>(dev: &D, cfg: &Mamba2Config, args: &Mamba2Args) -> Result<Actual, RunError> {
    run_with(dev, cfg, args, &Schedule::for_batch(cfg, args.requests()))
}

/// [`run`] with `schedule`.
pub fn run_with<D: Device>(
    dev: &D,
    cfg: &Mamba2Config,
    args: &Mamba2Args,
    schedule: &Schedule,
) -> Result<Actual, RunError> {
    let prepared = prepare_with(dev, cfg, args, schedule)?;
    prepared.launch(dev)?;
    Ok(prepared.results(dev, args)?)
}
