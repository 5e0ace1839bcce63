//! `kda.Mamba2Decode`.

use mamba2_decode::Mamba2Config;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use super::py_bool;
use crate::engine::Engine;
use crate::families::mamba2::Mamba2;

family_class! {
    /// The Mamba-2 decode step (crate `mamba2_decode`).
    Mamba2Decode(Mamba2), {
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
            let cfg = Mamba2Config {
                heads,
                n_groups,
                head_dim,
                d_state,
                has_z,
                has_d,
                has_conv_bias,
            }
            .validated()
            .map_err(|e| PyValueError::new_err(format!("Mamba2Decode: {e}")))?;
            Ok(Mamba2Decode {
                engine: Engine::new(Mamba2 { cfg }),
            })
        }

        #[getter]
        fn heads(&self) -> u32 {
            self.engine.family.cfg.heads
        }

        #[getter]
        fn n_groups(&self) -> u32 {
            self.engine.family.cfg.n_groups
        }

        fn __repr__(&self) -> String {
            let c = &self.engine.family.cfg;
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
