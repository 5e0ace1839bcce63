//! The Python classes, one per kernel, each one `kda_bind::expose!`
//! declaration over the kernel crate's `HostKernel`: a constructor mirroring
//! the kernel's configuration, `__call__` (launch in place), `ptx()`,
//! `info()`, `params`.

mod gdn;
mod kda;
mod mamba2;

pub use gdn::GdnDecode;
pub use kda::KdaSplit;
pub use mamba2::Mamba2Decode;

use kda_bind::pyo3::prelude::*;

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
