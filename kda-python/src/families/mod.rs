//! The kernel crates as [`crate::engine::Family`]s.

pub mod kda;
