//! Run KdaSplit on any `kda_runtime::Device`: validate the arguments (a bad
//! call touches nothing), build the kernel for the call's dtypes, upload each
//! tensor's storage as it is (strides included), launch on the grid
//! `(C, H, B)` and read back what the kernel writes.

use half::bf16;
use kda_ir::{Kernel, Scalar};
use kda_runtime::{Device, LaunchConfig, RuntimeError, ScalarArg, TensorShape, bind_syms};
use thiserror::Error;

use crate::args::{Arg, DType, HostData, HostTensor, KdaArgs};
use crate::compare::Actual;
use crate::config::KdaConfig;
use crate::generator::{GenOptions, generate};
use crate::kernel::{self, Dtypes};

use crate::validate::{ArgError, validate};

/// Why a run did not happen: the arguments break the contract (`A`, one
/// per violation), the kernel is not built for them (`B`), or the device
/// failed. The kernels' host sides share it with their own `A` and `B`.
#[derive(Debug, Error)]
pub enum RunError<A: std::fmt::Display = ArgError, B = kernel::UnsupportedDtypes> {
    #[error("invalid arguments:\n{}", .0.iter().map(|e| format!("  - {e}")).collect::<Vec<_>>().join("\n"))]
    Args(Vec<A>),
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    #[error(transparent)]
    Build(B),
}

/// `Ok` when `errors` (every contract violation of a call) is empty.
pub fn valid<A: std::fmt::Display, B>(errors: Vec<A>) -> Result<(), RunError<A, B>> {
    if errors.is_empty() {
        Ok(())
    } else {
        Err(RunError::Args(errors))
    }
}

/// The IR scalar type of a host dtype.
pub fn scalar(d: DType) -> Scalar {
    match d {
        DType::Bf16 => Scalar::BF16,
        DType::F32 => Scalar::F32,
        DType::I32 => Scalar::I32,
    }
}

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
    Ok(specialize(kernel, &tensor_args(args))?.0)
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

/// The tensors in kernel parameter order (spec order, `accepted` last).
pub fn tensor_args(args: &KdaArgs) -> Vec<&HostTensor> {
    Arg::ALL.iter().filter_map(|&a| args.tensor(a)).collect()
}

/// Shapes and strides of the kernel's tensor arguments, as `bind_syms`
/// takes them.
pub fn tensor_shapes(tensors: &[&HostTensor]) -> Vec<TensorShape> {
    tensors
        .iter()
        .map(|t| TensorShape {
            shape: t.shape().to_vec(),
            strides: t.strides().to_vec(),
        })
        .collect()
}

/// `kernel` specialised on the strides of `tensors` (its tensor arguments in
/// order), with the symbol values of the specialised kernel.
pub fn specialize(
    mut kernel: Kernel,
    tensors: &[&HostTensor],
) -> Result<(Kernel, Vec<i64>), RuntimeError> {
    let shapes = tensor_shapes(tensors);
    kernel.specialize_strides(&bind_syms(&kernel, &shapes)?);
    let syms = bind_syms(&kernel, &shapes)?;
    Ok((kernel, syms))
}

fn storage_bytes(t: &HostTensor) -> Vec<u8> {
    match t.data() {
        HostData::Bf16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        HostData::F32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        HostData::I32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
    }
}

fn from_storage(like: &HostTensor, bytes: &[u8]) -> HostTensor {
    let data: HostData = match like.dtype() {
        DType::Bf16 => bytes
            .chunks_exact(2)
            .map(|c| bf16::from_le_bytes([c[0], c[1]]))
            .collect::<Vec<_>>()
            .into(),
        DType::F32 => bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect::<Vec<_>>()
            .into(),
        DType::I32 => bytes
            .chunks_exact(4)
            .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
            .collect::<Vec<_>>()
            .into(),
    };
    HostTensor::strided(data, like.shape().to_vec(), like.strides().to_vec())
        .expect("the device returned the storage it was given")
}

/// A prepared launch: the kernel loaded on a device, its launch config and
/// the uploaded tensors. Reusable for repeated launches (benchmarks).
pub struct Prepared<D: Device> {
    pub kernel: Kernel,
    pub module: D::Module,
    pub cfg: LaunchConfig,
    pub buffers: Vec<D::Buffer>,
}

impl<D: Device> Prepared<D> {
    /// Specialise `kernel` on `tensors` (its tensor arguments in order), load
    /// it and upload each tensor's storage as it is (strides included), for
    /// launches on `grid` with these scalars.
    pub fn new(
        dev: &D,
        kernel: Kernel,
        tensors: &[&HostTensor],
        grid: [u32; 3],
        scalars: Vec<ScalarArg>,
    ) -> Result<Self, RuntimeError> {
        let (kernel, syms) = specialize(kernel, tensors)?;
        let module = dev.load(&kernel)?;
        let buffers = tensors
            .iter()
            .map(|t| dev.upload(&storage_bytes(t)))
            .collect::<Result<Vec<_>, _>>()?;
        let cfg = LaunchConfig {
            grid,
            pdl: true,
            syms,
            scalars,
        };
        Ok(Prepared {
            kernel,
            module,
            cfg,
            buffers,
        })
    }

    pub fn launch(&self, dev: &D) -> Result<(), RuntimeError> {
        let refs: Vec<&D::Buffer> = self.buffers.iter().collect();
        dev.launch(&self.module, &self.cfg, &refs)
    }

    /// Tensor argument `index` (of `tensors`, as uploaded) read back as a
    /// row-major copy.
    pub fn read(
        &self,
        dev: &D,
        tensors: &[&HostTensor],
        index: usize,
    ) -> Result<HostTensor, RuntimeError> {
        let storage = dev.download(&self.buffers[index])?;
        Ok(from_storage(tensors[index], &storage).to_contiguous())
    }

    /// The written tensors (output, state, conv state: their indices in
    /// `tensors`) read back.
    pub fn actual(
        &self,
        dev: &D,
        tensors: &[&HostTensor],
        [output, state, conv_state]: [usize; 3],
    ) -> Result<Actual, RuntimeError> {
        let bf = |t: HostTensor| match t.data() {
            HostData::Bf16(v) => v.clone(),
            _ => unreachable!("bf16 tensor"),
        };
        let f = |t: HostTensor| match t.data() {
            HostData::F32(v) => v.clone(),
            _ => unreachable!("f32 tensor"),
        };
        Ok(Actual {
            output: bf(self.read(dev, tensors, output)?),
            output_f32: None,
            state: f(self.read(dev, tensors, state)?),
            conv_state: bf(self.read(dev, tensors, conv_state)?),
        })
    }

    /// Read back the tensors the kernel writes, as row-major copies.
    pub fn results(&self, dev: &D, args: &KdaArgs) -> Result<Actual, RuntimeError> {
        let position = |arg: Arg| {
            Arg::ALL
                .iter()
                .filter(|a| args.tensor(**a).is_some())
                .position(|&a| a == arg)
                .unwrap()
        };
        let written = [Arg::Output, Arg::State, Arg::ConvState].map(position);
        self.actual(dev, &tensor_args(args), written)
    }
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
    let scalars = vec![
        ScalarArg::F32(args.lower_bound),
        ScalarArg::F32(args.scale),
        ScalarArg::F32(args.eps),
    ];
    Ok(Prepared::new(
        dev,
        kernel,
        &tensor_args(args),
        grid,
        scalars,
    )?)
}

/// Validate, run once and read back.
pub fn run<D: Device>(dev: &D, cfg: &KdaConfig, args: &KdaArgs) -> Result<Actual, RunError> {
    let prepared = prepare(dev, cfg, args)?;
    prepared.launch(dev)?;
    Ok(prepared.results(dev, args)?)
}

impl Prepared<kda_runtime::CudaDevice> {
    /// Median GPU time of one launch, in µs: `steps` PDL-chained launches of
    /// this prepared step captured in one graph, replayed `replays` times
    /// (after a warm-up), CUDA-event timed. The launches reuse the same
    /// buffers: the state stays in L2 when it fits (the `bench` command of
    /// kda-split rotates slots for that; this helper does not).
    pub fn time_step(
        &self,
        dev: &kda_runtime::CudaDevice,
        steps: usize,
        replays: usize,
    ) -> Result<f32, RuntimeError> {
        let graph =
            kda_runtime::Graph::capture(dev, |dev| (0..steps).try_for_each(|_| self.launch(dev)))?;
        graph.replay()?;
        let ms = graph.time_replays(dev, replays)?;
        Ok(kda_runtime::cuda::median(&ms) * 1000.0 / steps as f32)
    }
}
