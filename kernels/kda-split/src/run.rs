//! Run KdaSplit on any `kda_runtime::Device`: validate the arguments (a bad
//! call touches nothing), build the kernel for the call's dtypes, upload each
//! tensor's storage as it is (strides included), launch on the grid
//! `(C, H, B)` and read back what the kernel writes. The device plumbing is
//! the shared runner of [`kda_host::run`] (re-exported here).

use kda_host::KernelArgs;
pub use kda_host::run::{
    Chosen, Prepared, gpu_or_sim, scalar, specialize, specialize_layouts, tensor_shape, valid,
};
use kda_ir::Kernel;
use kda_runtime::{Device, ScalarArg, TensorShape};

use crate::args::{DType, HostTensor, KdaArgs, contiguous_strides};
use crate::compare::Actual;
use crate::config::{HEAD_DIM, KdaConfig};
use crate::generator::GenOptions;
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
/// the layouts of a generated one-request case supply them
/// ([`contiguous_layouts`]): computed, never allocated, so any head count
/// builds in constant memory (issue 32 item 3: `ptx --heads 100000` used to
/// generate the whole case and abort in the allocator).
pub fn contiguous_kernel(cfg: &KdaConfig, weights_f32: bool) -> Result<Kernel, RunError> {
    let dtypes = Dtypes {
        weights: if weights_f32 {
            kda_ir::Scalar::F32
        } else {
            kda_ir::Scalar::BF16
        },
        ..Dtypes::default()
    };
    let kernel = kernel::build(cfg, &dtypes).map_err(RunError::Build)?;
    let o = GenOptions::new(cfg.heads, 1, cfg.tokens);
    let scalars = [
        ("lower_bound", ScalarArg::F32(o.lower_bound)),
        ("scale", ScalarArg::F32((HEAD_DIM as f32).powf(-0.5))),
        ("eps", ScalarArg::F32(o.eps)),
    ];
    Ok(specialize_layouts(
        kernel,
        &contiguous_layouts(cfg.heads, cfg.tokens, weights_f32),
        &scalars,
    )?)
}

/// The tensor arguments of a contiguous one-request case of `heads` heads
/// and `tokens` tokens (what [`crate::generator::generate`] makes with `num_slots = tokens +
/// 1`, in [`KdaArgs::named_tensors`] order and names): dtype, extents and
/// row-major strides, in saturating arithmetic (the extents of any `u32`
/// head count fit a 64-bit `usize`).
pub fn contiguous_layouts(
    heads: u32,
    tokens: u32,
    weights_f32: bool,
) -> Vec<(&'static str, DType, TensorShape)> {
    let (h, t) = (heads as usize, tokens as usize);
    let d = HEAD_DIM;
    let dim = h.saturating_mul(d);
    let (rows, slots) = (t, t + 1);
    let width = if t == 1 { 3 } else { t + 2 };
    let three_dim = dim.saturating_mul(3);
    let layout = |name, dtype, shape: Vec<usize>| {
        let strides = contiguous_strides(&shape);
        (name, dtype, TensorShape { shape, strides })
    };
    let weights = if weights_f32 { DType::F32 } else { DType::Bf16 };
    let mut layouts = vec![
        layout("x", DType::Bf16, vec![rows, three_dim]),
        layout("weights", weights, vec![3, 4, dim]),
        layout("bias", DType::Bf16, vec![three_dim]),
        layout("conv_state", DType::Bf16, vec![slots, three_dim, width]),
        layout("raw_gate", DType::Bf16, vec![rows, d]),
        layout("beta", DType::Bf16, vec![rows, h]),
        layout("a_log", DType::F32, vec![h]),
        layout("dt_bias", DType::F32, vec![dim]),
    ];
    layouts.push(if t == 1 {
        layout("slots", DType::I32, vec![1])
    } else {
        layout("slots", DType::I32, vec![1, t])
    });
    layouts.extend([
        layout("state", DType::F32, vec![slots, h, d, d]),
        layout("output", DType::Bf16, vec![rows, dim]),
        layout("gate", DType::Bf16, vec![rows, dim]),
        layout("norm_weight", DType::Bf16, vec![d]),
        layout("f_b_weight", DType::Bf16, vec![dim, d]),
    ]);
    if t > 1 {
        layouts.push(layout("accepted", DType::I32, vec![1]));
    }
    layouts
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generator::generate;

    /// The layouts [`contiguous_kernel`] computes are those of the case the
    /// generator makes (the way it was built before): the same kernel,
    /// strides and all.
    #[test]
    fn computed_layouts_match_a_generated_case() {
        for (heads, tokens) in [(1, 1), (2, 1), (6, 2), (3, 8)] {
            for weights_f32 in [false, true] {
                let cfg = KdaConfig::new(heads, 1, 0, true, &[0, 0, 0], tokens).unwrap();
                let case = generate(
                    &GenOptions::new(heads, 1, tokens)
                        .num_slots(tokens as usize + 1)
                        .weights_f32(weights_f32),
                );
                let built = kernel_for(&cfg, &case).unwrap();
                let computed = contiguous_kernel(&cfg, weights_f32).unwrap();
                assert_eq!(
                    kda_ir::write::write_kernel(&computed),
                    kda_ir::write::write_kernel(&built),
                    "H{heads} T{tokens} f32 weights {weights_f32}"
                );
                let names: Vec<_> = case.named_tensors().iter().map(|t| t.0).collect();
                let layouts = contiguous_layouts(heads, tokens, weights_f32);
                assert_eq!(names, layouts.iter().map(|l| l.0).collect::<Vec<_>>());
            }
        }
    }

    /// Issue 32 item 3: the largest head count builds without memory for
    /// its case (its state alone would be 8 GiB), and larger ones are
    /// refused by the configuration (`KdaSplit(4294967295).ptx()` killed the
    /// Python interpreter).
    #[test]
    fn any_head_count_builds_without_its_case() {
        for tokens in [1, 8] {
            let cfg = KdaConfig::new(65535, 1, 0, true, &[0, 0, 0], tokens).unwrap();
            let kernel = contiguous_kernel(&cfg, false).unwrap();
            assert!(kda_ir::write::write_kernel(&kernel).len() < 1 << 24);
        }
        for heads in [65536, u32::MAX] {
            let e = KdaConfig::new(heads, 1, 0, true, &[0, 0, 0], 1).unwrap_err();
            assert!(e.to_string().contains("heads must be at most 65535"), "{e}");
        }
    }
}
