//! One call of any kernel from Python: read the arguments' memory
//! ([`View`]) in the order of the kernel's signature (its descriptor), check
//! them (the kernel's own rules from [`HostKernel`], then every extent,
//! stride, dtype and alignment against the traced kernel's declarations,
//! then that no tensor the kernel writes overlaps another argument), and
//! launch in place: on the GPU over the caller's memory (borrowed buffers,
//! the caller's stream), or on the simulator for host arrays (copied in,
//! the written tensors copied back). Kernels are built, specialised and
//! loaded once per process for each kernel type, configuration, dtypes,
//! strides and device, whichever instance asks first.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::hash::Hash;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex};

use kda_host::kernel::{ArgError, ArgErrorKind, ArgTensor, CallArgs, HostKernel};
use kda_host::tune::{TuneEntry, TuneTable};
use kda_host::{DType, HostData, HostTensor};
use kda_ir::Kernel;
use kda_ir::desc::{ElemDesc, ParamDesc, ParamKind};
use kda_runtime::sim::SimModule;
use kda_runtime::typed::{self, ArgIssue};
use kda_runtime::{
    CudaDevice, CudaKernel, Device, ErasedArg, Launch, LaunchConfig, RuntimeError, ScalarArg,
    SimDevice, TensorShape,
};
use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;

use crate::gpu;
use crate::view::{Place, View};

/// A specialised, loaded kernel.
pub struct Entry {
    /// The kernel, specialised on the call's strides.
    pub kernel: Kernel,
    module: Module,
}

enum Module {
    Sim(SimModule),
    Cuda(CudaKernel),
}

impl Entry {
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

    /// Where a GPU module came from (`"disk cache hit"`, `"compiled"` with
    /// the cache's note, `"no disk cache"` with the reason) and how long the
    /// load took; `None` on the simulator.
    pub fn load_report(&self) -> Option<(String, f64)> {
        match &self.module {
            Module::Cuda(m) => {
                let how = match m.cache_outcome() {
                    kda_runtime::cuda::CacheOutcome::Hit => "disk cache hit".to_string(),
                    kda_runtime::cuda::CacheOutcome::Miss { stored, note } => format!(
                        "compiled ({note}; {})",
                        if *stored { "stored" } else { "not stored" }
                    ),
                    kda_runtime::cuda::CacheOutcome::Disabled(why) => {
                        format!(
                            "JIT-loaded by the driver, whose compute cache serves repeats ({why})"
                        )
                    }
                };
                Some((how, m.load_time().as_secs_f64() * 1e3))
            }
            Module::Sim(_) => None,
        }
    }
}

/// What a specialised kernel depends on: the configuration, the device,
/// and every tensor's dtype and strides.
#[derive(Clone, PartialEq, Eq, Hash)]
struct KernelKey<C> {
    cfg: C,
    place: Place,
    layout: Vec<(&'static str, DType, Vec<usize>)>,
}

/// A GPU call's base configuration, device, layouts and scalars: what the
/// layout checks and the tuned choice depend on.
#[derive(Clone, PartialEq, Eq, Hash)]
struct LayoutKey<C> {
    cfg: C,
    place: Place,
    tensors: Vec<(&'static str, DType, Vec<usize>, Vec<usize>)>,
    scalars: Vec<(&'static str, u64)>,
}

/// What the process has built for one kernel type.
struct Cache<C> {
    kernels: HashMap<KernelKey<C>, Arc<Entry>>,
    /// GPU layouts that passed every layout check, each with the
    /// configuration its calls run (the tuned schedule where one is stored).
    layouts: HashMap<LayoutKey<C>, C>,
}

/// One [`Cache`] per kernel type (a generic static is not possible).
static CACHES: LazyLock<Mutex<HashMap<TypeId, Box<dyn Any + Send>>>> =
    LazyLock::new(Default::default);

/// Kernels built in this process, every kernel type and instance together.
static COMPILED: AtomicUsize = AtomicUsize::new(0);

/// One simulator for the process: its modules are not tied to it, and it
/// keeps no state between launches that a caller could observe.
static SIM: LazyLock<SimDevice> = LazyLock::new(SimDevice::new);

/// Kernels built and loaded so far in this process.
pub fn compiled() -> usize {
    COMPILED.load(Ordering::Relaxed)
}

fn with_cache<K: HostKernel, R>(f: impl FnOnce(&mut Cache<K::Config>) -> R) -> PyResult<R> {
    let mut caches = lock(&CACHES);
    let slot = caches.entry(TypeId::of::<K>()).or_insert_with(|| {
        Box::new(Cache::<K::Config> {
            kernels: HashMap::new(),
            layouts: HashMap::new(),
        })
    });
    slot.downcast_mut::<Cache<K::Config>>()
        .map(f)
        .ok_or_else(|| PyRuntimeError::new_err("kernel cache of another type under this key"))
}

/// A device kernels are loaded on, and how its modules are kept.
trait Target: Device {
    const LOADING: &'static str;
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

/// A kernel, the kernels this instance has launched and the last.
pub struct Engine<K: HostKernel> {
    /// The kernel.
    pub kernel: K,
    used: Mutex<Vec<Arc<Entry>>>,
    last: Mutex<Option<Arc<Entry>>>,
    /// The key of the last kernel this instance looked up, and why the
    /// last compile happened (the part of the key that changed).
    last_key: Mutex<Option<KernelKey<K::Config>>>,
    recompile: Mutex<Option<String>>,
}

/// The process's view of the tuning table (re-read after each autotune).
static TUNE_TABLE: LazyLock<Mutex<Option<TuneTable>>> = LazyLock::new(Default::default);

fn tune_table() -> TuneTable {
    let mut t = lock(&TUNE_TABLE);
    t.get_or_insert_with(|| {
        kda_host::tune::default_path()
            .map(|p| TuneTable::load(&p))
            .unwrap_or_default()
    })
    .clone()
}

/// What differs between two kernel keys, in words: the part of the key a
/// recompile was for.
fn key_change<C: std::fmt::Debug + PartialEq>(old: &KernelKey<C>, new: &KernelKey<C>) -> String {
    let mut parts = Vec::new();
    if old.cfg != new.cfg {
        parts.push(format!("configuration {:?} -> {:?}", old.cfg, new.cfg));
    }
    if old.place != new.place {
        parts.push(format!("device {:?} -> {:?}", old.place, new.place));
    }
    for (a, b) in old.layout.iter().zip(&new.layout) {
        if a.1 != b.1 {
            parts.push(format!("{}: dtype {} -> {}", b.0, a.1.name(), b.1.name()));
        }
        if a.2 != b.2 {
            parts.push(format!("{}: strides {:?} -> {:?}", b.0, a.2, b.2));
        }
    }
    if old.layout.len() != new.layout.len() {
        parts.push("the arguments passed".into());
    }
    if parts.is_empty() {
        "first compile in this process of an equal kernel".into()
    } else {
        parts.join("; ")
    }
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
    views: Vec<(&'static str, View)>,
    scalars: Vec<(&'static str, ScalarArg)>,
    place: Place,
}

impl Call {
    /// The layouts (no elements) as the kernel's checks see them.
    fn layout_args(&self) -> CallArgs {
        CallArgs {
            tensors: self
                .views
                .iter()
                .map(|(n, v)| {
                    let t = ArgTensor {
                        dtype: v.dtype,
                        shape: v.shape.clone(),
                        strides: v.strides.clone(),
                        data: None,
                    };
                    (*n, t)
                })
                .collect(),
            scalars: self.scalars.clone(),
        }
    }

    fn view(&self, name: &str) -> Option<&View> {
        self.views.iter().find(|(n, _)| *n == name).map(|(_, v)| v)
    }
}

fn runtime_err(what: &str, e: impl std::fmt::Display) -> PyErr {
    PyRuntimeError::new_err(format!("{what}: {e}"))
}

fn host_tensor(name: &str, v: &View, bytes: &[u8]) -> PyResult<HostTensor> {
    HostTensor::strided(
        HostData::from_le_bytes(v.dtype, bytes),
        v.shape.clone(),
        v.strides.clone(),
    )
    .map_err(|e| PyValueError::new_err(format!("{name}: {e}")))
}

/// A Python error for a list of broken rules: all listed, `TypeError` when
/// the first is a type error.
pub fn arg_errors(kernel: &str, errors: &[ArgError]) -> PyErr {
    let msg = if errors.len() == 1 {
        errors[0].message.clone()
    } else {
        let lines: Vec<String> = errors.iter().map(|e| format!("  - {e}")).collect();
        format!(
            "{kernel}: {} invalid arguments:\n{}",
            errors.len(),
            lines.join("\n")
        )
    };
    match errors.first().map(|e| e.kind) {
        Some(ArgErrorKind::Type) => PyTypeError::new_err(msg),
        _ => PyValueError::new_err(msg),
    }
}

/// A binding error of the traced kernel as a Python error naming the
/// argument (`TypeError` for an element type).
fn bind_error(e: RuntimeError) -> PyErr {
    match &e {
        RuntimeError::Arg(a) => {
            let msg = format!("{}: {}", a.param, a.issue);
            if matches!(a.issue, ArgIssue::Dtype { .. }) {
                PyTypeError::new_err(msg)
            } else {
                PyValueError::new_err(msg)
            }
        }
        _ => PyValueError::new_err(e.to_string()),
    }
}

/// The scalar argument `name` of descriptor type `elem`, from Python.
fn read_scalar(name: &str, elem: ElemDesc, obj: &Bound<'_, PyAny>) -> PyResult<ScalarArg> {
    use kda_ir::Scalar as S;
    let ty = match elem {
        ElemDesc::Fixed(s) => s,
        // A generic scalar takes the float form (the kernels' convention).
        ElemDesc::Generic(_) => S::F32,
    };
    let int = |what: &str| {
        PyTypeError::new_err(format!(
            "{name}: expected an int ({what}); got {}",
            obj.get_type()
                .name()
                .map(|n| n.to_string())
                .unwrap_or_default()
        ))
    };
    let range =
        |v: i128, what: &str| PyValueError::new_err(format!("{name}: {v} does not fit {what}"));
    Ok(match ty {
        S::F32 | S::BF16 => {
            let v: f64 = obj
                .extract()
                .map_err(|_| PyTypeError::new_err(format!("{name}: expected a float scalar")))?;
            if !v.is_finite() {
                return Err(PyValueError::new_err(format!(
                    "{name} = {v} must be finite"
                )));
            }
            if v.abs() > f32::MAX as f64 {
                return Err(PyValueError::new_err(format!(
                    "{name}: {v} overflows float32"
                )));
            }
            ScalarArg::F32(v as f32)
        }
        S::I32 | S::U32 | S::I64 | S::U64 | S::Bool => {
            if obj.is_instance_of::<pyo3::types::PyBool>()
                || obj.is_instance_of::<pyo3::types::PyFloat>()
            {
                return Err(int("not a bool or float"));
            }
            let v: i128 = obj.extract().map_err(|_| int("an integer"))?;
            match ty {
                S::I32 => ScalarArg::I32(i32::try_from(v).map_err(|_| range(v, "int32"))?),
                S::U32 => ScalarArg::U32(u32::try_from(v).map_err(|_| range(v, "uint32"))?),
                S::I64 => ScalarArg::I64(i64::try_from(v).map_err(|_| range(v, "int64"))?),
                _ => ScalarArg::U64(u64::try_from(v).map_err(|_| range(v, "uint64"))?),
            }
        }
    })
}

/// A key for a scalar's value (the layout cache's: checks may read scalars).
fn scalar_bits(s: ScalarArg) -> u64 {
    match s {
        ScalarArg::F32(v) => v.to_bits() as u64,
        ScalarArg::I32(v) => v as u32 as u64,
        ScalarArg::U32(v) => v as u64,
        ScalarArg::I64(v) => v as u64,
        ScalarArg::U64(v) => v,
    }
}

/// The byte range `[start, end)` a view addresses (empty for no element).
fn byte_range(v: &View) -> PyResult<(u64, u64)> {
    let bytes = v.span_bytes()? as u64;
    let end = v
        .ptr
        .checked_add(bytes)
        .ok_or_else(|| PyValueError::new_err("an array's address range overflows"))?;
    Ok((v.ptr, end))
}

impl<K: HostKernel> Engine<K> {
    /// An engine over `kernel`.
    pub fn new(kernel: K) -> Self {
        Engine {
            kernel,
            used: Mutex::new(Vec::new()),
            last: Mutex::new(None),
            last_key: Mutex::new(None),
            recompile: Mutex::new(None),
        }
    }

    /// Why this instance last changed kernels: `None` before its first
    /// compile, "first compile" for that, else the part of the key that
    /// changed from its previous kernel (configuration, device, a tensor's
    /// dtype or strides), noting when the process had that kernel already.
    /// `KDA_LOG_RECOMPILES=1` prints each compile's reason.
    pub fn recompile_reason(&self) -> Option<String> {
        lock(&self.recompile).clone()
    }

    /// Kernels this instance has launched (each configuration, dtypes and
    /// strides once), whoever built them.
    pub fn cached(&self) -> usize {
        lock(&self.used).len()
    }

    /// The entry of this instance's last launch.
    pub fn last(&self) -> Option<Arc<Entry>> {
        lock(&self.last).clone()
    }

    fn launched(&self, entry: Arc<Entry>) {
        let mut used = lock(&self.used);
        if !used.iter().any(|e| Arc::ptr_eq(e, &entry)) {
            used.push(entry.clone());
        }
        *lock(&self.last) = Some(entry);
    }

    /// The parameter names, in signature order.
    pub fn param_names(&self) -> Vec<&'static str> {
        self.kernel.params().iter().map(|p| p.name).collect()
    }

    fn read_call(&self, args: &[Bound<'_, PyAny>]) -> PyResult<Call> {
        let params: Vec<ParamDesc> = self.kernel.params();
        let name = self.kernel.name();
        if args.len() != params.len() {
            let names: Vec<&str> = params.iter().map(|p| p.name).collect();
            return Err(PyTypeError::new_err(format!(
                "{name} takes {} positional arguments ({}); got {}",
                params.len(),
                names.join(", "),
                args.len()
            )));
        }
        let mut views = Vec::new();
        let mut scalars = Vec::new();
        for (p, obj) in params.iter().zip(args) {
            match p.kind {
                ParamKind::Scalar(elem) => scalars.push((p.name, read_scalar(p.name, elem, obj)?)),
                ParamKind::Tensor(_) => views.push((p.name, View::extract(p.name, obj)?)),
            }
        }
        let place = views.first().map_or(Place::Host, |(_, v)| v.place);
        let first = views.first().map_or("", |(n, _)| *n);
        for (name, v) in &views {
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
            if v.ptr == 0 && v.span()? > 0 {
                return Err(PyValueError::new_err(format!(
                    "{name}: the array's data pointer is NULL"
                )));
            }
        }
        Ok(Call {
            views,
            scalars,
            place,
        })
    }

    /// Every rule that reads no element: the kernel's own, then (through
    /// its built kernel) the declarations'.
    fn check_layout(&self, cfg: &K::Config, args: &CallArgs) -> PyResult<()> {
        let errors = self.kernel.check_layout(cfg, args);
        if !errors.is_empty() {
            return Err(arg_errors(self.kernel.name(), &errors));
        }
        Ok(())
    }

    /// Written tensors must not share memory with any other argument: the
    /// kernel reads inputs while it writes, so an overlap gives wrong
    /// results, or a race.
    fn check_overlap(&self, kernel: &Kernel, call: &Call) -> PyResult<()> {
        let written: Vec<&str> = kernel
            .tensors
            .values()
            .filter(|t| t.access.writes())
            .map(|t| t.name.as_str())
            .collect();
        for (i, (a, va)) in call.views.iter().enumerate() {
            if !written.contains(a) {
                continue;
            }
            if va.readonly {
                return Err(PyValueError::new_err(format!(
                    "{a}: the array is read-only; the kernel writes it in place"
                )));
            }
            let (s0, e0) = byte_range(va)?;
            for (j, (b, vb)) in call.views.iter().enumerate() {
                if i == j {
                    continue;
                }
                let (s1, e1) = byte_range(vb)?;
                if s0 < e1 && s1 < e0 {
                    return Err(PyValueError::new_err(format!(
                        "{a}: shares memory with {b}; the kernel writes {a} in place, so it \
                         must not overlap another argument (pass a separate tensor or a copy)"
                    )));
                }
            }
        }
        Ok(())
    }

    /// The alignment each tensor's base must have, from the declarations.
    fn check_alignment(&self, kernel: &Kernel, call: &Call) -> PyResult<()> {
        for t in kernel.tensors.values() {
            if let Some(v) = call.view(&t.name)
                && t.align > 1
                && v.ptr % t.align as u64 != 0
            {
                return Err(PyValueError::new_err(format!(
                    "{}: address {:#x} is not {}-byte aligned, which the kernel's vector \
                     accesses need",
                    t.name, v.ptr, t.align
                )));
            }
        }
        Ok(())
    }

    /// Launch on `args` (positional, signature order) in place. `stream`:
    /// the CUDA stream for GPU tensors on a device ordinal; `check_values`:
    /// read the tensors whose values the spec constrains (default: unless
    /// the stream is capturing).
    pub fn call(
        &self,
        py: Python<'_>,
        args: &[Bound<'_, PyAny>],
        stream: impl FnOnce(usize) -> PyResult<u64>,
        check_values: Option<bool>,
    ) -> PyResult<()> {
        let call = self.read_call(args)?;
        match call.place {
            Place::Host => self.run_host(py, &call),
            Place::Cuda(ordinal) => {
                self.run_gpu(py, &call, ordinal, stream(ordinal)?, check_values)
            }
        }
    }

    fn kernel_key(cfg: &K::Config, call: &Call) -> KernelKey<K::Config> {
        KernelKey {
            cfg: cfg.clone(),
            place: call.place,
            layout: call
                .views
                .iter()
                .map(|(n, v)| (*n, v.dtype, v.strides.clone()))
                .collect(),
        }
    }

    /// The process's entry for `call`'s kernel on `dev`: built, specialised
    /// on the call's strides and loaded unless some instance has done so.
    /// `may_compile`: false while a graph is captured.
    fn entry<D: Target>(
        &self,
        dev: &D,
        cfg: &K::Config,
        call: &Call,
        args: &CallArgs,
        may_compile: bool,
    ) -> PyResult<Arc<Entry>> {
        let key = Self::kernel_key(cfg, call);
        let previous = lock(&self.last_key).replace(key.clone());
        if let Some(e) = with_cache::<K, _>(|c| c.kernels.get(&key).cloned())? {
            if let Some(old) = previous.as_ref().filter(|old| **old != key) {
                let change = key_change(old, &key);
                *lock(&self.recompile) =
                    Some(format!("{change} (compiled before in this process)"));
            }
            return Ok(e);
        }
        let reason = match &previous {
            None => "first compile".to_string(),
            Some(old) => key_change(old, &key),
        };
        if std::env::var_os("KDA_LOG_RECOMPILES").is_some_and(|v| v != "0") {
            eprintln!("kda: compiling {} ({reason})", self.kernel.name());
        }
        *lock(&self.recompile) = Some(reason);
        if !may_compile {
            return Err(PyRuntimeError::new_err(format!(
                "{}: this configuration (sizes, dtypes, strides) has not been compiled yet, and \
                 the stream is capturing a CUDA graph; call it once before the capture (a \
                 warm-up) so the capture only records the launch",
                self.kernel.name()
            )));
        }
        Self::compile(dev, cfg, args, key)
    }

    /// Build, specialise and load the kernel of `key` (outside the cache's
    /// lock: another thread may build the same kernel meanwhile; the first
    /// to finish is kept).
    fn compile<D: Target>(
        dev: &D,
        cfg: &K::Config,
        args: &CallArgs,
        key: KernelKey<K::Config>,
    ) -> PyResult<Arc<Entry>> {
        let kernel = specialized::<K>(cfg, args)?;
        let module = dev.load(&kernel).map_err(|e| runtime_err(D::LOADING, e))?;
        let entry = Arc::new(Entry {
            kernel,
            module: D::wrap(module),
        });
        with_cache::<K, _>(|c| {
            c.kernels
                .entry(key)
                .or_insert_with(|| {
                    COMPILED.fetch_add(1, Ordering::Relaxed);
                    entry
                })
                .clone()
        })
    }

    fn run_host(&self, py: Python<'_>, call: &Call) -> PyResult<()> {
        let mut storage = Vec::with_capacity(call.views.len());
        let mut args = call.layout_args();
        for ((name, v), (_, t)) in call.views.iter().zip(&mut args.tensors) {
            // Read through the kernel: a bogus pointer is an error, not a crash.
            let bytes = crate::hostmem::read(v.ptr, v.span_bytes()?)
                .map_err(|e| PyValueError::new_err(format!("{name}: {e}")))?;
            t.data = Some(host_tensor(name, v, &bytes)?);
            storage.push(bytes);
        }
        let cfg = self.kernel.config(&args).map_err(PyValueError::new_err)?;
        self.check_layout(&cfg, &args)?;
        let errors = self.kernel.check_values(&cfg, &args);
        if !errors.is_empty() {
            return Err(arg_errors(self.kernel.name(), &errors));
        }
        let sim: &SimDevice = &SIM;
        let entry = self.entry(sim, &cfg, call, &args, true)?;
        self.check_overlap(&entry.kernel, call)?;
        self.check_alignment(&entry.kernel, call)?;
        // Every written array must take its results: write its own bytes
        // back first, so memory that is not writable fails the call before
        // any array is changed.
        for (i, (name, v)) in call.views.iter().enumerate() {
            if !entry
                .kernel
                .tensors
                .values()
                .any(|t| t.name == *name && t.access.writes())
            {
                continue;
            }
            let runs = crate::hostmem::runs(&v.offsets(), v.dtype.size());
            let pieces: Vec<(usize, &[u8])> = runs
                .iter()
                .map(|&(at, len)| (at, &storage[i][at..at + len]))
                .collect();
            crate::hostmem::write(v.ptr, &pieces)
                .map_err(|e| PyValueError::new_err(format!("{name}: {e}")))?;
        }
        let grid = K::grid(&cfg, &args).map_err(PyValueError::new_err)?;
        let module = entry.module::<SimDevice>()?;
        let buffers = storage
            .iter()
            .map(|b| sim.upload(b))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| runtime_err("simulator upload", e))?;
        let (bound, launch) = launch_config::<SimDevice>(&entry.kernel, call, &buffers, grid)?;
        let refs = bound;
        // The simulator runs without the GIL: other Python threads go on.
        py.detach(|| sim.launch(module, &launch, &refs))
            .map_err(|e| runtime_err("simulator launch", e))?;
        for t in entry.kernel.tensors.values().filter(|t| t.access.writes()) {
            let Some(i) = call.views.iter().position(|(n, _)| *n == t.name) else {
                continue;
            };
            let out = sim
                .download(&buffers[i])
                .map_err(|e| runtime_err("simulator download", e))?;
            let (name, v) = &call.views[i];
            let runs = crate::hostmem::runs(&v.offsets(), v.dtype.size());
            let pieces: Vec<(usize, &[u8])> = runs
                .iter()
                .map(|&(at, len)| (at, &out[at..at + len]))
                .collect();
            crate::hostmem::write(v.ptr, &pieces)
                .map_err(|e| PyValueError::new_err(format!("{name}: {e}")))?;
        }
        self.launched(entry);
        Ok(())
    }

    fn run_gpu(
        &self,
        py: Python<'_>,
        call: &Call,
        ordinal: usize,
        stream: u64,
        check_values: Option<bool>,
    ) -> PyResult<()> {
        let g =
            gpu::gpu(ordinal).map_err(|e| runtime_err(&format!("opening cuda:{ordinal}"), e))?;
        let cu_stream = stream as cudarc::driver::sys::CUstream;
        // SAFETY: the caller's stream of this device.
        let capturing =
            unsafe { g.capturing(cu_stream) }.map_err(|e| runtime_err("querying the stream", e))?;
        let mut args = call.layout_args();
        let base = self.kernel.config(&args).map_err(PyValueError::new_err)?;
        let layout_key = LayoutKey {
            cfg: base.clone(),
            place: call.place,
            tensors: call
                .views
                .iter()
                .map(|(n, v)| (*n, v.dtype, v.shape.clone(), v.strides.clone()))
                .collect(),
            scalars: call
                .scalars
                .iter()
                .map(|&(n, s)| (n, scalar_bits(s)))
                .collect(),
        };
        // The tuning table and the layout checks are consulted once per
        // layout, not on every call.
        let cfg = match with_cache::<K, _>(|c| c.layouts.get(&layout_key).cloned())? {
            Some(cfg) => cfg,
            None => {
                let cfg = self.tuned(&g.dev, &args, base);
                self.check_layout(&cfg, &args)?;
                with_cache::<K, _>(|c| c.layouts.insert(layout_key, cfg.clone()))?;
                cfg
            }
        };
        let value_params = self.kernel.value_params();
        if !value_params.is_empty() && check_values.unwrap_or(!capturing) {
            if capturing {
                return Err(PyValueError::new_err(
                    "check_values=True reads tensors back, which cannot be done while the \
                     stream captures a CUDA graph; check them on an eager call and pass \
                     check_values=False (the default during capture)",
                ));
            }
            for (name, t) in &mut args.tensors {
                if !value_params.contains(name) {
                    continue;
                }
                let v = call.view(name).expect("args follow the call's views");
                let span = v.span_bytes()?;
                let bytes = py
                    .detach(|| {
                        // SAFETY: the caller's stream, and the storage of a
                        // CUDA array of this device.
                        unsafe { g.read(stream as cudarc::driver::sys::CUstream, v.ptr, span) }
                    })
                    .map_err(|e| runtime_err(&format!("reading {name}"), e))?;
                t.data = Some(host_tensor(name, v, &bytes)?);
            }
            let errors = self.kernel.check_values(&cfg, &args);
            if !errors.is_empty() {
                return Err(arg_errors(self.kernel.name(), &errors));
            }
        }
        let entry = self.entry(&g.dev, &cfg, call, &args, !capturing)?;
        self.check_overlap(&entry.kernel, call)?;
        self.check_alignment(&entry.kernel, call)?;
        let grid = K::grid(&cfg, &args).map_err(PyValueError::new_err)?;
        let module = entry.module::<CudaDevice>()?;
        // SAFETY: every pointer is the storage of a CUDA array of this
        // device, which the caller keeps alive (and does not touch
        // conflictingly) until the launch has run on `stream`.
        let buffers = call
            .views
            .iter()
            .map(|(_, v)| Ok(unsafe { g.dev.borrow_external(v.ptr, v.span_bytes()?) }))
            .collect::<PyResult<Vec<_>>>()?;
        let (refs, launch) = launch_config::<CudaDevice>(&entry.kernel, call, &buffers, grid)?;
        // SAFETY: `stream` is the caller's stream of this device (torch's
        // current stream unless given), alive for the call.
        unsafe { g.dev.launch_on_stream(cu_stream, module, &launch, &refs) }
            .map_err(|e| runtime_err("launch", e))?;
        self.launched(entry);
        Ok(())
    }

    /// `cfg`, or the schedule an autotune stored for this device, kernel and
    /// call key where one is in the tuning table and in `cfg`'s schedule
    /// space.
    fn tuned(&self, dev: &CudaDevice, args: &CallArgs, cfg: K::Config) -> K::Config {
        let key = kda_host::tune::key(
            &dev.describe(),
            self.kernel.name(),
            &self.kernel.tune_key(args),
        );
        let found = tune_table().entries.get(&key).and_then(|e| {
            self.kernel
                .schedules(&cfg)
                .into_iter()
                .find(|c| K::schedule_label(c) == e.choice)
        });
        found.unwrap_or(cfg)
    }

    /// Time every schedule of the call's configuration on its GPU (graph
    /// replays of `reps` launches over copies of every argument rotating
    /// past 4x L2, the median of 7 replays), print progress to stderr, store
    /// the fastest in the tuning table for this device, kernel and call key,
    /// and use it from then on. The caller's tensors are read, not written.
    /// Returns the choice's label and every schedule's µs per launch.
    pub fn autotune(
        &self,
        py: Python<'_>,
        args: &[Bound<'_, PyAny>],
        stream: u64,
        reps: usize,
        progress: bool,
    ) -> PyResult<(String, Vec<(String, f64)>)> {
        let call = self.read_call(args)?;
        let Place::Cuda(ordinal) = call.place else {
            return Err(PyValueError::new_err(
                "autotune times launches on the GPU: pass CUDA tensors (NumPy arrays run on \
                 the simulator, which has no timing)",
            ));
        };
        let reps = reps.clamp(1, 10_000);
        let g =
            gpu::gpu(ordinal).map_err(|e| runtime_err(&format!("opening cuda:{ordinal}"), e))?;
        let args = call.layout_args();
        let base = self.kernel.config(&args).map_err(PyValueError::new_err)?;
        self.check_layout(&base, &args)?;
        let space = self.kernel.schedules(&base);
        // Copies of every argument, enough to rotate past 4x L2 and within
        // half the free memory, filled from the caller's tensors once the
        // caller's stream has produced them.
        let spans = call
            .views
            .iter()
            .map(|(_, v)| v.span_bytes())
            .collect::<PyResult<Vec<_>>>()?;
        let per_call = spans.iter().sum::<usize>().max(1);
        let l2 = g
            .dev
            .l2_cache_bytes()
            .map_err(|e| runtime_err("L2 size", e))?;
        let (free, _) = g.dev.memory().map_err(|e| runtime_err("free memory", e))?;
        let copies = (4 * l2)
            .div_ceil(per_call)
            .clamp(1, 64)
            .min((free / 2 / per_call).max(1));
        if per_call.saturating_mul(copies) > free / 2 {
            return Err(PyValueError::new_err(format!(
                "autotune needs {} MiB of scratch copies; {} MiB are free",
                per_call.saturating_mul(copies) >> 20,
                free >> 20
            )));
        }
        // SAFETY: the caller's stream of this device.
        py.detach(|| unsafe { g.synchronize(stream as cudarc::driver::sys::CUstream) })
            .map_err(|e| runtime_err("waiting for the caller's stream", e))?;
        let mut sets = Vec::with_capacity(copies);
        for _ in 0..copies {
            let mut set = Vec::with_capacity(spans.len());
            for ((_, v), &bytes) in call.views.iter().zip(&spans) {
                // SAFETY: the caller's tensor, alive for the call; only read.
                let src = unsafe { g.dev.borrow_external(v.ptr, bytes) };
                let dst = g
                    .dev
                    .alloc_zeroed(bytes)
                    .map_err(|e| runtime_err("scratch", e))?;
                g.dev
                    .copy_buffer(&src, &dst)
                    .map_err(|e| runtime_err("scratch copy", e))?;
                set.push(dst);
            }
            sets.push(set);
        }
        let mut times = Vec::with_capacity(space.len());
        for (i, cand) in space.iter().enumerate() {
            py.check_signals()?;
            let label = K::schedule_label(cand);
            let grid = K::grid(cand, &args).map_err(PyValueError::new_err)?;
            let key = Self::kernel_key(cand, &call);
            let cached = with_cache::<K, _>(|c| c.kernels.get(&key).cloned())?;
            let entry = match cached {
                Some(e) => e,
                None => Self::compile(&g.dev, cand, &args, key)?,
            };
            let module = entry.module::<CudaDevice>()?;
            let launches = sets
                .iter()
                .map(|set| launch_config::<CudaDevice>(&entry.kernel, &call, set, grid))
                .collect::<PyResult<Vec<_>>>()?;
            let us = py
                .detach(|| -> Result<f64, RuntimeError> {
                    let graph = kda_runtime::cuda::Graph::capture(&g.dev, |dev| {
                        for r in 0..reps {
                            let (refs, cfg) = &launches[r % launches.len()];
                            dev.launch(module, cfg, refs)?;
                        }
                        Ok(())
                    })?;
                    graph.replay()?;
                    let samples = graph.time_replays(&g.dev, 7)?;
                    let ms = kda_runtime::cuda::median(&samples) as f64;
                    Ok(ms * 1e3 / graph.launches().max(1) as f64)
                })
                .map_err(|e| runtime_err(&format!("timing {label}"), e))?;
            if progress {
                let done = (i + 1) * 20 / space.len();
                eprintln!(
                    "{} autotune [{}{}] {}/{}  {label}: {us:.2} us",
                    self.kernel.name(),
                    "#".repeat(done),
                    ".".repeat(20 - done),
                    i + 1,
                    space.len()
                );
            }
            times.push((label, us));
        }
        let (best, _) = times
            .iter()
            .enumerate()
            .min_by(|a, b| a.1.1.total_cmp(&b.1.1))
            .ok_or_else(|| PyValueError::new_err("the schedule space is empty"))?;
        let choice = times[best].0.clone();
        let key = kda_host::tune::key(
            &g.dev.describe(),
            self.kernel.name(),
            &self.kernel.tune_key(&args),
        );
        let path = kda_host::tune::default_path().ok_or_else(|| {
            PyRuntimeError::new_err("no place for the tuning table: set KDA_TUNE_FILE or HOME")
        })?;
        let entry = TuneEntry {
            choice: choice.clone(),
            times_us: times.clone(),
        };
        let table = TuneTable::record(&path, key.clone(), entry)
            .map_err(|e| runtime_err(&format!("writing {}", path.display()), e))?;
        *lock(&TUNE_TABLE) = Some(table);
        // Layouts seen before look their configuration up again.
        with_cache::<K, _>(|c| c.layouts.clear())?;
        if progress {
            eprintln!(
                "{} autotune: {choice} stored in {}",
                self.kernel.name(),
                path.display()
            );
        }
        Ok((choice, times))
    }

    /// The tensors the kernel writes (in place), by parameter name.
    pub fn written(&self) -> PyResult<Vec<&'static str>> {
        let (kernel, _) = self.kernel_of(None)?;
        Ok(self
            .kernel
            .params()
            .into_iter()
            .filter(|p| {
                kernel
                    .tensors
                    .values()
                    .any(|t| t.name == p.name && t.access.writes())
            })
            .map(|p| p.name)
            .collect())
    }

    /// The kernel of `ptx()` / `info()`: the last launched, or the one of
    /// the kernel's example call of `size`; and whether it was launched.
    pub fn kernel_of(&self, size: Option<u32>) -> PyResult<(Kernel, Option<K::Config>)> {
        if let (None, Some(entry)) = (size, self.last()) {
            return Ok((entry.kernel.clone(), None));
        }
        let (cfg, args) = self.kernel.example(size).map_err(PyValueError::new_err)?;
        Ok((specialized::<K>(&cfg, &args)?, Some(cfg)))
    }
}

/// The kernel of `cfg` for `args`, specialised on their strides: every
/// extent, stride, dtype and alignment is checked against its declarations
/// on the way (`kda_host::run::specialize_layouts`), a mismatch raised
/// naming the argument.
fn specialized<K: HostKernel>(cfg: &K::Config, args: &CallArgs) -> PyResult<Kernel> {
    let kernel = K::build(cfg, args).map_err(PyValueError::new_err)?;
    let layouts: Vec<_> = args
        .tensors
        .iter()
        .map(|(n, t)| {
            let shape = TensorShape {
                shape: t.shape.clone(),
                strides: t.strides.clone(),
            };
            (*n, t.dtype, shape)
        })
        .collect();
    kda_host::run::specialize_layouts(kernel, &layouts, &args.scalars).map_err(bind_error)
}

/// Bind the call's buffers to `kernel` by name: the buffers in the
/// kernel's order and the launch configuration.
fn launch_config<'a, D: Device>(
    kernel: &Kernel,
    call: &Call,
    buffers: &'a [D::Buffer],
    grid: [u32; 3],
) -> PyResult<(Vec<&'a D::Buffer>, LaunchConfig)> {
    let erased: Vec<(&str, Option<ErasedArg<'a, D>>)> = call
        .views
        .iter()
        .zip(buffers)
        .map(|((n, v), buf)| {
            let arg = ErasedArg {
                buf,
                dtype: kda_host::run::scalar(v.dtype),
                shape: TensorShape {
                    shape: v.shape.clone(),
                    strides: v.strides.clone(),
                },
            };
            (*n, Some(arg))
        })
        .collect();
    let bound = typed::bind::<D>(kernel, &erased, &call.scalars).map_err(bind_error)?;
    let cfg = bound.config(Launch { grid, pdl: true });
    Ok((bound.buffers, cfg))
}
