//! `kda.Mamba2Decode`.

use kda_bind::pyo3::prelude::*;
use mamba2_decode::{Mamba2Config, Mamba2Kernel};

use super::py_bool;

kda_bind::expose! {
    /// The Mamba-2 selective state update with its conv update (crate
    /// `mamba2_decode`): launch in place on the positional arguments of the
    /// crate doc's §1.
    Mamba2Decode(Mamba2Kernel), size = requests, check = check_slots, module = "kda._kda", {
        #[new]
        #[pyo3(signature = (heads, n_groups = 1, head_dim = 64, d_state = 128, has_z = true, has_d = true, has_conv_bias = true))]
        fn new(
            heads: u32,
            n_groups: u32,
            head_dim: u32,
            d_state: u32,
            has_z: bool,
            has_d: bool,
            has_conv_bias: bool,
        ) -> PyResult<Self> {
            Self::wrap(Mamba2Kernel::new(Mamba2Config {
                heads,
                n_groups,
                head_dim,
                d_state,
                has_z,
                has_d,
                has_conv_bias,
            }))
        }

        #[getter]
        fn heads(&self) -> u32 {
            self.engine.kernel.cfg().heads
        }

        #[getter]
        fn n_groups(&self) -> u32 {
            self.engine.kernel.cfg().n_groups
        }

        fn __repr__(&self) -> String {
            let c = self.engine.kernel.cfg();
            format!(
                "Mamba2Decode(heads={}, n_groups={}, head_dim={}, d_state={}, has_z={}, has_d={}, has_conv_bias={})",
                c.heads,
                c.n_groups,
                c.head_dim,
                c.d_state,
                py_bool(c.has_z),
                py_bool(c.has_d),
                py_bool(c.has_conv_bias)
            )
        }
    }
}
