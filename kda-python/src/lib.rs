//! The native module `kda._kda` behind the Python package `kda`: the
//! KdaSplit, GDN and Mamba-2 decode kernels as callables launched in place,
//! on the GPU (torch / cupy tensors, the caller's stream) or on the
//! simulator (NumPy arrays). See docs/python.md.

mod classes;

mod testing;

use pyo3::prelude::*;

#[pymodule]
fn _kda(m: &Bound<'_, PyModule>) -> PyResult<()> {
    classes::register(m)?;
    testing::register(m)?;
    Ok(())
}
