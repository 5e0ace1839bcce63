//! [`CudaDevice`]: one GPU, one context, one stream.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex, MutexGuard};

use cudarc::driver::{
    CudaContext, CudaEvent, CudaGraph, CudaSlice, CudaStream, DevicePtr, DriverError, sys,
};
use kda_ir::Kernel;
use kda_ir::pipeline::{self, Options};

use crate::error::{DriverResult, NO_KERNEL, driver_msg};
use crate::launch::{KernelParams, launch_ex};
use crate::module::{CudaKernel, ModuleCache};
use kda_device::RuntimeError;
use kda_device::launch::{Device, LaunchConfig, check_launch};

/// Oldest driver API accepted: PTX ISA 8.1 (`st.async`) arrived with CUDA 12.1.
const MIN_DRIVER: i32 = 12010;

/// Device memory holding one tensor. Cloning shares the memory (it is freed,
/// stream-ordered, when the last clone goes), which is how captured graphs
/// keep their buffers alive.
#[derive(Clone)]
pub struct CudaBuffer {
    mem: Mem,
    bytes: usize,
}

/// Who owns a buffer's memory.
#[derive(Clone)]
enum Mem {
    /// Allocated by this runtime, freed with the last clone.
    Owned(Arc<CudaSlice<u8>>),
    /// Memory of another library in the same context (a torch or cupy
    /// tensor), borrowed: never freed here.
    External {
        ptr: sys::CUdeviceptr,
        ctx: Arc<CudaContext>,
    },
}

impl CudaBuffer {
    /// Bytes the buffer holds.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The device address.
    pub fn device_ptr(&self) -> sys::CUdeviceptr {
        match &self.mem {
            // Event tracking is off, so the returned guard records nothing.
            Mem::Owned(m) => m.device_ptr(m.stream()).0,
            Mem::External { ptr, .. } => *ptr,
        }
    }

    fn ptr(&self, _stream: &CudaStream) -> sys::CUdeviceptr {
        self.device_ptr()
    }
}

impl std::fmt::Debug for CudaBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CudaBuffer({} bytes)", self.bytes)
    }
}

/// What the launches captured into a graph use, kept alive with the graph.
#[derive(Default)]
pub(crate) struct Captured {
    pub buffers: Vec<CudaBuffer>,
    pub kernels: Vec<CudaKernel>,
}

/// An NVIDIA GPU of compute capability 9.0 (H100, H200, GH200).
///
/// All work of a device goes to one stream (never the legacy default stream,
/// which cannot be captured into a graph), in the order it is issued.
pub struct CudaDevice {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    description: String,
    modules: ModuleCache,
    /// `Some` while a graph is being captured on the stream.
    capture: Mutex<Option<Captured>>,
    /// The latest launch, named in errors that surface later (a fault is
    /// reported by the next synchronising call, not by the launch).
    last_launch: Mutex<Option<Arc<Kernel>>>,
}

impl CudaDevice {
    /// Open GPU `ordinal`. Without a usable driver or GPU this returns
    /// [`RuntimeError::NoDriver`] saying why; it never panics.
    pub fn new(ordinal: usize) -> Result<CudaDevice, RuntimeError> {
        let no_driver = |why: String| Err(RuntimeError::NoDriver(why));
        // SAFETY: only tries to open the driver library.
        if !unsafe { sys::is_culib_present() } {
            return no_driver(
                "libcuda could not be loaded (no NVIDIA driver on this machine)".into(),
            );
        }
        // cudarc panics when a driver symbol is missing; a missing driver is
        // caught above, anything else that panics here is caught now.
        let ctx = match catch_unwind(AssertUnwindSafe(|| CudaContext::new(ordinal))) {
            Ok(Ok(ctx)) => ctx,
            Ok(Err(e)) => {
                return no_driver(format!(
                    "cannot open CUDA device {ordinal}: {}",
                    driver_msg(e)
                ));
            }
            Err(panic) => {
                let what = panic
                    .downcast_ref::<String>()
                    .map(String::as_str)
                    .or_else(|| panic.downcast_ref::<&str>().copied())
                    .unwrap_or("unknown panic");
                return no_driver(format!("CUDA initialisation panicked: {what}"));
            }
        };
        let mut version = 0;
        // SAFETY: writes one int.
        unsafe { sys::cuDriverGetVersion(&mut version) }
            .result()
            .driver("cuDriverGetVersion", NO_KERNEL)?;
        let driver = format!("{}.{}", version / 1000, version % 1000 / 10);
        if version < MIN_DRIVER {
            return no_driver(format!(
                "the driver supports CUDA {driver}; kda needs 12.1 or newer"
            ));
        }
        let name = ctx.name().driver("cuDeviceGetName", NO_KERNEL)?;
        let (major, minor) = ctx
            .compute_capability()
            .driver("cuDeviceGetAttribute", NO_KERNEL)?;
        if (major, minor) != (9, 0) {
            return no_driver(format!(
                "{name} is sm_{major}{minor}; kda kernels are sm_90a PTX, which only \
                 compute capability 9.0 GPUs (H100, H200, GH200) run"
            ));
        }
        let sms = ctx
            .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
            .driver("cuDeviceGetAttribute", NO_KERNEL)?;
        // SAFETY: every use of this device's buffers is ordered by its one
        // stream, so cudarc's per-buffer events are not needed; they would also
        // make stream capture fail (an event recorded outside the capture).
        unsafe { ctx.disable_event_tracking() };
        let stream = ctx.new_stream().driver("cuStreamCreate", NO_KERNEL)?;
        Ok(CudaDevice {
            ctx,
            stream,
            description: format!("{name} (sm_{major}{minor}, {sms} SMs, driver CUDA {driver})"),
            modules: ModuleCache::default(),
            capture: Mutex::new(None),
            last_launch: Mutex::new(None),
        })
    }

    /// Compile `kernel` with `kda_ir::pipeline` (verify, schedule, lower to
    /// PTX) under `opts` and load it; [`Device::load`] uses default options.
    pub fn load_with(&self, kernel: &Kernel, opts: &Options) -> Result<CudaKernel, RuntimeError> {
        let compiled = pipeline::compile(kernel, opts).map_err(|e| RuntimeError::Build {
            kernel: kernel.name.clone(),
            msg: e.to_string(),
        })?;
        let loaded = self.load_ptx(kernel, &compiled.ptx, compiled.layout.bytes)?;
        match compiled.probes {
            Some(sites) => loaded.with_probes(sites),
            None => Ok(loaded),
        }
    }

    /// Point the CTA timeline probes of `kernel` (compiled with
    /// `Options::probes`) at `buf`, or turn them off with `None`: launches
    /// after this write their records there (the layout is `kda_ir::ptx`'s
    /// `probe` module's; `kda_host::probe::ProbeLayout::words` sizes it). Waits for the
    /// stream first: the address is a module variable, which launches
    /// already enqueued read too. The write is ordered on the device's
    /// stream and waited for, so the next launch sees it. Every module of
    /// the same PTX text shares it.
    pub fn set_probe_buffer(
        &self,
        kernel: &CudaKernel,
        buf: Option<&CudaBuffer>,
    ) -> Result<(), RuntimeError> {
        self.not_capturing("cuMemcpyHtoDAsync")?;
        let name = kernel.name();
        if kernel.probe_sites().is_none() {
            return Err(RuntimeError::Build {
                kernel: name.to_string(),
                msg: "the kernel was compiled without probes (pipeline::Options::probes)".into(),
            });
        }
        let addr = match buf {
            Some(b) if !self.owns(b) => {
                return Err(RuntimeError::Driver {
                    call: "cuMemcpyHtoDAsync",
                    kernel: name.to_string(),
                    msg: "the probe buffer belongs to another device".into(),
                });
            }
            Some(b) => b.device_ptr(),
            None => 0,
        };
        let symbol = kernel.probe_symbol()?;
        self.stream
            .synchronize()
            .driver("cuStreamSynchronize", name)?;
        // On the device's stream, not the synchronous `cuMemcpyHtoD`: that
        // one runs on the legacy default stream, which the device's
        // non-blocking stream does not wait for, and from pageable memory it
        // may return before the 8 bytes land, so the next launch could still
        // read the old address (or, turning probes off, write into a buffer
        // about to be freed).
        // SAFETY: `symbol` is the 8-byte module variable just looked up in a
        // loaded module; `addr` lives until the stream has finished the copy.
        unsafe {
            sys::cuMemcpyHtoDAsync_v2(symbol, (&raw const addr).cast(), 8, self.stream.cu_stream())
                .result()
        }
        .driver("cuMemcpyHtoDAsync", name)?;
        self.stream
            .synchronize()
            .driver("cuStreamSynchronize", name)
    }

    /// Load a kernel from PTX text instead of compiling it: the text must hold
    /// an `.entry` named `kernel.name` with the parameters `kernel` declares
    /// (one `.u64` per tensor, one per scalar of its type, one `.u64` per
    /// symbol); launches pass `dyn_smem_bytes` of dynamic shared memory.
    pub fn load_ptx(
        &self,
        kernel: &Kernel,
        ptx: &str,
        dyn_smem_bytes: u32,
    ) -> Result<CudaKernel, RuntimeError> {
        let image = self.modules.get_or_load(&self.ctx, ptx, &kernel.name)?;
        CudaKernel::prepare(image, kernel, dyn_smem_bytes)
    }

    /// A new buffer of `bytes` zero bytes, allocated and cleared on the device
    /// (stream-ordered; nothing crosses from the host). For large scratch
    /// buffers that a kernel fills, where [`Device::upload`] of zeros would
    /// copy gigabytes from the host.
    pub fn alloc_zeroed(&self, bytes: usize) -> Result<CudaBuffer, RuntimeError> {
        self.not_capturing("cuMemAllocAsync")?;
        // The driver refuses empty allocations; an empty buffer holds one unused byte.
        let mem = self
            .stream
            .alloc_zeros::<u8>(bytes.max(1))
            .driver("cuMemAllocAsync", NO_KERNEL)?;
        Ok(CudaBuffer {
            mem: Mem::Owned(Arc::new(mem)),
            bytes,
        })
    }

    /// Enqueue a driver device-to-device copy of all of `src` into `dst`
    /// (`cuMemcpyDtoDAsync`): the reference a copy kernel is measured against.
    pub fn copy_buffer(&self, src: &CudaBuffer, dst: &CudaBuffer) -> Result<(), RuntimeError> {
        self.not_capturing("cuMemcpyDtoDAsync")?;
        if !self.owns(src) || !self.owns(dst) {
            return Err(RuntimeError::Driver {
                call: "cuMemcpyDtoDAsync",
                kernel: NO_KERNEL.into(),
                msg: "the buffer belongs to another device".into(),
            });
        }
        if src.bytes > dst.bytes {
            return Err(RuntimeError::Driver {
                call: "cuMemcpyDtoDAsync",
                kernel: NO_KERNEL.into(),
                msg: format!(
                    "copying {} bytes into a buffer of {} bytes",
                    src.bytes, dst.bytes
                ),
            });
        }
        self.ctx
            .bind_to_thread()
            .driver("cuCtxSetCurrent", NO_KERNEL)?;
        // SAFETY: both buffers are live allocations of this device holding at
        // least `src.bytes` bytes; the copy is ordered on the one stream, and
        // frees are stream-ordered after it.
        unsafe {
            sys::cuMemcpyDtoDAsync_v2(
                dst.ptr(&self.stream),
                src.ptr(&self.stream),
                src.bytes,
                self.stream.cu_stream(),
            )
            .result()
        }
        .driver("cuMemcpyDtoDAsync", NO_KERNEL)
    }

    /// Streaming multiprocessors of the GPU: what a persistent grid capped
    /// at `n` CTAs per SM is sized from.
    pub fn sm_count(&self) -> Result<u32, RuntimeError> {
        let sms = self
            .ctx
            .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
            .driver("cuDeviceGetAttribute", NO_KERNEL)?;
        Ok(sms.max(0) as u32)
    }

    /// Bytes of L2 cache of the GPU.
    pub fn l2_cache_bytes(&self) -> Result<usize, RuntimeError> {
        let bytes = self
            .ctx
            .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)
            .driver("cuDeviceGetAttribute", NO_KERNEL)?;
        Ok(bytes.max(0) as usize)
    }

    /// Free and total device memory in bytes (`cuMemGetInfo`): what a
    /// launch's tensors are checked against before they are uploaded.
    pub fn memory(&self) -> Result<(usize, usize), RuntimeError> {
        self.ctx.mem_get_info().driver("cuMemGetInfo", NO_KERNEL)
    }

    /// Distinct PTX modules loaded so far (kernels with identical PTX share one).
    pub fn loaded_modules(&self) -> usize {
        self.modules.len()
    }

    /// GPU time in milliseconds of the work `f` issues, measured by events on
    /// the device's stream. Waits for that work to finish.
    pub fn time(
        &self,
        f: impl FnOnce(&CudaDevice) -> Result<(), RuntimeError>,
    ) -> Result<f32, RuntimeError> {
        self.not_capturing("cuEventRecord")?;
        let (start, end) = (self.timing_event()?, self.timing_event()?);
        start
            .record(&self.stream)
            .driver("cuEventRecord", NO_KERNEL)?;
        f(self)?;
        end.record(&self.stream)
            .driver("cuEventRecord", NO_KERNEL)?;
        // Waits for `end`: a fault of the timed work surfaces here.
        start
            .elapsed_ms(&end)
            .driver("cuEventElapsedTime", &self.last_kernel())
    }

    /// An event that records time (cudarc's default events do not).
    pub(crate) fn timing_event(&self) -> Result<CudaEvent, RuntimeError> {
        self.ctx
            .new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
            .driver("cuEventCreate", NO_KERNEL)
    }

    pub(crate) fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// Start capturing the stream's work into a graph.
    pub(crate) fn begin_capture(&self) -> Result<(), RuntimeError> {
        let mut capture = lock(&self.capture);
        if capture.is_some() {
            return Err(RuntimeError::Driver {
                call: "cuStreamBeginCapture",
                kernel: NO_KERNEL.into(),
                msg: "a graph is already being captured on this device".into(),
            });
        }
        // Thread-local mode: unsafe calls of other threads do not invalidate the capture.
        self.stream
            .begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
            .driver("cuStreamBeginCapture", NO_KERNEL)?;
        *capture = Some(Captured::default());
        Ok(())
    }

    /// Stop capturing; instantiate what was captured.
    pub(crate) fn end_capture(&self) -> (Result<Option<CudaGraph>, DriverError>, Captured) {
        let captured = lock(&self.capture).take().unwrap_or_default();
        let graph = self.stream.end_capture(sys::CUgraphInstantiate_flags(0));
        (graph, captured)
    }

    /// Synchronous work cannot be captured (and would invalidate the capture).
    fn not_capturing(&self, call: &'static str) -> Result<(), RuntimeError> {
        if lock(&self.capture).is_some() {
            return Err(RuntimeError::Driver {
                call,
                kernel: NO_KERNEL.into(),
                msg: "not allowed while a graph is being captured on this device".into(),
            });
        }
        Ok(())
    }

    /// Whether `buf` was allocated by this device, on its stream (which orders
    /// its free after every use).
    fn owns(&self, buf: &CudaBuffer) -> bool {
        match &buf.mem {
            Mem::Owned(m) => Arc::ptr_eq(m.stream(), &self.stream),
            Mem::External { ctx, .. } => Arc::ptr_eq(ctx, &self.ctx),
        }
    }

    /// The device's own stream (every [`Device`] call is ordered on it).
    pub fn cu_stream(&self) -> sys::CUstream {
        self.stream.cu_stream()
    }

    /// Borrow `bytes` of device memory at `ptr` that another library
    /// allocated in this device's (primary) context, e.g. a torch tensor's
    /// storage, as a buffer for launches. Nothing is copied or freed.
    ///
    /// # Safety
    ///
    /// `ptr .. ptr + bytes` must be device memory of this context that stays
    /// allocated, and is not used by anything else in a conflicting way,
    /// until every launch using the buffer (and every graph capturing one)
    /// has finished.
    pub unsafe fn borrow_external(&self, ptr: sys::CUdeviceptr, bytes: usize) -> CudaBuffer {
        CudaBuffer {
            mem: Mem::External {
                ptr,
                ctx: self.ctx.clone(),
            },
            bytes,
        }
    }

    /// Launch on `stream`, a stream of this device's context that another
    /// library owns (torch's current stream), instead of the device's own;
    /// a capture running on that stream (a torch CUDA graph) records it.
    /// The launch is checked like [`Device::launch`].
    ///
    /// # Safety
    ///
    /// `stream` must be a live stream of this device's context (or null for
    /// the legacy default stream), and the buffers must stay valid until the
    /// launch finishes on it.
    pub unsafe fn launch_on_stream(
        &self,
        stream: sys::CUstream,
        module: &CudaKernel,
        cfg: &LaunchConfig,
        tensors: &[&CudaBuffer],
    ) -> Result<(), RuntimeError> {
        // SAFETY: the caller vouches for the stream and the buffers' lifetime.
        unsafe { self.launch_checked(stream, module, cfg, tensors) }
    }

    /// Check a launch, pack its parameters and enqueue it on `stream`.
    ///
    /// # Safety
    ///
    /// `stream` is a live stream of this device's context, and the buffers
    /// stay valid until the launch finishes on it.
    unsafe fn launch_checked(
        &self,
        stream: sys::CUstream,
        module: &CudaKernel,
        cfg: &LaunchConfig,
        tensors: &[&CudaBuffer],
    ) -> Result<(), RuntimeError> {
        let params = self.checked_params(module, cfg, tensors)?;
        let kernel = &module.kernel;
        // SAFETY: the function belongs to this context (checked) and its
        // entry takes exactly these parameters (the backend's contract, the
        // kernel's declarations checked by `check_launch`); every tensor's
        // extent fits its buffer (`check_launch`); the caller vouches for the
        // stream and the buffers' lifetime.
        unsafe { launch_ex(stream, module.func(), &module.dims(cfg), &params) }
            .driver("cuLaunchKernelEx", &kernel.name)?;
        *lock(&self.last_launch) = Some(kernel.clone());
        Ok(())
    }

    /// Check a launch and pack its parameters: the kernel's declarations,
    /// the module's and the buffers' device.
    fn checked_params(
        &self,
        module: &CudaKernel,
        cfg: &LaunchConfig,
        tensors: &[&CudaBuffer],
    ) -> Result<KernelParams, RuntimeError> {
        let kernel = &module.kernel;
        let sizes: Vec<usize> = tensors.iter().map(|b| b.bytes).collect();
        check_launch(kernel, cfg, &sizes)?;
        let foreign = |what: String| {
            Err(RuntimeError::BadLaunch {
                kernel: kernel.name.clone(),
                msg: format!("{what} belongs to another device"),
            })
        };
        if !Arc::ptr_eq(module.ctx(), &self.ctx) {
            return foreign("the module".into());
        }
        for (b, (_, t)) in tensors.iter().zip(kernel.tensors.iter()) {
            if !self.owns(b) {
                return foreign(format!("the buffer of tensor `{}`", t.name));
            }
        }
        let mut params =
            KernelParams::with_capacity(tensors.len() + cfg.scalars.len() + cfg.syms.len());
        for b in tensors {
            params.push_u64(b.device_ptr());
        }
        for &s in &cfg.scalars {
            params.push_scalar(s);
        }
        for &v in &cfg.syms {
            params.push_u64(v as u64);
        }
        self.ctx
            .bind_to_thread()
            .driver("cuCtxSetCurrent", &kernel.name)?;
        Ok(params)
    }

    fn last_kernel(&self) -> String {
        lock(&self.last_launch)
            .as_ref()
            .map_or_else(|| NO_KERNEL.to_string(), |k| k.name.clone())
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Device for CudaDevice {
    type Buffer = CudaBuffer;
    type Module = CudaKernel;

    fn describe(&self) -> String {
        self.description.clone()
    }

    fn upload(&self, bytes: &[u8]) -> Result<CudaBuffer, RuntimeError> {
        self.not_capturing("cuMemcpyHtoDAsync")?;
        // The driver refuses empty allocations; an empty buffer holds one unused byte.
        let mem = if bytes.is_empty() {
            self.stream.alloc_zeros(1)
        } else {
            self.stream.clone_htod(bytes)
        };
        let mem = mem.driver("cuMemcpyHtoDAsync", NO_KERNEL)?;
        Ok(CudaBuffer {
            mem: Mem::Owned(Arc::new(mem)),
            bytes: bytes.len(),
        })
    }

    fn download(&self, buf: &CudaBuffer) -> Result<Vec<u8>, RuntimeError> {
        self.not_capturing("cuMemcpyDtoHAsync")?;
        if !self.owns(buf) {
            return Err(RuntimeError::Driver {
                call: "cuMemcpyDtoHAsync",
                kernel: NO_KERNEL.into(),
                msg: "the buffer belongs to another device".into(),
            });
        }
        // Waits for the stream: a fault of an earlier launch surfaces here.
        let mut bytes = match &buf.mem {
            Mem::Owned(m) => self
                .stream
                .clone_dtoh(&**m)
                .driver("cuMemcpyDtoHAsync", &self.last_kernel())?,
            Mem::External { ptr, .. } => {
                let mut host = vec![0u8; buf.bytes];
                self.ctx
                    .bind_to_thread()
                    .driver("cuCtxSetCurrent", NO_KERNEL)?;
                // SAFETY: the borrowed memory holds `buf.bytes` bytes
                // (`borrow_external`'s contract) and `host` as many; the
                // stream is synchronised before `host` is read.
                unsafe {
                    sys::cuMemcpyDtoHAsync_v2(
                        host.as_mut_ptr().cast(),
                        *ptr,
                        buf.bytes,
                        self.stream.cu_stream(),
                    )
                    .result()
                }
                .driver("cuMemcpyDtoHAsync", &self.last_kernel())?;
                self.stream
                    .synchronize()
                    .driver("cuStreamSynchronize", &self.last_kernel())?;
                host
            }
        };
        bytes.truncate(buf.bytes);
        Ok(bytes)
    }

    /// Compile with the default pipeline options (every pass; `KDA_DUMP`).
    fn load(&self, kernel: &Kernel) -> Result<CudaKernel, RuntimeError> {
        self.load_with(kernel, &Options::default())
    }

    fn module_kernel<'m>(&self, module: &'m CudaKernel) -> &'m Kernel {
        module.kernel()
    }

    fn max_resident_clusters(&self, module: &CudaKernel) -> Result<u32, RuntimeError> {
        module.max_active_clusters()
    }

    fn launch(
        &self,
        module: &CudaKernel,
        cfg: &LaunchConfig,
        tensors: &[&CudaBuffer],
    ) -> Result<(), RuntimeError> {
        // SAFETY: the device's own stream; buffers are freed stream-ordered,
        // after the kernel.
        unsafe { self.launch_checked(self.stream.cu_stream(), module, cfg, tensors)? };
        if let Some(captured) = lock(&self.capture).as_mut() {
            captured.buffers.extend(tensors.iter().map(|&b| b.clone()));
            captured.kernels.push(module.clone());
        }
        Ok(())
    }

    fn synchronize(&self) -> Result<(), RuntimeError> {
        self.not_capturing("cuStreamSynchronize")?;
        self.stream
            .synchronize()
            .driver("cuStreamSynchronize", &self.last_kernel())?;
        // Errors of calls that could not report them (frees, unloads in drops).
        self.ctx
            .check_err()
            .driver("a deferred driver call (free or unload)", NO_KERNEL)
    }
}
