//! `kda.GdnDecode`.

use gdn_decode::GdnKernel;
use kda_bind::pyo3::prelude::*;

use super::py_bool;

kda_bind::expose! {
    /// The gated delta net (Qwen3-Next GDN) decode / spec-verify step (crate
    /// `gdn_decode`): launch in place on the positional arguments of the
    /// crate doc's §1.
    GdnDecode(GdnKernel), size = requests, check = check_slots, module = "kda._kda", {
        #[new]
        #[pyo3(signature = (num_k_heads, num_v_heads, tokens = 1, has_bias = false, lanes = 16))]
        fn new(num_k_heads: u32, num_v_heads: u32, tokens: u32, has_bias: bool, lanes: u32) -> PyResult<Self> {
            Self::wrap(GdnKernel::new(num_k_heads, num_v_heads, tokens, has_bias, lanes))
        }

        #[getter]
        fn num_k_heads(&self) -> u32 {
            self.engine.kernel.launch.cfg.num_k_heads
        }

        #[getter]
        fn num_v_heads(&self) -> u32 {
            self.engine.kernel.launch.cfg.num_v_heads
        }

        #[getter]
        fn tokens(&self) -> u32 {
            self.engine.kernel.launch.cfg.tokens
        }

        fn __repr__(&self) -> String {
            let l = &self.engine.kernel.launch;
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
