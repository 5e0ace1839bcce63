//! [`AnyDevice`]: the GPU where one can be opened, the CPU simulator
//! otherwise, behind the one [`Device`] API.

use kda_ir::Kernel;

use crate::cuda::{CudaBuffer, CudaDevice, CudaKernel};
use crate::error::RuntimeError;
use crate::launch::{Device, LaunchConfig};
use crate::sim::{SimBuffer, SimDevice, SimModule};

/// A CUDA device or the simulator.
pub enum AnyDevice {
    /// A CUDA GPU.
    Cuda(CudaDevice),
    /// The CPU simulator.
    Sim(SimDevice),
}

/// A buffer of either device.
#[derive(Debug)]
pub enum AnyBuffer {
    /// Device memory of a GPU.
    Cuda(CudaBuffer),
    /// Simulator memory.
    Sim(SimBuffer),
}

/// A loaded kernel of either device.
#[derive(Debug)]
pub enum AnyModule {
    /// A module loaded on a GPU.
    Cuda(CudaKernel),
    /// A kernel decoded for the simulator.
    Sim(SimModule),
}

impl AnyDevice {
    /// GPU `ordinal`, or the simulator with default options when no usable
    /// CUDA driver or GPU is found. Other errors (a driver that fails) are
    /// returned, not papered over.
    pub fn gpu_or_sim(ordinal: usize) -> Result<AnyDevice, RuntimeError> {
        match CudaDevice::new(ordinal) {
            Ok(dev) => Ok(AnyDevice::Cuda(dev)),
            Err(RuntimeError::NoDriver(_)) => Ok(AnyDevice::Sim(SimDevice::new())),
            Err(e) => Err(e),
        }
    }

    /// Whether this is a GPU (not the simulator).
    pub fn is_gpu(&self) -> bool {
        matches!(self, AnyDevice::Cuda(_))
    }
}

impl From<CudaDevice> for AnyDevice {
    fn from(dev: CudaDevice) -> AnyDevice {
        AnyDevice::Cuda(dev)
    }
}

impl From<SimDevice> for AnyDevice {
    fn from(dev: SimDevice) -> AnyDevice {
        AnyDevice::Sim(dev)
    }
}

fn other_device(kernel: &str, what: &str) -> RuntimeError {
    RuntimeError::BadLaunch {
        kernel: kernel.to_string(),
        msg: format!("{what} belongs to the other kind of device"),
    }
}

impl Device for AnyDevice {
    type Buffer = AnyBuffer;
    type Module = AnyModule;

    fn describe(&self) -> String {
        match self {
            AnyDevice::Cuda(d) => d.describe(),
            AnyDevice::Sim(d) => d.describe(),
        }
    }

    fn upload(&self, bytes: &[u8]) -> Result<AnyBuffer, RuntimeError> {
        Ok(match self {
            AnyDevice::Cuda(d) => AnyBuffer::Cuda(d.upload(bytes)?),
            AnyDevice::Sim(d) => AnyBuffer::Sim(d.upload(bytes)?),
        })
    }

    fn download(&self, buf: &AnyBuffer) -> Result<Vec<u8>, RuntimeError> {
        match (self, buf) {
            (AnyDevice::Cuda(d), AnyBuffer::Cuda(b)) => d.download(b),
            (AnyDevice::Sim(d), AnyBuffer::Sim(b)) => d.download(b),
            _ => Err(other_device("<download>", "the buffer")),
        }
    }

    fn load(&self, kernel: &Kernel) -> Result<AnyModule, RuntimeError> {
        Ok(match self {
            AnyDevice::Cuda(d) => AnyModule::Cuda(d.load(kernel)?),
            AnyDevice::Sim(d) => AnyModule::Sim(d.load(kernel)?),
        })
    }

    fn module_kernel<'m>(&self, module: &'m AnyModule) -> &'m Kernel {
        match module {
            AnyModule::Cuda(m) => m.kernel(),
            AnyModule::Sim(m) => m.kernel(),
        }
    }

    fn max_resident_clusters(&self, module: &AnyModule) -> Result<u32, RuntimeError> {
        match (self, module) {
            (AnyDevice::Cuda(d), AnyModule::Cuda(m)) => d.max_resident_clusters(m),
            (AnyDevice::Sim(d), AnyModule::Sim(m)) => d.max_resident_clusters(m),
            (_, AnyModule::Cuda(m)) => Err(other_device(m.name(), "the module")),
            (_, AnyModule::Sim(m)) => Err(other_device(&m.kernel().name, "the module")),
        }
    }

    fn launch(
        &self,
        module: &AnyModule,
        cfg: &LaunchConfig,
        tensors: &[&AnyBuffer],
    ) -> Result<(), RuntimeError> {
        match (self, module) {
            (AnyDevice::Cuda(d), AnyModule::Cuda(m)) => {
                let bufs = tensors
                    .iter()
                    .map(|b| match b {
                        AnyBuffer::Cuda(b) => Ok(b),
                        AnyBuffer::Sim(_) => Err(other_device(m.name(), "a tensor buffer")),
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                d.launch(m, cfg, &bufs)
            }
            (AnyDevice::Sim(d), AnyModule::Sim(m)) => {
                let bufs = tensors
                    .iter()
                    .map(|b| match b {
                        AnyBuffer::Sim(b) => Ok(b),
                        AnyBuffer::Cuda(_) => {
                            Err(other_device(&m.kernel().name, "a tensor buffer"))
                        }
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                d.launch(m, cfg, &bufs)
            }
            (_, AnyModule::Cuda(m)) => Err(other_device(m.name(), "the module")),
            (_, AnyModule::Sim(m)) => Err(other_device(&m.kernel().name, "the module")),
        }
    }

    fn synchronize(&self) -> Result<(), RuntimeError> {
        match self {
            AnyDevice::Cuda(d) => d.synchronize(),
            AnyDevice::Sim(d) => d.synchronize(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn falls_back_to_the_simulator_only_without_a_gpu() {
        let dev = AnyDevice::gpu_or_sim(0).unwrap();
        match CudaDevice::new(0) {
            Ok(_) => assert!(dev.is_gpu()),
            Err(RuntimeError::NoDriver(_)) => assert!(!dev.is_gpu(), "{}", dev.describe()),
            Err(e) => panic!("{e}"),
        }
        let buf = dev.upload(&[1, 2, 3, 4]).unwrap();
        assert_eq!(dev.download(&buf).unwrap(), [1, 2, 3, 4]);
    }
}
