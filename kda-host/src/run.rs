//! Running a decode kernel on any `kda_runtime::Device`: specialise it on the
//! call's strides, load it, upload each tensor's storage as it is (strides
//! included), launch and read back what the kernel writes ([`Prepared`]);
//! choose the GPU or, saying why, the simulator ([`gpu_or_sim`]); time
//! PDL-chained steps in a CUDA graph ([`Prepared::time_step`]).

use kda_ir::{Kernel, Scalar};
use kda_runtime::typed::{self, Bound};
use kda_runtime::{
    AnyDevice, CudaDevice, Device, ErasedArg, Launch, LaunchConfig, RuntimeError, ScalarArg,
    SimBuffer, SimDevice, TensorShape,
};
use thiserror::Error;

use crate::args::KernelArgs;
use crate::compare::Actual;
use crate::tensor::{DType, HostData, HostTensor};

/// Why a run did not happen: the arguments break the contract (`A`, one
/// per violation), the kernel is not built for them (`B`), or the device
/// failed. The kernels' host sides share it with their own `A` and `B`.
#[derive(Debug, Error)]
pub enum RunError<A: std::fmt::Display, B> {
    /// Every contract violation of the call.
    #[error("invalid arguments:\n{}", .0.iter().map(|e| format!("  - {e}")).collect::<Vec<_>>().join("\n"))]
    Args(Vec<A>),
    /// The device failed.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// The kernel is not built for these arguments.
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

/// A tensor argument's shape and strides, as the launch checks them.
pub fn tensor_shape(t: &HostTensor) -> TensorShape {
    TensorShape {
        shape: t.shape().to_vec(),
        strides: t.strides().to_vec(),
    }
}

/// Bind named host tensors (`buffers`: their uploads, or any stand-in of the
/// same length) and scalars to `kernel` by parameter name.
fn bind_named<'a, D: Device>(
    kernel: &Kernel,
    tensors: &[(&'static str, &HostTensor)],
    buffers: &'a [D::Buffer],
    scalars: &[(&'static str, ScalarArg)],
) -> Result<Bound<'a, D>, RuntimeError> {
    let erased: Vec<(&str, Option<ErasedArg<'a, D>>)> = tensors
        .iter()
        .zip(buffers)
        .map(|(&(name, t), buf)| {
            let arg = ErasedArg {
                buf,
                dtype: scalar(t.dtype()),
                shape: tensor_shape(t),
            };
            (name, Some(arg))
        })
        .collect();
    typed::bind::<D>(kernel, &erased, scalars)
}

/// `kernel` specialised on the strides of `tensors` (its tensor arguments
/// by parameter name): strides become PTX constants, extents stay symbols.
pub fn specialize(
    kernel: Kernel,
    tensors: &[(&'static str, &HostTensor)],
    scalars: &[(&'static str, ScalarArg)],
) -> Result<Kernel, RuntimeError> {
    let layouts: Vec<_> = tensors
        .iter()
        .map(|&(name, t)| (name, t.dtype(), tensor_shape(t)))
        .collect();
    specialize_layouts(kernel, &layouts, scalars)
}

/// [`specialize`] from each tensor's dtype, extents and strides alone (no
/// storage), so that the kernel for a configuration too large to hold in
/// memory can still be built and printed (issue 32 item 3).
pub fn specialize_layouts(
    mut kernel: Kernel,
    tensors: &[(&'static str, DType, TensorShape)],
    scalars: &[(&'static str, ScalarArg)],
) -> Result<Kernel, RuntimeError> {
    // Binding checks names, dtypes and shapes, not memory: empty stand-ins.
    let none: Vec<SimBuffer> = tensors.iter().map(|_| SimBuffer::zeroed(0)).collect();
    let erased: Vec<(&str, Option<ErasedArg<'_, SimDevice>>)> = tensors
        .iter()
        .zip(&none)
        .map(|((name, dtype, shape), buf)| {
            let arg = ErasedArg {
                buf,
                dtype: scalar(*dtype),
                shape: shape.clone(),
            };
            (*name, Some(arg))
        })
        .collect();
    let syms = typed::bind::<SimDevice>(&kernel, &erased, scalars)?.syms;
    kernel.specialize_strides(&syms);
    Ok(kernel)
}

fn storage_bytes(t: &HostTensor) -> Vec<u8> {
    match t.data() {
        HostData::Bf16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        HostData::F32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        HostData::I32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
    }
}

fn from_storage(like: &HostTensor, bytes: &[u8]) -> HostTensor {
    let data = HostData::from_le_bytes(like.dtype(), bytes);
    HostTensor::strided(data, like.shape().to_vec(), like.strides().to_vec())
        .expect("the device returned the storage it was given")
}

/// A prepared launch: the kernel loaded on a device, its launch config and
/// the uploaded tensors. Reusable for repeated launches (benchmarks).
pub struct Prepared<D: Device> {
    /// The kernel as specialised and loaded.
    pub kernel: Kernel,
    /// The loaded kernel.
    pub module: D::Module,
    /// Grid, PDL, symbol values and scalars of every launch.
    pub cfg: LaunchConfig,
    /// The uploaded tensors, as [`KernelArgs::named_tensors`] lists them.
    pub buffers: Vec<D::Buffer>,
    /// Where each of the kernel's tensors (in its parameter order) is in
    /// `buffers`: binding by name fixed it once.
    order: Vec<usize>,
}

impl<D: Device> Prepared<D> {
    /// Specialise `kernel` on the strides of `args`' tensors, load it and
    /// upload each tensor's storage as it is (strides included), for PDL
    /// launches on `grid` with these scalars. The tensors and scalars bind
    /// to the kernel's parameters by name; every extent, stride, alignment
    /// and dtype is checked against the kernel's declarations.
    pub fn new<A: KernelArgs>(
        dev: &D,
        kernel: Kernel,
        args: &A,
        grid: [u32; 3],
        scalars: &[(&'static str, ScalarArg)],
    ) -> Result<Self, RuntimeError> {
        let tensors = args.named_tensors();
        let kernel = specialize(kernel, &tensors, scalars)?;
        let module = dev.load(&kernel)?;
        let buffers = tensors
            .iter()
            .map(|(_, t)| dev.upload(&storage_bytes(t)))
            .collect::<Result<Vec<_>, _>>()?;
        let bound = bind_named::<D>(dev.module_kernel(&module), &tensors, &buffers, scalars)?;
        let cfg = bound.config(Launch::grid(grid).pdl(true));
        let order = bound.order;
        Ok(Prepared {
            kernel,
            module,
            cfg,
            buffers,
            order,
        })
    }

    /// One launch on the uploaded buffers (results stay on the device).
    pub fn launch(&self, dev: &D) -> Result<(), RuntimeError> {
        let refs: Vec<&D::Buffer> = self.order.iter().map(|&i| &self.buffers[i]).collect();
        dev.launch(&self.module, &self.cfg, &refs)
    }

    /// Tensor `index` of `args` ([`KernelArgs::named_tensors`], as uploaded)
    /// read back as a row-major copy.
    pub fn read<A: KernelArgs>(
        &self,
        dev: &D,
        args: &A,
        index: usize,
    ) -> Result<HostTensor, RuntimeError> {
        let tensors = args.tensors();
        let storage = dev.download(&self.buffers[index])?;
        Ok(from_storage(tensors[index], &storage).to_contiguous())
    }

    /// Read back the tensors the kernel writes for the launch `args` (as
    /// uploaded), as row-major copies.
    pub fn results<A: KernelArgs>(&self, dev: &D, args: &A) -> Result<Actual, RuntimeError> {
        let [output, state, conv_state] = args.written();
        let bf = |t: HostTensor| match t.data() {
            HostData::Bf16(v) => v.clone(),
            _ => unreachable!("bf16 tensor"),
        };
        let f = |t: HostTensor| match t.data() {
            HostData::F32(v) => v.clone(),
            _ => unreachable!("f32 tensor"),
        };
        Ok(Actual {
            output: bf(self.read(dev, args, output)?),
            output_f32: None,
            state: f(self.read(dev, args, state)?),
            conv_state: bf(self.read(dev, args, conv_state)?),
        })
    }
}

impl Prepared<CudaDevice> {
    /// `steps` launches of this prepared step captured in one CUDA graph.
    /// Each launch carries PDL (`cfg.pdl`), so a step's prologue overlaps the
    /// previous step's tail, as in a decode loop.
    pub fn chain(
        &self,
        dev: &CudaDevice,
        steps: usize,
    ) -> Result<kda_runtime::Graph, RuntimeError> {
        kda_runtime::Graph::capture(dev, |dev| (0..steps).try_for_each(|_| self.launch(dev)))
    }

    /// Median GPU time of one launch, in µs: `steps` PDL-chained launches of
    /// this prepared step captured in one graph, replayed `replays` times
    /// (after a warm-up), CUDA-event timed. The launches reuse the same
    /// buffers: the state stays in L2 when it fits (the `bench` command of
    /// kda-split rotates slots for that; this helper does not).
    pub fn time_step(
        &self,
        dev: &CudaDevice,
        steps: usize,
        replays: usize,
    ) -> Result<f32, RuntimeError> {
        let graph = self.chain(dev, steps)?;
        graph.replay()?;
        let ms = graph.time_replays(dev, replays)?;
        Ok(kda_runtime::cuda::median(&ms) * 1000.0 / steps as f32)
    }
}

/// The device [`gpu_or_sim`] chose.
pub struct Chosen {
    /// GPU `ordinal` or the simulator.
    pub device: AnyDevice,
    /// Why the simulator stands in for a GPU; `None` on the GPU.
    pub fallback: Option<String>,
}

impl Chosen {
    /// The device's description, followed by why the simulator was chosen.
    pub fn describe(&self) -> String {
        match &self.fallback {
            Some(why) => format!("{} ({why})", self.device.describe()),
            None => self.device.describe(),
        }
    }
}

/// GPU `ordinal`, or the simulator with default options when there is no
/// usable CUDA driver or GPU, as [`AnyDevice::gpu_or_sim`] chooses, but
/// keeping the reason for the fallback. Other errors (a driver that fails)
/// are returned, not papered over.
pub fn gpu_or_sim(ordinal: usize) -> Result<Chosen, RuntimeError> {
    match CudaDevice::new(ordinal) {
        Ok(dev) => Ok(Chosen {
            device: AnyDevice::Cuda(dev),
            fallback: None,
        }),
        Err(RuntimeError::NoDriver(why)) => Ok(Chosen {
            device: AnyDevice::Sim(SimDevice::new()),
            fallback: Some(format!("no GPU here: {why}")),
        }),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_simulator_is_chosen_only_without_a_gpu_and_says_why() {
        let chosen = gpu_or_sim(0).unwrap();
        assert_eq!(chosen.device.is_gpu(), chosen.fallback.is_none());
        if let Some(why) = &chosen.fallback {
            assert!(why.starts_with("no GPU here: "), "{why}");
            assert!(chosen.describe().ends_with(&format!("({why})")));
        }
    }

    #[test]
    fn storage_round_trips_through_a_strided_view() {
        let t = HostTensor::strided(vec![1.5f32, -2.0, 3.25, 4.0], vec![2, 2], vec![1, 2]).unwrap();
        let back = from_storage(&t, &storage_bytes(&t));
        assert_eq!(back, t);
        assert_eq!(scalar(DType::Bf16), Scalar::BF16);
        let e: Result<(), RunError<String, std::fmt::Error>> = valid(vec!["a".to_string()]);
        assert_eq!(e.unwrap_err().to_string(), "invalid arguments:\n  - a");
    }
}
