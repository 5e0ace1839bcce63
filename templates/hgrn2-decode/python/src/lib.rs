//! `hgrn2_decode.Hgrn2Decode`: the template's kernel from Python. Calls take
//! the kernel's arguments in signature order (`q, f, v, state, o, scale
//! [, lower_bound]`); CUDA tensors launch in place, NumPy arrays simulate.

use ::hgrn2_decode::{Config, Hgrn2};
use kda_bind::pyo3::prelude::*;

kda_bind::expose! {
    /// HGRN-2 decode step: `state` and `o` are written in place.
    Hgrn2Decode(Hgrn2), size = batch, module = "hgrn2_decode", {
        #[new]
        #[pyo3(signature = (key_dim = 128, value_dim = 128, tokens = 1, lower_bound = false))]
        fn new(key_dim: u32, value_dim: u32, tokens: u32, lower_bound: bool) -> PyResult<Self> {
            Self::wrap(Config::new(key_dim, value_dim, tokens, lower_bound).map(|cfg| Hgrn2 { cfg }))
        }
    }
}

#[pymodule(crate = "kda_bind::pyo3", name = "hgrn2_decode")]
fn init(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Hgrn2Decode>()
}
