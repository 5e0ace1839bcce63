//! The kernels of `docs/guide.md`: a per-channel exponential moving average
//! `h ← a·h + (1 − a)·x` with input-dependent gates `a = σ(w·x + b)`, built
//! in five steps (one module each), the host side that runs them on any
//! [`kda::runtime::Device`] and the float64 reference they are checked
//! against. `tests/guide_in_sync.rs` checks that the guide quotes these
//! files as they are.

pub mod host;
pub mod inspect;
pub mod step_1;
pub mod step_2;
pub mod step_3;
pub mod step_4;
pub mod step_5;
