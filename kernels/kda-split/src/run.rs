//! Run KdaSplit on any `kda_runtime::Device`: validate the arguments (a bad
//! call touches nothing), build the kernel for the call's dtypes, upload each
//! tensor's storage as it is (strides included), launch on the grid
//! `(C, H, B)` and read back what the kernel writes. The device plumbing is
//! the shared runner of [`kda_host::run`] (re-exported here).

use kda_host::KernelArgs;
pub use kda_host::run::{Chosen, Prepared, gpu_or_sim, scalar, specialize, tensor_shape, valid};
use kda_ir::Kernel;
use kda_runtime::{Device, ScalarArg};

use crate::args::{HostTensor, KdaArgs};
use crate::compare::Actual;
use crate::config::KdaConfig;
use crate::generator::{GenOptions, generate};
use crate::kernel::{self, Dtypes};
use crate::validate::{ArgError, validate};

/// Why a run did not happen: the arguments break the contract (`A`, one
/// per violation), the kernel is not built for them (`B`), or the device
/// failed. KdaSplit's defaults of the shared [`kda_host::RunError`].
pub type RunError<A = ArgError, B = kernel::UnsupportedDtypes> = kda_host::RunError<A, B>;

/// The argument dtypes the kernel is specialised for.
pub fn dtypes(args: &KdaArgs) -> Dtypes {
    Dtypes {
        weights: scalar(args.weights.dtype()),
        bias: scalar(args.bias.dtype()),
        beta: scalar(args.beta.dtype()),
        gate: scalar(args.gate.dtype()),
        norm_weight: scalar(args.norm_weight.dtype()),
    }
}

/// The kernel for this configuration, specialised for these arguments'
/// dtypes and strides (strides become constants; extents stay symbols).
pub fn kernel_for(cfg: &KdaConfig, args: &KdaArgs) -> Result<Kernel, RunError> {
    let kernel = kernel::build(cfg, &dtypes(args)).map_err(RunError::Build)?;
    Ok(specialize(kernel, &args.named_tensors(), &scalars(args))?)
}

/// The scalar arguments under their kernel parameter names.
pub fn scalars(args: &KdaArgs) -> [(&'static str, ScalarArg); 3] {
    [
        ("lower_bound", ScalarArg::F32(args.lower_bound)),
        ("scale", ScalarArg::F32(args.scale)),
        ("eps", ScalarArg::F32(args.eps)),
    ]
}

/// The kernel [`run`] launches for contiguous tensors of `cfg` (strides as
/// PTX constants), with BF16 conv `weights` or, with `weights_f32`, F32 ones
/// (vLLM's dtype). Strides do not depend on the batch or the slot count, so
/// a generated one-request case supplies them.
pub fn contiguous_kernel(cfg: &KdaConfig, weights_f32: bool) -> Result<Kernel, RunError> {
    let layout = generate(
        &GenOptions::new(cfg.heads, 1, cfg.tokens)
            .num_slots(cfg.tokens as usize + 1)
            .weights_f32(weights_f32),
    );
    kernel_for(cfg, &layout)
}

/// The tensors in spec order, `accepted` last (what the bench uploads).
pub fn tensor_args(args: &KdaArgs) -> Vec<&HostTensor> {
    args.tensors()
}

/// Validate, build, load and upload.
pub fn prepare<D: Device>(
    dev: &D,
    cfg: &KdaConfig,
    args: &KdaArgs,
) -> Result<Prepared<D>, RunError> {
    valid(validate(cfg, args))?;
    let kernel = kernel::build(cfg, &dtypes(args)).map_err(RunError::Build)?;
    let grid = [cfg.cluster(), cfg.heads, args.requests() as u32];
    Ok(Prepared::new(dev, kernel, args, grid, &scalars(args))?)
}

/// Validate, run once and read back.
pub fn run<D: Device>(dev: &D, cfg: &KdaConfig, args: &KdaArgs) -> Result<Actual, RunError> {
    let prepared = prepare(dev, cfg, args)?;
    prepared.launch(dev)?;
    Ok(prepared.results(dev, args)?)
}
