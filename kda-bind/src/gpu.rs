//! The GPUs of this process: one [`CudaDevice`] per ordinal, opened on first
//! use in the primary context (the one torch and cupy use), and the few raw
//! driver calls the bindings need beside kda-runtime's: which device a
//! pointer belongs to, whether a stream is capturing a graph, and a small
//! stream-ordered copy to the host (the slot tables' check).

use std::sync::{Arc, Mutex};

use cudarc::driver::{CudaContext, sys};
use kda_runtime::{CudaDevice, RuntimeError};

/// An opened GPU: the runtime's device and its (primary) context, which
/// the raw calls below bind to the calling thread.
pub struct Gpu {
    /// The runtime's device.
    pub dev: CudaDevice,
    ctx: Arc<CudaContext>,
}

static GPUS: Mutex<Vec<(usize, Arc<Gpu>)>> = Mutex::new(Vec::new());

/// GPU `ordinal`, opened once per process.
pub fn gpu(ordinal: usize) -> Result<Arc<Gpu>, RuntimeError> {
    let mut gpus = GPUS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, g)) = gpus.iter().find(|(o, _)| *o == ordinal) {
        return Ok(g.clone());
    }
    let dev = CudaDevice::new(ordinal)?;
    let ctx = CudaContext::new(ordinal).map_err(|e| RuntimeError::NoDriver(format!("{e:?}")))?;
    let g = Arc::new(Gpu { dev, ctx });
    gpus.push((ordinal, g.clone()));
    Ok(g)
}

fn check(call: &str, r: sys::CUresult) -> Result<(), String> {
    if r == sys::CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(format!("{call} failed: {r:?}"))
    }
}

/// The ordinal of the device that owns `ptr` (for `__cuda_array_interface__`,
/// which does not say).
pub fn pointer_device(ptr: u64) -> Result<usize, String> {
    // Opening GPU 0 initialises the driver.
    gpu(0).map_err(|e| e.to_string())?;
    let mut ordinal: i32 = -1;
    // SAFETY: writes one int; the driver is initialised.
    let r = unsafe {
        sys::cuPointerGetAttribute(
            (&mut ordinal as *mut i32).cast(),
            sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
            ptr,
        )
    };
    check("cuPointerGetAttribute", r).map_err(|e| format!("not CUDA device memory ({e})"))?;
    Ok(ordinal.max(0) as usize)
}

impl Gpu {
    fn bind(&self) -> Result<(), String> {
        self.ctx
            .bind_to_thread()
            .map_err(|e| format!("cuCtxSetCurrent failed: {e:?}"))
    }

    /// Whether `stream` is capturing a CUDA graph (then nothing may
    /// synchronise, allocate or compile).
    ///
    /// # Safety
    /// `stream` must be a live stream of this device's primary context.
    pub unsafe fn capturing(&self, stream: sys::CUstream) -> Result<bool, String> {
        self.bind()?;
        let mut status = sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
        // SAFETY: `stream` is a live stream of this context (the caller's).
        check("cuStreamIsCapturing", unsafe {
            sys::cuStreamIsCapturing(stream, &mut status)
        })?;
        Ok(status != sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE)
    }

    /// `bytes` at `ptr` copied to the host after the work queued on `stream`
    /// (waits for it).
    ///
    /// # Safety
    /// `stream` must be a live stream of this device's primary context and
    /// `ptr .. ptr + bytes` device memory of it.
    pub unsafe fn read(
        &self,
        stream: sys::CUstream,
        ptr: u64,
        bytes: usize,
    ) -> Result<Vec<u8>, String> {
        self.bind()?;
        let mut out = vec![0u8; bytes];
        if bytes == 0 {
            return Ok(out);
        }
        // SAFETY: `out` holds `bytes`; the caller vouches for `ptr` and `stream`.
        check("cuMemcpyDtoHAsync", unsafe {
            sys::cuMemcpyDtoHAsync_v2(out.as_mut_ptr().cast(), ptr, bytes, stream)
        })?;
        // SAFETY: as above.
        check("cuStreamSynchronize", unsafe {
            sys::cuStreamSynchronize(stream)
        })?;
        Ok(out)
    }
}
