//! `kda.GdnDecode`.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use super::py_bool;
use crate::engine::Engine;
use crate::families::gdn::Gdn;

family_class! {
    /// The gated delta net (Qwen3-Next GDN) decode / spec-verify step (crate
    /// `gdn_decode`).
    GdnDecode(Gdn), {
        #[new]
        #[pyo3(signature = (num_k_heads, num_v_heads, tokens = 1, has_bias = false, lanes = 16))]
        fn new(
            num_k_heads: u32,
            num_v_heads: u32,
            tokens: u32,
            has_bias: bool,
            lanes: u32,
        ) -> PyResult<Self> {
            let family = Gdn::new(num_k_heads, num_v_heads, tokens, has_bias, lanes)
                .map_err(PyValueError::new_err)?;
            Ok(GdnDecode {
                engine: Engine::new(family),
            })
        }

        #[getter]
        fn num_k_heads(&self) -> u32 {
            self.engine.family.launch.cfg.num_k_heads
        }

        #[getter]
        fn num_v_heads(&self) -> u32 {
            self.engine.family.launch.cfg.num_v_heads
        }

        #[getter]
        fn tokens(&self) -> u32 {
            self.engine.family.launch.cfg.tokens
        }

        fn __repr__(&self) -> String {
            let l = &self.engine.family.launch;
            format!(
                "GdnDecode(num_k_heads={}, num_v_heads={}, tokens={}, has_bias={}, lanes={})",
                l.cfg.num_k_heads,
                l.cfg.num_v_heads,
                l.cfg.tokens,
                py_bool(l.cfg.has_bias),
                l.schedule.lanes
            )
        }
    }
}
