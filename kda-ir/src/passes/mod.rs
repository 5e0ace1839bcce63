//! Scheduling passes (DESIGN §5), one file each.
