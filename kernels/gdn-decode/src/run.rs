//! Run the GDN decode kernel on any `kda_runtime::Device`: validate the
//! arguments (a bad call touches nothing), build the kernel for the call's
//! dtypes, specialise it on the call's strides, upload each tensor's storage
//! as it is, launch on the grid `(HV, B)` (clusters of the G v-heads of a
//! k-head) and read back what the kernel writes. The device plumbing is
//! shared runner's ([`kda_host::Prepared`]).

use kda_host::run::{Prepared, scalar, specialize, valid};
use kda_host::{Actual, HostTensor, KernelArgs};
use kda_ir::{Kernel, Scalar};
use kda_runtime::{Device, RuntimeError, ScalarArg};

use crate::args::GdnArgs;
use crate::config::GdnConfig;
use crate::kernel::{self, BuildError, Dtypes, Schedule};
use crate::validate::{ArgError, validate};

/// Why a run did not happen (the shared error with this crate's argument
/// and build errors).
pub type RunError = kda_host::RunError<ArgError, BuildError>;

/// The argument dtypes the kernel is specialised for (an absent bias counts
/// as bf16).
pub fn dtypes(args: &GdnArgs) -> Dtypes {
    Dtypes {
        conv_weight: scalar(args.conv_weight.dtype()),
        conv_bias: args
            .conv_bias
            .as_ref()
            .map_or(Scalar::BF16, |b| scalar(b.dtype())),
        norm_weight: scalar(args.norm_weight.dtype()),
    }
}

/// The tensors in kernel parameter order (crate doc §1; absent optionals and
/// scalars left out).
pub fn tensor_args(args: &GdnArgs) -> Vec<&HostTensor> {
    args.tensors()
}

/// The kernel for this configuration, specialised for these arguments'
/// dtypes and strides.
pub fn kernel_for(
    cfg: &GdnConfig,
    args: &GdnArgs,
    schedule: &Schedule,
) -> Result<Kernel, RunError> {
    let kernel = kernel::build(cfg, &dtypes(args), schedule).map_err(RunError::Build)?;
    Ok(specialize(kernel, &args.named_tensors(), &scalars(args))?)
}

/// The scalar arguments under their kernel parameter names.
pub fn scalars(args: &GdnArgs) -> [(&'static str, ScalarArg); 2] {
    [
        ("scale", ScalarArg::F32(args.scale)),
        ("eps", ScalarArg::F32(args.eps)),
    ]
}

/// Validate, build, load and upload.
pub fn prepare<D: Device>(
    dev: &D,
    cfg: &GdnConfig,
    args: &GdnArgs,
    schedule: &Schedule,
) -> Result<Prepared<D>, RunError> {
    valid(validate(cfg, args))?;
    let kernel = kernel::build(cfg, &dtypes(args), schedule).map_err(RunError::Build)?;
    let grid = [cfg.num_v_heads, args.requests() as u32, 1];
    Ok(Prepared::new(dev, kernel, args, grid, &scalars(args))?)
}

/// Read back output, state and conv state of a launch of `args`.
pub fn results<D: Device>(
    dev: &D,
    prepared: &Prepared<D>,
    args: &GdnArgs,
) -> Result<Actual, RuntimeError> {
    prepared.results(dev, args)
}

/// Validate, run once with the batch's default schedule
/// ([`Schedule::for_batch`]) and read back.
pub fn run<D: Device>(dev: &D, cfg: &GdnConfig, args: &GdnArgs) -> Result<Actual, RunError> {
    let schedule = Schedule::for_batch(cfg.tokens, args.requests());
    run_with(dev, cfg, args, &schedule)
}

/// Validate, run once with `schedule` and read back.
pub fn run_with<D: Device>(
    dev: &D,
    cfg: &GdnConfig,
    args: &GdnArgs,
    schedule: &Schedule,
) -> Result<Actual, RunError> {
    let prepared = prepare(dev, cfg, args, schedule)?;
    prepared.launch(dev)?;
    Ok(results(dev, &prepared, args)?)
}
