//! Loaded PTX: one driver-JIT-compiled module per distinct PTX text, cached by
//! a hash of the text, and [`CudaKernel`], a kernel ready to launch from it.

use std::collections::HashMap;
use std::ffi::{CString, c_void};
use std::sync::{Arc, Mutex};

use cudarc::driver::{CudaContext, sys};
use kda_ir::ptx::{PROBE_SYMBOL, ProbeSite};
use kda_ir::{ClusterPolicy, Kernel};

use crate::error::{DriverResult, driver_msg};
use crate::launch::LaunchDims;
use kda_device::RuntimeError;
use kda_device::launch::LaunchConfig;

/// Above this, a kernel must opt in to dynamic shared memory explicitly.
const DEFAULT_MAX_DYN_SMEM: u32 = 48 * 1024;
/// Largest cluster every cluster-capable GPU accepts without opting in.
const PORTABLE_CLUSTER: u32 = 8;
/// Bytes of each JIT log buffer.
const JIT_LOG_BYTES: usize = 64 * 1024;

/// One JIT-compiled `CUmodule`, unloaded when the last kernel using it goes.
pub(crate) struct Image {
    ctx: Arc<CudaContext>,
    module: sys::CUmodule,
    hash: u64,
    ptx: String,
    /// The JIT's info log (verbose: registers, spills, shared memory per entry).
    jit_log: String,
}

// SAFETY: a CUmodule is a driver handle usable from any thread of the process.
unsafe impl Send for Image {}
unsafe impl Sync for Image {}

impl Drop for Image {
    fn drop(&mut self) {
        self.ctx.record_err(self.ctx.bind_to_thread());
        // SAFETY: the module was loaded by `Image::load` and nothing else unloads it.
        self.ctx
            .record_err(unsafe { sys::cuModuleUnload(self.module).result() });
    }
}

impl Image {
    /// JIT `ptx` for the context's device (`cuModuleLoadDataEx`), keeping the
    /// JIT's error log for the error and its info log for [`CudaKernel::jit_log`].
    fn load(
        ctx: &Arc<CudaContext>,
        ptx: &str,
        hash: u64,
        kernel: &str,
    ) -> Result<Image, RuntimeError> {
        let text = CString::new(ptx).map_err(|_| RuntimeError::Build {
            kernel: kernel.to_string(),
            msg: "the PTX text contains a NUL byte".into(),
        })?;
        ctx.bind_to_thread().driver("cuCtxSetCurrent", kernel)?;
        let mut info = vec![0u8; JIT_LOG_BYTES];
        let mut error = vec![0u8; JIT_LOG_BYTES];
        use sys::CUjit_option::*;
        let mut options = [
            CU_JIT_INFO_LOG_BUFFER,
            CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
            CU_JIT_ERROR_LOG_BUFFER,
            CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
            CU_JIT_LOG_VERBOSE,
        ];
        // Option values are passed as pointers; sizes and flags travel in the pointer bits.
        let int = std::ptr::without_provenance_mut::<c_void>;
        let mut values: [*mut c_void; 5] = [
            info.as_mut_ptr().cast(),
            int(JIT_LOG_BYTES),
            error.as_mut_ptr().cast(),
            int(JIT_LOG_BYTES),
            int(1),
        ];
        let mut module: sys::CUmodule = std::ptr::null_mut();
        // SAFETY: `text` is NUL-terminated; the log buffers outlive the call and
        // their sizes are the ones given.
        let res = unsafe {
            sys::cuModuleLoadDataEx(
                &mut module,
                text.as_ptr().cast(),
                options.len() as u32,
                options.as_mut_ptr(),
                values.as_mut_ptr(),
            )
        };
        let log = |buf: &[u8]| {
            let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
            String::from_utf8_lossy(&buf[..end]).trim_end().to_string()
        };
        if let Err(e) = res.result() {
            let mut msg = driver_msg(e);
            let jit = log(&error);
            if !jit.is_empty() {
                msg = format!("{msg}\nJIT log:\n{jit}");
            }
            return Err(RuntimeError::Driver {
                call: "cuModuleLoadDataEx",
                kernel: kernel.into(),
                msg,
            });
        }
        Ok(Image {
            ctx: ctx.clone(),
            module,
            hash,
            ptx: ptx.to_string(),
            jit_log: log(&info),
        })
    }
}

/// FNV-1a: stable across runs and platforms, so the hash names a module in logs.
fn content_hash(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The modules of one device, by content hash. Texts are compared on a hit, so
/// a hash collision costs a second module, never a wrong one.
#[derive(Default)]
pub(crate) struct ModuleCache {
    images: Mutex<HashMap<u64, Vec<Arc<Image>>>>,
}

impl ModuleCache {
    pub fn get_or_load(
        &self,
        ctx: &Arc<CudaContext>,
        ptx: &str,
        kernel: &str,
    ) -> Result<Arc<Image>, RuntimeError> {
        let hash = content_hash(ptx);
        let mut images = self.images.lock().unwrap_or_else(|e| e.into_inner());
        let same_hash = images.entry(hash).or_default();
        if let Some(image) = same_hash.iter().find(|i| i.ptx == ptx) {
            return Ok(image.clone());
        }
        let image = Arc::new(Image::load(ctx, ptx, hash, kernel)?);
        same_hash.push(image.clone());
        Ok(image)
    }

    /// Number of distinct modules loaded.
    pub fn len(&self) -> usize {
        self.images
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .map(Vec::len)
            .sum()
    }
}

/// Registers and memory of a loaded kernel, as the driver reports them.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct KernelResources {
    /// Registers per thread.
    pub registers: u32,
    /// Static shared memory per CTA.
    pub static_smem_bytes: u32,
    /// Dynamic shared memory per CTA passed at every launch.
    pub dyn_smem_bytes: u32,
    /// Local memory per thread (spills, local arrays).
    pub local_bytes: u32,
    /// Largest block the kernel can be launched with (registers permitting).
    pub max_threads_per_block: u32,
}

/// A kernel loaded on a [`crate::CudaDevice`], ready to launch.
#[derive(Clone)]
pub struct CudaKernel {
    pub(crate) image: Arc<Image>,
    func: sys::CUfunction,
    pub(crate) kernel: Arc<Kernel>,
    resources: KernelResources,
    /// Pass the cluster launch attribute (false when the PTX fixes the cluster).
    cluster_attr: bool,
    /// The probe sites when the PTX records CTA timeline probes.
    probes: Option<Arc<Vec<ProbeSite>>>,
}

// SAFETY: a CUfunction is a driver handle usable from any thread; it lives as
// long as its module, which `image` keeps loaded.
unsafe impl Send for CudaKernel {}
unsafe impl Sync for CudaKernel {}

impl CudaKernel {
    /// Find `kernel.name` in `image` and set the function attributes its
    /// launches need: the dynamic shared memory limit above 48 KiB and
    /// non-portable cluster sizes above 8. The attributes belong to the
    /// function, so every kernel loaded from the same PTX text shares them;
    /// the cluster scheduling policy (`kernel.launch.cluster_policy`) is
    /// therefore a launch attribute ([`CudaKernel::dims`]), not one of them.
    pub(crate) fn prepare(
        image: Arc<Image>,
        kernel: &Kernel,
        dyn_smem_bytes: u32,
    ) -> Result<CudaKernel, RuntimeError> {
        let name = kernel.name.as_str();
        let build = |msg: String| RuntimeError::Build {
            kernel: name.to_string(),
            msg,
        };
        let entry =
            CString::new(name).map_err(|_| build("the kernel name contains a NUL byte".into()))?;
        image.ctx.bind_to_thread().driver("cuCtxSetCurrent", name)?;
        let mut func: sys::CUfunction = std::ptr::null_mut();
        // SAFETY: the module is loaded and `entry` is NUL-terminated.
        unsafe { sys::cuModuleGetFunction(&mut func, image.module, entry.as_ptr()).result() }
            .driver("cuModuleGetFunction", name)?;
        use sys::CUfunction_attribute::*;
        let get = |attr: sys::CUfunction_attribute| -> Result<u32, RuntimeError> {
            let mut v = 0;
            // SAFETY: `func` is a live function of a loaded module.
            unsafe { sys::cuFuncGetAttribute(&mut v, attr, func).result() }
                .driver("cuFuncGetAttribute", name)?;
            Ok(v.max(0) as u32)
        };
        let set = |attr: sys::CUfunction_attribute, v: u32| -> Result<(), RuntimeError> {
            // SAFETY: as above.
            unsafe { sys::cuFuncSetAttribute(func, attr, v as i32).result() }
                .driver("cuFuncSetAttribute", name)
        };

        let cluster = kernel.launch.cluster;
        let fixed_cluster = get(CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH)?;
        if fixed_cluster != 0 && fixed_cluster != cluster {
            return Err(build(format!(
                "the PTX fixes clusters of {fixed_cluster} CTAs, the kernel declares {cluster}"
            )));
        }
        let cluster_attr = fixed_cluster == 0
            && (cluster > 1 || get(CU_FUNC_ATTRIBUTE_CLUSTER_SIZE_MUST_BE_SET)? != 0);
        if cluster > PORTABLE_CLUSTER {
            set(CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1)?;
        }
        if dyn_smem_bytes > DEFAULT_MAX_DYN_SMEM {
            set(
                CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                dyn_smem_bytes,
            )?;
        }
        let resources = KernelResources {
            registers: get(CU_FUNC_ATTRIBUTE_NUM_REGS)?,
            static_smem_bytes: get(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)?,
            dyn_smem_bytes,
            local_bytes: get(CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES)?,
            max_threads_per_block: get(CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
        };
        if kernel.launch.block > resources.max_threads_per_block {
            return Err(build(format!(
                "blocks of {} threads declared, but with {} registers per thread the GPU runs at most {}",
                kernel.launch.block, resources.registers, resources.max_threads_per_block
            )));
        }
        Ok(CudaKernel {
            image,
            func,
            kernel: Arc::new(kernel.clone()),
            resources,
            cluster_attr,
            probes: None,
        })
    }

    /// Attach the probe sites of a PTX compiled with probes
    /// (`pipeline::Options::probes`); the text must declare the probe
    /// buffer's variable.
    pub(crate) fn with_probes(mut self, sites: Vec<ProbeSite>) -> Result<CudaKernel, RuntimeError> {
        self.probe_symbol()?;
        self.probes = Some(Arc::new(sites));
        Ok(self)
    }

    /// The probe sites, in the buffer's site order, when the kernel was
    /// compiled with CTA timeline probes (`kda_ir::ptx` module `probe`).
    pub fn probe_sites(&self) -> Option<&[ProbeSite]> {
        self.probes.as_deref().map(Vec::as_slice)
    }

    /// The device address and size of the module's probe-buffer variable.
    pub(crate) fn probe_symbol(&self) -> Result<sys::CUdeviceptr, RuntimeError> {
        let name = self.kernel.name.as_str();
        let symbol = CString::new(PROBE_SYMBOL).expect("the probe symbol has no NUL byte");
        self.ctx()
            .bind_to_thread()
            .driver("cuCtxSetCurrent", name)?;
        let (mut ptr, mut bytes) = (0, 0usize);
        // SAFETY: the module is loaded and `symbol` is NUL-terminated.
        unsafe {
            sys::cuModuleGetGlobal_v2(&mut ptr, &mut bytes, self.image.module, symbol.as_ptr())
                .result()
        }
        .driver("cuModuleGetGlobal", name)?;
        if bytes != 8 {
            return Err(RuntimeError::Build {
                kernel: name.to_string(),
                msg: format!("the probe variable `{PROBE_SYMBOL}` has {bytes} bytes, not 8"),
            });
        }
        Ok(ptr)
    }

    /// The kernel's name (its PTX entry).
    pub fn name(&self) -> &str {
        &self.kernel.name
    }

    /// The kernel this was loaded from.
    pub fn kernel(&self) -> &Kernel {
        &self.kernel
    }

    /// The PTX text the module was JIT-compiled from.
    pub fn ptx(&self) -> &str {
        &self.image.ptx
    }

    /// The module cache's key for the PTX text (FNV-1a, 64 bits).
    pub fn content_hash(&self) -> u64 {
        self.image.hash
    }

    /// The driver JIT's info log for the module (registers, spills, shared memory).
    pub fn jit_log(&self) -> &str {
        &self.image.jit_log
    }

    /// Registers, shared and local memory of the loaded function, from the driver.
    pub fn resources(&self) -> KernelResources {
        self.resources
    }

    pub(crate) fn func(&self) -> sys::CUfunction {
        self.func
    }

    /// The context the kernel's module was loaded in.
    pub(crate) fn ctx(&self) -> &Arc<CudaContext> {
        &self.image.ctx
    }

    /// Clusters of this kernel the whole GPU holds at once (registers,
    /// shared memory, `min_blocks` and the cluster shape): the grid of a
    /// persistent launch.
    pub fn max_active_clusters(&self) -> Result<u32, RuntimeError> {
        let name = self.kernel.name.as_str();
        self.ctx()
            .bind_to_thread()
            .driver("cuCtxSetCurrent", name)?;
        let mut dims = self.dims(&LaunchConfig::default());
        // One-CTA kernels launch without a cluster shape, but the occupancy
        // query needs one unless the PTX fixes it: without it the driver
        // answers 0 clusters (seen on the H200, 2026-12-01).
        if dims.cluster.is_none() && self.kernel.launch.cluster == 1 {
            dims.cluster = Some([1, 1, 1]);
        }
        // SAFETY: the function belongs to the context just bound.
        unsafe { crate::launch::max_active_clusters(self.func, &dims, self.kernel.launch.cluster) }
            .driver("cuOccupancyMaxActiveClusters", name)
    }

    pub(crate) fn dims(&self, cfg: &LaunchConfig) -> LaunchDims {
        LaunchDims {
            grid: cfg.grid,
            block: [self.kernel.launch.block, 1, 1],
            cluster: self
                .cluster_attr
                .then_some([self.kernel.launch.cluster, 1, 1]),
            dyn_smem_bytes: self.resources.dyn_smem_bytes,
            pdl: cfg.pdl,
            // Only clusters of more than one CTA have a placement to prefer
            // (the verifier rejects a policy without them; `load_ptx` may
            // pair any kernel with any text).
            cluster_policy: if self.kernel.launch.cluster > 1 {
                self.kernel.launch.cluster_policy
            } else {
                ClusterPolicy::Default
            },
        }
    }
}

impl std::fmt::Debug for CudaKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaKernel")
            .field("name", &self.kernel.name)
            .field("module", &format_args!("{:016x}", self.image.hash))
            .field("resources", &self.resources)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::content_hash;

    #[test]
    fn content_hash_is_fnv1a() {
        // Reference values of 64-bit FNV-1a.
        assert_eq!(content_hash(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(content_hash("a"), 0xaf63_dc4c_8601_ec8c);
    }
}
