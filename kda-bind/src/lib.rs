//! The binding layer: any kda kernel as a Python callable, from one
//! declaration in the kernel author's own crate.
//!
//! A kernel crate implements [`kda_host::kernel::HostKernel`] (its
//! configuration, build, grid and spec rules; the parameter list comes from
//! the `#[cluster_kernel]` signature's descriptor) and writes
//!
//! ```ignore
//! kda_bind::expose! {
//!     /// HGRN-2 decode step.
//!     Hgrn2Decode(my_crate::Hgrn2), size = batch, {
//!         #[new]
//!         #[pyo3(signature = (heads, dim = 128))]
//!         fn new(heads: u32, dim: u32) -> PyResult<Self> {
//!             Self::wrap(my_crate::Hgrn2::new(heads, dim))
//!         }
//!     }
//! }
//! ```
//!
//! which makes a `#[pyclass]` whose `__call__` takes the kernel's arguments
//! positionally in signature order: torch/cupy CUDA tensors (DLPack or
//! `__cuda_array_interface__`) launch in place on the caller's stream
//! (torch's current one by default; CUDA-graph capture safe once warmed
//! up), NumPy arrays run on the simulator. Every bad argument raises
//! `TypeError` (a dtype, a non-array) or `ValueError` (shape, strides,
//! alignment, device, NaN/inf scalars, a written tensor overlapping another
//! argument, a NULL pointer) naming the parameter, before anything runs.
//! `ptx()`, `info()` and `params` come with it. Kernels are cached per
//! process by configuration, dtypes, strides and device.

pub mod engine;
pub mod gpu;
pub mod hostmem;
pub mod view;

pub use engine::{Engine, compiled};
/// The PyO3 the generated classes use (the kernel crate names this one, so
/// the versions cannot disagree).
pub use pyo3;

use kda_host::kernel::HostKernel;
use kda_ir::pipeline::{self, Options};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyModule, PyTuple};

/// The Python module `name` compiled from `code` (text embedded in this
/// crate), once per interpreter: kept in `sys.modules`.
fn embedded_module<'py>(
    py: Python<'py>,
    code: &std::ffi::CStr,
    file: &std::ffi::CStr,
    name: &std::ffi::CStr,
) -> PyResult<Bound<'py, PyModule>> {
    let modules = py.import("sys")?.getattr("modules")?;
    let key = name.to_string_lossy();
    if let Ok(m) = modules.get_item(&*key) {
        return Ok(m.cast_into::<PyModule>()?);
    }
    let m = PyModule::from_code(py, code, file, name)?;
    modules.set_item(&*key, &m)?;
    Ok(m)
}

/// The stream helpers (`current`, `handle`).
fn stream_helpers(py: Python<'_>) -> PyResult<Bound<'_, PyModule>> {
    embedded_module(
        py,
        pyo3::ffi::c_str!(include_str!("stream.py")),
        pyo3::ffi::c_str!("kda_bind_stream.py"),
        pyo3::ffi::c_str!("kda_bind_stream"),
    )
}

/// The stream handle of `stream` (None: the current stream of the array
/// library in use) for device `ordinal`.
pub fn resolve_stream(
    py: Python<'_>,
    stream: Option<&Bound<'_, PyAny>>,
    ordinal: usize,
) -> PyResult<u64> {
    let helpers = stream_helpers(py)?;
    let handle = match stream {
        None => helpers.call_method1("current", (ordinal,))?,
        Some(s) => helpers.call_method1("handle", (s,))?,
    };
    handle.extract()
}

/// `torch_op(name)` of a generated class: the instance as a
/// `torch.library` custom op named `name` (`"namespace::op"`; default
/// `kda::<class>_<n>`) that mutates the tensors the kernel writes, with a
/// fake implementation, for `torch.compile` (no graph break) and CUDA
/// graphs.
pub fn torch_op<'py, K: HostKernel>(
    obj: &Bound<'py, PyAny>,
    engine: &Engine<K>,
    name: Option<&str>,
) -> PyResult<Bound<'py, PyAny>> {
    let py = obj.py();
    let helpers = embedded_module(
        py,
        pyo3::ffi::c_str!(include_str!("torch_ops.py")),
        pyo3::ffi::c_str!("kda_bind_torch_ops.py"),
        pyo3::ffi::c_str!("kda_bind_torch_ops"),
    )?;
    let params = engine.kernel.params();
    let names: Vec<&str> = params.iter().map(|p| p.name).collect();
    let tensors: Vec<&str> = params
        .iter()
        .filter(|p| !p.is_scalar())
        .map(|p| p.name)
        .collect();
    let ints: Vec<&str> = params
        .iter()
        .filter(|p| {
            matches!(
                p.kind,
                kda_ir::desc::ParamKind::Scalar(kda_ir::desc::ElemDesc::Fixed(s))
                    if !matches!(s, kda_ir::Scalar::F32 | kda_ir::Scalar::BF16)
            )
        })
        .map(|p| p.name)
        .collect();
    let written = engine.written()?;
    helpers.call_method1("make", (obj, name, names, tensors, written, ints))
}

/// `__call__` of a generated class.
pub fn call<K: HostKernel>(
    engine: &Engine<K>,
    args: &Bound<'_, PyTuple>,
    stream: Option<&Bound<'_, PyAny>>,
    check_values: Option<bool>,
) -> PyResult<()> {
    let py = args.py();
    let items: Vec<Bound<'_, PyAny>> = args.iter().collect();
    engine.call(
        py,
        &items,
        |ordinal| resolve_stream(py, stream, ordinal),
        check_values,
    )
}

/// `autotune(*args)` of a generated class: `(choice, {schedule: µs})`.
pub fn autotune<'py, K: HostKernel>(
    engine: &Engine<K>,
    args: &Bound<'py, PyTuple>,
    stream: Option<&Bound<'py, PyAny>>,
    reps: usize,
    progress: bool,
) -> PyResult<(String, Bound<'py, PyDict>)> {
    let py = args.py();
    let items: Vec<Bound<'_, PyAny>> = args.iter().collect();
    let ordinal = items
        .iter()
        .find_map(|a| view::View::extract("argument", a).ok())
        .and_then(|v| match v.place {
            view::Place::Cuda(o) => Some(o),
            view::Place::Host => None,
        })
        .unwrap_or(0);
    let handle = resolve_stream(py, stream, ordinal)?;
    let (choice, times) = engine.autotune(py, &items, handle, reps, progress)?;
    let d = PyDict::new(py);
    for (label, us) in times {
        d.set_item(label, us)?;
    }
    Ok((choice, d))
}

/// `ptx()` of a generated class.
pub fn ptx<K: HostKernel>(engine: &Engine<K>, size: Option<u32>) -> PyResult<String> {
    let (kernel, _) = engine.kernel_of(size)?;
    pipeline::compile(&kernel, &Options::default())
        .map(|c| c.ptx)
        .map_err(|e| PyValueError::new_err(format!("compiling: {e}")))
}

/// `info()` of a generated class: configuration and resources (the
/// driver's once launched on a GPU, else ptxas's where it is installed).
pub fn info<'py, K: HostKernel>(
    py: Python<'py>,
    engine: &Engine<K>,
    size: Option<u32>,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    let (kernel, cfg) = engine.kernel_of(size)?;
    let compiled = pipeline::compile(&kernel, &Options::default())
        .map_err(|e| PyValueError::new_err(format!("compiling: {e}")))?;
    d.set_item("kernel", kernel.name.clone())?;
    let launched = cfg.is_none();
    d.set_item(
        "source",
        if launched {
            "last launch"
        } else {
            "contiguous tensors"
        },
    )?;
    if let Some(cfg) = &cfg {
        for (k, v) in K::describe(cfg) {
            d.set_item(k, v)?;
        }
    }
    d.set_item("block", kernel.launch.block)?;
    d.set_item("cluster_dim", kernel.launch.cluster)?;
    d.set_item("ptx_lines", compiled.ptx.lines().count())?;
    d.set_item("dynamic_shared_bytes", compiled.layout.bytes)?;
    d.set_item("cached_kernels", engine.cached())?;
    d.set_item("recompile_reason", engine.recompile_reason())?;
    d.set_item("process_compilations", compiled_count())?;
    if let Some(r) = engine
        .last()
        .and_then(|e| e.resources())
        .filter(|_| launched)
    {
        d.set_item("registers", r.registers)?;
        d.set_item("static_shared_bytes", r.static_smem_bytes)?;
        d.set_item("local_bytes", r.local_bytes)?;
        d.set_item("resources_from", "driver")?;
        if let Some((how, ms)) = engine.last().and_then(|e| e.load_report()) {
            d.set_item("module_source", how)?;
            d.set_item("module_load_ms", ms)?;
        }
    } else if kda_ir::ptxas::find().is_some() {
        match kda_ir::ptxas::assemble(&compiled.ptx) {
            Ok(r) => {
                d.set_item("registers", r.registers)?;
                d.set_item("spill_stores", r.spill_stores)?;
                d.set_item("spill_loads", r.spill_loads)?;
                d.set_item("stack_frame", r.stack_frame)?;
                d.set_item("static_shared_bytes", r.shared_bytes)?;
                d.set_item("resources_from", "ptxas")?;
            }
            Err(e) => d.set_item("ptxas_error", e.to_string())?,
        }
    } else {
        d.set_item(
            "resources_from",
            "none (no GPU launch yet and no ptxas on PATH or in .tools/)",
        )?;
    }
    Ok(d)
}

fn compiled_count() -> usize {
    engine::compiled()
}

/// A `#[pyclass]` over an [`Engine`] of a [`HostKernel`]: `__call__`
/// (launch in place on the positional arguments, signature order),
/// `ptx(size)`, `info(size)`, `params`, plus the class's own methods (at
/// least a `#[new]` constructor returning `Self::wrap(kernel)`). `size =
/// name` names the size argument of `ptx`/`info` (default `size`), the
/// one [`HostKernel::example`] takes; `check = name` names `__call__`'s
/// keyword that turns the value checks on or off (default `check_values`);
/// `module = "pkg.mod"` sets the class's module.
#[macro_export]
macro_rules! expose {
    (
        $(#[$doc:meta])*
        $class:ident($kernel:ty) $(, size = $size:ident)? $(, check = $check:ident)? $(, module = $module:literal)?,
        { $($methods:tt)* }
    ) => {
        $crate::expose!(@class [$(#[$doc])*] $class $kernel [$($size)? size] [$($check)? check_values] [$($module)? "builtins"] { $($methods)* });
    };
    (@class [$($doc:tt)*] $class:ident $kernel:ty [$size:ident $($rest:ident)?] [$check:ident $($crest:ident)?] [$module:literal $($mrest:literal)?] { $($methods:tt)* }) => {
        $($doc)*
        #[$crate::pyo3::pyclass(crate = "::kda_bind::pyo3", module = $module, frozen)]
        pub struct $class {
            engine: $crate::Engine<$kernel>,
        }

        #[$crate::pyo3::pymethods(crate = "::kda_bind::pyo3")]
        impl $class {
            $($methods)*

            /// Launch in place on the kernel's arguments, positionally in
            /// signature order (see `params`). `stream`: a CUDA stream (torch,
            /// cupy or a raw handle; default the current one); the check
            /// keyword (`check_values` unless the class renames it): read back
            /// the tensors whose values the kernel's spec constrains (default:
            /// unless the stream is capturing a CUDA graph).
            #[pyo3(signature = (*args, stream = None, $check = None))]
            fn __call__(
                &self,
                args: &$crate::pyo3::Bound<'_, $crate::pyo3::types::PyTuple>,
                stream: Option<&$crate::pyo3::Bound<'_, $crate::pyo3::PyAny>>,
                $check: Option<bool>,
            ) -> $crate::pyo3::PyResult<()> {
                $crate::call(&self.engine, args, stream, $check)
            }

            /// The PTX of the kernel last launched, or (given a size, or
            /// before any launch) of the one for contiguous tensors.
            #[pyo3(signature = ($size = None))]
            fn ptx(&self, $size: Option<u32>) -> $crate::pyo3::PyResult<String> {
                $crate::ptx(&self.engine, $size)
            }

            /// Configuration and resource report (registers, shared memory,
            /// spills where known) of the same kernel as `ptx()`.
            #[pyo3(signature = ($size = None))]
            fn info<'py>(
                &self,
                py: $crate::pyo3::Python<'py>,
                $size: Option<u32>,
            ) -> $crate::pyo3::PyResult<$crate::pyo3::Bound<'py, $crate::pyo3::types::PyDict>> {
                $crate::info(py, &self.engine, $size)
            }

            /// Time every schedule of this kernel's schedule space on these
            /// (CUDA) arguments, in CUDA graphs over copies rotating past L2
            /// (the arguments are read, not written); print progress; store
            /// the fastest per device, kernel and call shape in the tuning
            /// table (`KDA_TUNE_FILE`, else the kda cache folder), which later
            /// calls (this process and others) use. Returns `(choice,
            /// {schedule: µs per launch})`.
            #[pyo3(signature = (*args, stream = None, reps = 50, progress = true))]
            fn autotune<'py>(
                &self,
                args: &$crate::pyo3::Bound<'py, $crate::pyo3::types::PyTuple>,
                stream: Option<&$crate::pyo3::Bound<'py, $crate::pyo3::PyAny>>,
                reps: usize,
                progress: bool,
            ) -> $crate::pyo3::PyResult<(String, $crate::pyo3::Bound<'py, $crate::pyo3::types::PyDict>)> {
                $crate::autotune(&self.engine, args, stream, reps, progress)
            }

            /// This instance as a `torch.library` custom op (`"ns::name"`,
            /// default `kda::<class>_<n>`): the written tensors declared as
            /// mutated and a fake implementation, so `torch.compile` keeps
            /// it in one graph and CUDA graphs capture it.
            #[pyo3(signature = (name = None))]
            fn torch_op<'py>(
                slf: &$crate::pyo3::Bound<'py, Self>,
                name: Option<&str>,
            ) -> $crate::pyo3::PyResult<$crate::pyo3::Bound<'py, $crate::pyo3::PyAny>> {
                $crate::torch_op(slf.as_any(), &slf.get().engine, name)
            }

            /// The positional parameter names, in order.
            #[getter]
            fn params(&self) -> Vec<&'static str> {
                self.engine.param_names()
            }
        }

        impl $class {
            /// The class over `kernel` (a constructor's result), its
            /// configuration errors as `ValueError`.
            #[allow(dead_code)]
            fn wrap<E: ::std::fmt::Display>(kernel: ::std::result::Result<$kernel, E>) -> $crate::pyo3::PyResult<Self> {
                kernel
                    .map(|k| $class { engine: $crate::Engine::new(k) })
                    .map_err(|e| $crate::pyo3::exceptions::PyValueError::new_err(e.to_string()))
            }

            /// The engine behind the class.
            #[allow(dead_code)]
            pub fn engine(&self) -> &$crate::Engine<$kernel> {
                &self.engine
            }
        }
    };
}
