//! Scheduling passes (DESIGN §5), one file each. Every pass takes a verified
//! kernel and leaves a verified kernel; `pipeline.rs` lists them in order.

pub mod hoist_ready_loads;
