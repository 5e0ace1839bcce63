//! One call of a kernel from Python, whatever the kernel: read the
//! positional arguments' memory ([`View`]), check them with the kernel
//! crate's own validation (a bad call raises before anything launches), and
//! launch in place: on the GPU over the caller's memory (borrowed buffers,
//! the caller's stream), or on the simulator for host arrays (copied in,
//! the written tensors copied back into the arrays). Kernels are built,
//! specialised and loaded once per process for each family, configuration,
//! dtypes, strides and device, whichever instance asks first: equal
//! instances share them.

use std::any::{Any, TypeId};
use std::collections::{HashMap, HashSet};
use std::fmt::{Debug, Display};
use std::hash::Hash;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex};

use half::bf16;
use kda_host::{DType, HostData, HostTensor, KernelArgs, SlotError};
use kda_ir::Kernel;
use kda_runtime::sim::SimModule;
use kda_runtime::{
    CudaDevice, CudaKernel, Device, LaunchConfig, ScalarArg, SimDevice, TensorShape, bind_syms,
};
use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;

use kda_bind::gpu;
use kda_bind::view::{Place, View};

/// What the bindings need to know of a kernel crate.
pub trait Family: Send + Sync + 'static {
    type Config: Copy + Eq + Hash + Debug + Send + Sync;
    type Args: KernelArgs;
    type Error: Display + From<SlotError>;

    /// The Python class name.
    const CLASS: &'static str;

    /// The positional parameters in kernel order: name and whether it is a
    /// scalar (a Python float).
    fn params(&self) -> Vec<(&'static str, bool)>;
    /// Parameters whose rows the kernel moves as 16-byte vectors, so whose
    /// base address must be 16-byte aligned.
    fn aligned16(&self) -> &'static [&'static str];
    /// Tokens per request (for the slot-table rules).
    fn tokens(&self) -> u32;
    /// The configuration of a launch over `requests` requests.
    fn config(&self, requests: u32) -> Result<Self::Config, String>;
    /// The crate's arguments from the tensors and scalars, each in
    /// [`Family::params`] order.
    fn assemble(&self, tensors: Vec<HostTensor>, scalars: &[f32]) -> Self::Args;
    /// Dtype, shape and stride checks (no element is read).
    fn validate_layout(cfg: &Self::Config, args: &Self::Args) -> Vec<Self::Error>;
    /// Every check, slot-table values included.
    fn validate(cfg: &Self::Config, args: &Self::Args) -> Vec<Self::Error>;
    /// A dtype error (raised as `TypeError`; the rest are `ValueError`).
    fn is_type_error(e: &Self::Error) -> bool;
    /// The kernel for these arguments' dtypes, specialised on their strides.
    fn kernel_for(cfg: &Self::Config, args: &Self::Args) -> Result<Kernel, String>;
    /// The kernel for contiguous tensors of `cfg` (specialised), for `.ptx()`.
    fn contiguous_kernel(cfg: &Self::Config) -> Result<Kernel, String>;
    /// Launch grid for `requests` requests.
    fn grid(cfg: &Self::Config, requests: u32) -> [u32; 3];
    /// `(name, value)` pairs describing the configuration, for `.info()`.
    fn describe(cfg: &Self::Config) -> Vec<(&'static str, String)>;
}

/// A specialised, loaded kernel.
pub struct Entry {
    pub kernel: Kernel,
    module: Module,
}

enum Module {
    Sim(SimModule),
    Cuda(CudaKernel),
}

impl Entry {
    /// The module, loaded on a `D`: the key of the cache says which.
    fn module<D: Target>(&self) -> PyResult<&D::Module> {
        D::unwrap(&self.module)
            .ok_or_else(|| PyRuntimeError::new_err(format!("cached kernel is not {}", D::MODULE)))
    }

    /// The driver's resource report, when loaded on a GPU.
    pub fn resources(&self) -> Option<kda_runtime::cuda::KernelResources> {
        match &self.module {
            Module::Cuda(m) => Some(m.resources()),
            Module::Sim(_) => None,
        }
    }
}

#[derive(Clone, PartialEq, Eq, Hash)]
struct KernelKey<C> {
    cfg: C,
    place: Place,
    /// Dtype and strides of every tensor: what the specialised kernel fixes.
    layout: Vec<(DType, Vec<usize>)>,
}

#[derive(Clone, PartialEq, Eq, Hash)]
struct LayoutKey<C> {
    cfg: C,
    tensors: Vec<(DType, Vec<usize>, Vec<usize>)>,
}

/// What the process has built for one family (its configuration type).
struct Cache<C> {
    kernels: HashMap<KernelKey<C>, Arc<Entry>>,
    /// GPU layouts that passed `validate_layout`.
    layouts: HashSet<LayoutKey<C>>,
}

/// One [`Cache`] per configuration type, so per family: a generic static
/// is not possible, hence the map by type.
static CACHES: LazyLock<Mutex<HashMap<TypeId, Box<dyn Any + Send>>>> =
    LazyLock::new(Default::default);

/// Kernels built in this process, every family and instance together.
static COMPILED: AtomicUsize = AtomicUsize::new(0);

/// One simulator for the process: its modules are not tied to it, and it
/// keeps no state between launches that a caller could observe.
static SIM: LazyLock<SimDevice> = LazyLock::new(SimDevice::new);

/// Kernels built and loaded so far in this process (each family,
/// configuration, dtypes, strides and device once).
pub fn compiled() -> usize {
    COMPILED.load(Ordering::Relaxed)
}

/// Run `f` on family `C`'s cache, under the process-wide lock (held across
/// a build, so two callers never build the same kernel).
fn with_cache<C: Eq + Hash + Send + 'static, R>(f: impl FnOnce(&mut Cache<C>) -> R) -> PyResult<R> {
    let mut caches = lock(&CACHES);
    let slot = caches.entry(TypeId::of::<C>()).or_insert_with(|| {
        Box::new(Cache::<C> {
            kernels: HashMap::new(),
            layouts: HashSet::new(),
        })
    });
    slot.downcast_mut::<Cache<C>>()
        .map(f)
        .ok_or_else(|| PyRuntimeError::new_err("kernel cache of another type under this key"))
}

/// A device kernels are loaded on, and how its modules are kept in an
/// [`Entry`].
trait Target: Device {
    /// For the error of a failed load.
    const LOADING: &'static str;
    /// For the error of an entry loaded on another kind of device.
    const MODULE: &'static str;
    fn wrap(m: Self::Module) -> Module;
    fn unwrap(m: &Module) -> Option<&Self::Module>;
}

impl Target for SimDevice {
    const LOADING: &'static str = "loading the kernel on the simulator";
    const MODULE: &'static str = "a simulator module";
    fn wrap(m: SimModule) -> Module {
        Module::Sim(m)
    }
    fn unwrap(m: &Module) -> Option<&SimModule> {
        match m {
            Module::Sim(m) => Some(m),
            Module::Cuda(_) => None,
        }
    }
}

impl Target for CudaDevice {
    const LOADING: &'static str = "loading the kernel";
    const MODULE: &'static str = "a CUDA module";
    fn wrap(m: CudaKernel) -> Module {
        Module::Cuda(m)
    }
    fn unwrap(m: &Module) -> Option<&CudaKernel> {
        match m {
            Module::Cuda(m) => Some(m),
            Module::Sim(_) => None,
        }
    }
}

/// A kernel family, the kernels this instance has launched and the last.
pub struct Engine<F: Family> {
    pub family: F,
    used: Mutex<Vec<Arc<Entry>>>,
    last: Mutex<Option<Arc<Entry>>>,
}

fn lock<T: ?Sized>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn place_name(p: Place) -> String {
    match p {
        Place::Host => "the host".into(),
        Place::Cuda(i) => format!("cuda:{i}"),
    }
}

/// The arguments of one call, read from Python.
struct Call {
    /// Tensor parameters in order: name and view.
    tensors: Vec<(&'static str, View)>,
    scalars: Vec<f32>,
    place: Place,
}

impl Call {
    fn index(&self, name: &str) -> Option<usize> {
        self.tensors.iter().position(|(n, _)| *n == name)
    }
}

fn runtime_err(what: &str, e: impl Display) -> PyErr {
    PyRuntimeError::new_err(format!("{what}: {e}"))
}

/// Read `bytes` of host memory at `ptr`.
///
/// # Safety
/// `ptr .. ptr + bytes` must be readable (the array's own storage).
unsafe fn host_bytes(ptr: u64, bytes: usize) -> Vec<u8> {
    if bytes == 0 {
        return Vec::new();
    }
    // SAFETY: the caller vouches for the range.
    unsafe { std::slice::from_raw_parts(ptr as *const u8, bytes) }.to_vec()
}

fn host_data(dtype: DType, bytes: &[u8]) -> HostData {
    match dtype {
        DType::Bf16 => bytes
            .chunks_exact(2)
            .map(|b| bf16::from_le_bytes([b[0], b[1]]))
            .collect::<Vec<_>>()
            .into(),
        DType::F32 => bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect::<Vec<_>>()
            .into(),
        DType::I32 => bytes
            .chunks_exact(4)
            .map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect::<Vec<_>>()
            .into(),
    }
}

fn zeros(dtype: DType, n: usize) -> HostData {
    match dtype {
        DType::Bf16 => vec![bf16::ZERO; n].into(),
        DType::F32 => vec![0f32; n].into(),
        DType::I32 => vec![0i32; n].into(),
    }
}

fn tensor(name: &str, v: &View, data: HostData) -> PyResult<HostTensor> {
    HostTensor::strided(data, v.shape.clone(), v.strides.clone())
        .map_err(|e| PyValueError::new_err(format!("{name}: {e}")))
}

impl<F: Family> Engine<F> {
    pub fn new(family: F) -> Self {
        Engine {
            family,
            used: Mutex::new(Vec::new()),
            last: Mutex::new(None),
        }
    }

    /// Kernels this instance has launched (each configuration, dtypes and
    /// strides once), whoever built them.
    pub fn cached(&self) -> usize {
        lock(&self.used).len()
    }

    pub fn last(&self) -> Option<Arc<Entry>> {
        lock(&self.last).clone()
    }

    /// Remember `entry` as this instance's last launch.
    fn launched(&self, entry: Arc<Entry>) {
        let mut used = lock(&self.used);
        if !used.iter().any(|e| Arc::ptr_eq(e, &entry)) {
            used.push(entry.clone());
        }
        *lock(&self.last) = Some(entry);
    }

    /// The error of a list of contract violations: all listed, `TypeError`
    /// when the first is a dtype error.
    fn contract_error(&self, errors: &[F::Error]) -> PyErr {
        let lines: Vec<String> = errors.iter().map(|e| format!("  - {e}")).collect();
        let msg = if errors.len() == 1 {
            errors[0].to_string()
        } else {
            format!("{} invalid arguments:\n{}", F::CLASS, lines.join("\n"))
        };
        if F::is_type_error(&errors[0]) {
            PyTypeError::new_err(msg)
        } else {
            PyValueError::new_err(msg)
        }
    }

    fn read_call(&self, args: &[Bound<'_, PyAny>]) -> PyResult<Call> {
        let params = self.family.params();
        if args.len() != params.len() {
            let names: Vec<&str> = params.iter().map(|(n, _)| *n).collect();
            return Err(PyTypeError::new_err(format!(
                "{} takes {} positional arguments ({}); got {}",
                F::CLASS,
                params.len(),
                names.join(", "),
                args.len()
            )));
        }
        let mut tensors = Vec::new();
        let mut scalars = Vec::new();
        for (&(name, is_scalar), obj) in params.iter().zip(args) {
            if is_scalar {
                let v: f32 = obj.extract().map_err(|_| {
                    PyTypeError::new_err(format!("{name}: expected a float scalar"))
                })?;
                scalars.push(v);
            } else {
                tensors.push((name, View::extract(name, obj)?));
            }
        }
        let place = tensors.first().map_or(Place::Host, |(_, v)| v.place);
        let first = tensors.first().map_or("", |(n, _)| *n);
        for (name, v) in &tensors {
            if v.place != place {
                return Err(PyValueError::new_err(format!(
                    "{name}: on {}, but {first} is on {}; every tensor must be on the same device",
                    place_name(v.place),
                    place_name(place)
                )));
            }
            if v.ptr % v.dtype.size() as u64 != 0 {
                return Err(PyValueError::new_err(format!(
                    "{name}: address {:#x} is not aligned to its {}-byte elements",
                    v.ptr,
                    v.dtype.size()
                )));
            }
            if self.family.aligned16().contains(name) && v.ptr % 16 != 0 {
                return Err(PyValueError::new_err(format!(
                    "{name}: address {:#x} is not 16-byte aligned; the kernel loads its rows as 16-byte vectors",
                    v.ptr
                )));
            }
        }
        Ok(Call {
            tensors,
            scalars,
            place,
        })
    }

    fn requests(&self, call: &Call) -> u32 {
        call.index("slots")
            .and_then(|i| call.tensors[i].1.shape.first().copied())
            .unwrap_or(0) as u32
    }

    fn written(&self, args: &F::Args) -> [usize; 3] {
        args.written()
    }

    /// Launch on `args` (positional, spec order) in place. `stream`: the
    /// CUDA stream for GPU tensors on a device ordinal; `check_slots`: read the slot tables to
    /// check their values (default: unless the stream is capturing).
    pub fn call(
        &self,
        args: &[Bound<'_, PyAny>],
        stream: impl FnOnce(usize) -> PyResult<u64>,
        check_slots: Option<bool>,
    ) -> PyResult<()> {
        let call = self.read_call(args)?;
        let cfg = self
            .family
            .config(self.requests(&call).max(1))
            .map_err(PyValueError::new_err)?;
        match call.place {
            Place::Host => self.run_host(&cfg, &call),
            Place::Cuda(ordinal) => {
                self.run_gpu(&cfg, &call, ordinal, stream(ordinal)?, check_slots)
            }
        }
    }

    fn kernel_key(cfg: &F::Config, call: &Call) -> KernelKey<F::Config> {
        KernelKey {
            cfg: *cfg,
            place: call.place,
            layout: call
                .tensors
                .iter()
                .map(|(_, v)| (v.dtype, v.strides.clone()))
                .collect(),
        }
    }

    /// The process's entry for `call`'s kernel on `dev`, built from `args`
    /// and loaded unless some instance has done so. `may_compile`: false
    /// while a graph is captured, when only a cached kernel will do.
    fn entry<D: Target>(
        &self,
        dev: &D,
        cfg: &F::Config,
        call: &Call,
        may_compile: bool,
        args: impl FnOnce() -> PyResult<F::Args>,
    ) -> PyResult<Arc<Entry>> {
        let key = Self::kernel_key(cfg, call);
        with_cache::<F::Config, _>(|cache| {
            if let Some(e) = cache.kernels.get(&key) {
                return Ok(e.clone());
            }
            if !may_compile {
                return Err(PyRuntimeError::new_err(format!(
                    "{}: this configuration (requests, dtypes, strides) has not been compiled yet, and the stream is capturing a CUDA graph; call it once before the capture (a warm-up) so the capture only records the launch",
                    F::CLASS
                )));
            }
            let kernel = F::kernel_for(cfg, &args()?).map_err(PyValueError::new_err)?;
            let module = dev.load(&kernel).map_err(|e| runtime_err(D::LOADING, e))?;
            let entry = Arc::new(Entry {
                kernel,
                module: D::wrap(module),
            });
            COMPILED.fetch_add(1, Ordering::Relaxed);
            cache.kernels.insert(key, entry.clone());
            Ok(entry)
        })?
    }

    fn launch_config(
        &self,
        kernel: &Kernel,
        call: &Call,
        cfg: &F::Config,
    ) -> PyResult<LaunchConfig> {
        let shapes: Vec<TensorShape> = call
            .tensors
            .iter()
            .map(|(_, v)| TensorShape {
                shape: v.shape.clone(),
                strides: v.strides.clone(),
            })
            .collect();
        let syms = bind_syms(kernel, &shapes).map_err(|e| PyValueError::new_err(e.to_string()))?;
        Ok(LaunchConfig {
            grid: F::grid(cfg, self.requests(call)),
            pdl: true,
            syms,
            scalars: call.scalars.iter().map(|&s| ScalarArg::F32(s)).collect(),
        })
    }

    fn run_host(&self, cfg: &F::Config, call: &Call) -> PyResult<()> {
        let mut storage = Vec::with_capacity(call.tensors.len());
        let mut tensors = Vec::with_capacity(call.tensors.len());
        for (name, v) in &call.tensors {
            // SAFETY: the span is the array's own storage, referenced by `v`.
            let bytes = unsafe { host_bytes(v.ptr, v.span_bytes()?) };
            tensors.push(tensor(name, v, host_data(v.dtype, &bytes))?);
            storage.push(bytes);
        }
        let args = self.family.assemble(tensors, &call.scalars);
        let errors = F::validate(cfg, &args);
        if !errors.is_empty() {
            return Err(self.contract_error(&errors));
        }
        let written = self.written(&args);
        self.readonly_check(call, &written)?;
        let sim: &SimDevice = &SIM;
        let entry = self.entry(sim, cfg, call, true, move || Ok(args))?;
        let module = entry.module::<SimDevice>()?;
        let launch = self.launch_config(&entry.kernel, call, cfg)?;
        let buffers = storage
            .iter()
            .map(|b| sim.upload(b))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| runtime_err("simulator upload", e))?;
        let refs: Vec<_> = buffers.iter().collect();
        sim.launch(module, &launch, &refs)
            .map_err(|e| runtime_err("simulator launch", e))?;
        for &i in &written {
            let out = sim
                .download(&buffers[i])
                .map_err(|e| runtime_err("simulator download", e))?;
            let v = &call.tensors[i].1;
            let size = v.dtype.size();
            for o in v.offsets() {
                let at = o * size;
                // SAFETY: `o` is an element of the (writable, checked) view.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        out[at..at + size].as_ptr(),
                        (v.ptr as *mut u8).add(at),
                        size,
                    );
                }
            }
        }
        self.launched(entry);
        Ok(())
    }

    fn readonly_check(&self, call: &Call, written: &[usize; 3]) -> PyResult<()> {
        for &i in written {
            let (name, v) = &call.tensors[i];
            if v.readonly {
                return Err(PyValueError::new_err(format!(
                    "{name}: the array is read-only; the kernel writes it in place"
                )));
            }
        }
        Ok(())
    }

    /// Arguments with the call's shapes and strides over zeroed storage:
    /// enough for every check but the slot-table values, and for building
    /// and specialising the kernel.
    fn placeholder_args(&self, call: &Call) -> PyResult<F::Args> {
        let tensors = call
            .tensors
            .iter()
            .map(|(name, v)| tensor(name, v, zeros(v.dtype, v.span()?)))
            .collect::<PyResult<Vec<_>>>()?;
        Ok(self.family.assemble(tensors, &call.scalars))
    }

    fn run_gpu(
        &self,
        cfg: &F::Config,
        call: &Call,
        ordinal: usize,
        stream: u64,
        check_slots: Option<bool>,
    ) -> PyResult<()> {
        let g =
            gpu::gpu(ordinal).map_err(|e| runtime_err(&format!("opening cuda:{ordinal}"), e))?;
        let cu_stream = stream as cudarc::driver::sys::CUstream;
        // SAFETY: the caller's stream of this device.
        let capturing =
            unsafe { g.capturing(cu_stream) }.map_err(|e| runtime_err("querying the stream", e))?;

        let layout_key = LayoutKey {
            cfg: *cfg,
            tensors: call
                .tensors
                .iter()
                .map(|(_, v)| (v.dtype, v.shape.clone(), v.strides.clone()))
                .collect(),
        };
        if !with_cache::<F::Config, _>(|c| c.layouts.contains(&layout_key))? {
            let args = self.placeholder_args(call)?;
            let errors = F::validate_layout(cfg, &args);
            if !errors.is_empty() {
                return Err(self.contract_error(&errors));
            }
            with_cache::<F::Config, _>(|c| c.layouts.insert(layout_key))?;
        }
        let written = {
            // `written` depends only on which optional tensors are passed.
            let probe = self.placeholder_probe(call)?;
            self.written(&probe)
        };
        self.readonly_check(call, &written)?;

        if check_slots.unwrap_or(!capturing) {
            if capturing {
                return Err(PyValueError::new_err(
                    "check_slots=True reads the slot tables, which cannot be done while the stream captures a CUDA graph; check them on an eager call and pass check_slots=False (the default during capture)",
                ));
            }
            self.check_slot_values(&g, cu_stream, call)?;
        }

        let entry = self.entry(&g.dev, cfg, call, !capturing, || {
            self.placeholder_args(call)
        })?;
        let module = entry.module::<CudaDevice>()?;
        let launch = self.launch_config(&entry.kernel, call, cfg)?;
        // SAFETY: every pointer is the storage of a CUDA array of this
        // device, which the caller keeps alive (and does not touch
        // conflictingly) until the launch has run on `stream`.
        let buffers: Vec<_> = call
            .tensors
            .iter()
            .map(|(_, v)| Ok(unsafe { g.dev.borrow_external(v.ptr, v.span_bytes()?) }))
            .collect::<PyResult<_>>()?;
        let refs: Vec<_> = buffers.iter().collect();
        // SAFETY: `stream` is the caller's stream of this device (torch's
        // current stream unless given), alive for the call.
        unsafe { g.dev.launch_on_stream(cu_stream, module, &launch, &refs) }
            .map_err(|e| runtime_err("launch", e))?;
        self.launched(entry);
        Ok(())
    }

    /// Tiny arguments of the call's structure (which optionals are passed),
    /// for questions that do not depend on shapes.
    fn placeholder_probe(&self, call: &Call) -> PyResult<F::Args> {
        let tensors = call
            .tensors
            .iter()
            .map(|(name, v)| {
                let shape = vec![1; v.shape.len()];
                HostTensor::strided(zeros(v.dtype, 1), shape, vec![0; v.shape.len()])
                    .map_err(|e| PyValueError::new_err(format!("{name}: {e}")))
            })
            .collect::<PyResult<Vec<_>>>()?;
        Ok(self.family.assemble(tensors, &call.scalars))
    }

    /// Copy `slots` (and `accepted`) to the host, after the work queued on
    /// the stream, and check their values (spec §4.2–4.4).
    fn check_slot_values(
        &self,
        g: &gpu::Gpu,
        stream: cudarc::driver::sys::CUstream,
        call: &Call,
    ) -> PyResult<()> {
        let read = |name: &str| -> PyResult<Option<HostTensor>> {
            let Some(i) = call.index(name) else {
                return Ok(None);
            };
            let v = &call.tensors[i].1;
            // SAFETY: the caller's stream and a CUDA array of this device.
            let bytes = unsafe { g.read(stream, v.ptr, v.span_bytes()?) }
                .map_err(|e| runtime_err(&format!("reading {name}"), e))?;
            Ok(Some(tensor(name, v, host_data(v.dtype, &bytes))?))
        };
        let Some(slots) = read("slots")? else {
            return Ok(());
        };
        let accepted = read("accepted")?;
        let slots_of = |name: &str| {
            call.index(name)
                .and_then(|i| call.tensors[i].1.shape.first().copied())
                .unwrap_or(0)
        };
        let errors: Vec<F::Error> = kda_host::check_slot_table(
            self.family.tokens(),
            &slots,
            accepted.as_ref(),
            slots_of("state"),
            slots_of("conv_state"),
        )
        .into_iter()
        .map(F::Error::from)
        .collect();
        if errors.is_empty() {
            Ok(())
        } else {
            Err(self.contract_error(&errors))
        }
    }
}
