//! `pipelined-copy`: a persistent, warp-specialised streaming kernel over a
//! ring of shared buffers (see [`kernel`]), its host-side reference and the
//! runs its binary and tests share.

pub mod bench;
pub mod control;
pub mod kernel;
pub mod run;

pub use kernel::{CONSUMERS, Order, Ring, TILE, pipelined_copy};
