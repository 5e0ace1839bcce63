//! PTX backend for sm_90a: [`emit`] turns a verified, scheduled kernel into
//! one PTX module with one `.visible .entry` named after the kernel.
//!
//! # The launch contract
//!
//! * **Parameters**, in this order: one `.u64` global pointer per tensor (in
//!   declaration order, `t0`, `t1`, ...), then one parameter per scalar (in
//!   declaration order; `f32` as `.f32`, `i32`/`u32` as 4 bytes, `i64`/`u64`
//!   as 8 bytes, `bf16` as 2 bytes), then one `.u64` per symbolic
//!   extent/stride (`sym0`, ...).
//!   The runtime passes its arguments in exactly this order.
//! * **Shared memory** is dynamic (`.extern .shared .align 128`): the launch
//!   must request [`Layout::bytes`] bytes (and raise the function's
//!   dynamic-shared-memory limit when that exceeds 48 KiB). [`Layout`] gives
//!   every buffer's and mbarrier's byte offset.
//! * `.reqntid` fixes the block size; `.explicitcluster` +
//!   `.reqnctapercluster` the cluster size when it is above 1.
//!
//! # Shape of the code
//!
//! Registers are virtual (ptxas allocates): one bank per register class
//! (`%p` pred, `%h` b16 for bf16, `%r` b32 ints, `%rd` b64, `%f` f32), one
//! register per vector lane. Structured regions become labels and branches;
//! roles branch on the warp index so whole warps branch together. Every group
//! of PTX lines is preceded by `// file.rs:line:col  <ir>` when the DSL
//! location changes. Each op family is lowered in its own file; PTX text is
//! written only there.

mod annotate;
mod arith;
mod control;
mod dsmem;
mod emitter;
mod entry;
mod layout;
mod math;
mod memory;
mod probe;
mod sync;
mod warp;
mod wgmma;

use std::fmt;

use crate::kernel::Kernel;
use crate::loc::Loc;

pub use layout::{Layout, LayoutError};
pub use probe::{HEADER_WORDS, PROBE_SYMBOL, ProbeSite, record_words, waits};

/// The PTX ISA version emitted (`st.async` needs 8.1).
pub const PTX_VERSION: &str = "8.1";
/// The only target.
pub const TARGET: &str = "sm_90a";

/// A kernel the backend cannot lower (the verifier lets through something the
/// hardware has no instruction for).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PtxError {
    /// The DSL location of the instruction that has no lowering ([`Loc::synthetic`]
    /// for the kernel as a whole, e.g. a name that is not a PTX identifier).
    pub loc: Loc,
    /// What the backend cannot do with it.
    pub msg: String,
}

impl fmt::Display for PtxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: cannot lower to PTX: {}", self.loc, self.msg)
    }
}

impl std::error::Error for PtxError {}

/// How [`emit_with`] lowers a kernel.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EmitOptions {
    /// Record CTA timeline probes (module `probe`'s buffer format: entry,
    /// exit and every wait of every warp) into the buffer whose address the
    /// host writes to [`PROBE_SYMBOL`]. Measurement only: the program's
    /// results do not change, its registers may.
    pub probes: bool,
}

/// A lowered kernel: its PTX, and its probe sites when probes were on.
#[derive(Clone, Debug)]
pub struct Emitted {
    /// The PTX module.
    pub ptx: String,
    /// The probed instructions, in site order (`None`: no probes).
    pub probes: Option<Vec<ProbeSite>>,
}

/// Lower a verified kernel to PTX text.
pub fn emit(k: &Kernel) -> Result<String, PtxError> {
    emit_with(k, &EmitOptions::default()).map(|e| e.ptx)
}

/// Lower a verified kernel to PTX under `opts`.
pub fn emit_with(k: &Kernel, opts: &EmitOptions) -> Result<Emitted, PtxError> {
    // The emitter addresses shared memory through the layout: one that
    // overflowed 32 bits would put buffers on top of each other.
    Layout::try_of(k).map_err(|e| PtxError {
        loc: Loc::synthetic(),
        msg: e.to_string(),
    })?;
    let (ptx, probes) = emitter::Emitter::new(k).run(opts.probes)?;
    Ok(Emitted { ptx, probes })
}
