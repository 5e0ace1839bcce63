//! The Python classes, one per kernel family: a constructor mirroring the
//! kernel's configuration, `__call__` (launch in place), `ptx()`, `info()`.
//! The methods' bodies are shared here ([`family_class!`] writes the
//! `#[pyclass]` and the methods every class has); each class file only says
//! what its constructor takes and what its getters and `repr` show.

/// A `#[pyclass]` over an `Engine<$family>`: `__call__`, `ptx()`,
/// `info()`, `params` and `engine()`, plus the class's own `methods`
/// (constructor, getters, `__repr__`). PyO3 reads one `#[pymethods]` block
/// per class (several need its `multiple-pymethods` feature and the
/// `inventory` crate), hence one macro writing the whole block.
macro_rules! family_class {
    // A decode crate's kernel: arguments in its crate doc, the kernel for
    // a batch from its family's `config`.
    (
        $(#[$class_doc:meta])*
        $class:ident($family:ty), { $($methods:tt)* }
    ) => {
        family_class! {
            $(#[$class_doc])*
            $class($family),
            call_doc = "Launch in place on the positional arguments of the crate doc's §1.",
            ptx_doc = "The PTX of the kernel last launched, or (with `requests`, or before\n\
                any launch) of the one for contiguous tensors. The kernel does not\n\
                depend on the batch size.",
            { $($methods)* }
        }
    };
    (
        $(#[$class_doc:meta])*
        $class:ident($family:ty), call_doc = $call_doc:literal, ptx_doc = $ptx_doc:literal,
        { $($methods:tt)* }
    ) => {
        $(#[$class_doc])*
        #[pyclass(module = "kda._kda", frozen)]
        pub struct $class {
            engine: $crate::engine::Engine<$family>,
        }

        #[pymethods]
        impl $class {
            $($methods)*

            #[doc = $call_doc]
            #[pyo3(signature = (*args, stream = None, check_slots = None))]
            fn __call__(
                &self,
                args: &Bound<'_, pyo3::types::PyTuple>,
                stream: Option<&Bound<'_, PyAny>>,
                check_slots: Option<bool>,
            ) -> PyResult<()> {
                super::call(&self.engine, args, stream, check_slots)
            }

            #[doc = $ptx_doc]
            #[pyo3(signature = (requests = None))]
            fn ptx(&self, requests: Option<u32>) -> PyResult<String> {
                super::ptx_of(&self.engine, requests)
            }

            /// Configuration and resource report (registers, shared memory,
            /// spills where known) of the same kernel as `ptx()`.
            #[pyo3(signature = (requests = None))]
            fn info<'py>(
                &self,
                py: Python<'py>,
                requests: Option<u32>,
            ) -> PyResult<Bound<'py, pyo3::types::PyDict>> {
                super::info_of(py, &self.engine, requests)
            }

            /// The positional parameter names, in order.
            #[getter]
            fn params(&self) -> Vec<&'static str> {
                super::params_of(&self.engine)
            }
        }

        impl $class {
            pub fn engine(&self) -> &$crate::engine::Engine<$family> {
                &self.engine
            }
        }
    };
}

mod gdn;
mod kda;
mod mamba2;

pub use gdn::GdnDecode;
pub use kda::KdaSplit;
pub use mamba2::Mamba2Decode;

use kda_ir::pipeline::{self, Options};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use crate::engine::{Engine, Family};

/// `.ptx()` and `.info()` of a family: the kernel last launched, or the
/// contiguous one of `requests` requests.
fn kernel_of<F: Family>(engine: &Engine<F>, requests: Option<u32>) -> PyResult<kda_ir::Kernel> {
    match (requests, engine.last()) {
        (None, Some(entry)) => Ok(entry.kernel.clone()),
        (requests, _) => {
            let cfg = engine
                .family
                .config(requests.unwrap_or(1))
                .map_err(PyValueError::new_err)?;
            F::contiguous_kernel(&cfg).map_err(PyValueError::new_err)
        }
    }
}

pub(crate) fn ptx_of<F: Family>(engine: &Engine<F>, requests: Option<u32>) -> PyResult<String> {
    let kernel = kernel_of(engine, requests)?;
    pipeline::compile(&kernel, &Options::default())
        .map(|c| c.ptx)
        .map_err(|e| PyValueError::new_err(format!("compiling: {e}")))
}

pub(crate) fn info_of<'py, F: Family>(
    py: Python<'py>,
    engine: &Engine<F>,
    requests: Option<u32>,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    let launched = requests.is_none() && engine.last().is_some();
    let cfg = engine
        .family
        .config(requests.unwrap_or(1))
        .map_err(PyValueError::new_err)?;
    let kernel = kernel_of(engine, requests)?;
    let compiled = pipeline::compile(&kernel, &Options::default())
        .map_err(|e| PyValueError::new_err(format!("compiling: {e}")))?;
    d.set_item("kernel", kernel.name.clone())?;
    d.set_item(
        "source",
        if launched {
            "last launch"
        } else {
            "contiguous tensors"
        },
    )?;
    if !launched {
        for (k, v) in F::describe(&cfg) {
            d.set_item(k, v)?;
        }
    }
    d.set_item("block", kernel.launch.block)?;
    d.set_item("cluster_dim", kernel.launch.cluster)?;
    d.set_item("ptx_lines", compiled.ptx.lines().count())?;
    d.set_item("dynamic_shared_bytes", compiled.layout.bytes)?;
    d.set_item("cached_kernels", engine.cached())?;
    d.set_item("process_compilations", crate::engine::compiled())?;
    // The driver's figures once loaded on a GPU; ptxas's where it is installed.
    if let Some(r) = engine
        .last()
        .and_then(|e| e.resources())
        .filter(|_| launched)
    {
        d.set_item("registers", r.registers)?;
        d.set_item("static_shared_bytes", r.static_smem_bytes)?;
        d.set_item("local_bytes", r.local_bytes)?;
        d.set_item("resources_from", "driver")?;
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

pub(crate) fn call<F: Family>(
    engine: &Engine<F>,
    args: &Bound<'_, PyTuple>,
    stream: Option<&Bound<'_, PyAny>>,
    check_slots: Option<bool>,
) -> PyResult<()> {
    let py = args.py();
    let items: Vec<Bound<'_, PyAny>> = args.iter().collect();
    engine.call(
        &items,
        |ordinal| kda_bind::resolve_stream(py, stream, ordinal),
        check_slots,
    )
}

/// The positional parameter names, in order (the classes' `params`).
pub(crate) fn params_of<F: Family>(engine: &Engine<F>) -> Vec<&'static str> {
    engine.family.params().into_iter().map(|(n, _)| n).collect()
}

/// `True` / `False` as Python writes them, for `__repr__`.
pub(crate) fn py_bool(b: bool) -> &'static str {
    if b { "True" } else { "False" }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<KdaSplit>()?;
    m.add_class::<GdnDecode>()?;
    m.add_class::<Mamba2Decode>()?;
    Ok(())
}
