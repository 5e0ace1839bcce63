//! Stable-Rust fuzzing for the workspace's parsers: a seeded driver that
//! mutates a corpus for a time budget and feeds every input to a target
//! inside `catch_unwind` ([`driver`]), byte-level mutators any target can
//! use ([`mutate`]), and one module per target (`case`: KdaSplit case
//! files). Each target also has a binary (`src/bin/fuzz-<target>.rs`) and a
//! test (`tests/<target>.rs`) replaying its checked-in corpus and crash
//! reproducers, then fuzzing for `KDA_FUZZ_SECONDS`.

pub mod case;
pub mod driver;
pub mod mutate;

pub use driver::{Budget, FuzzError, Stats, Target, fuzz, replay};
