//! The files the commands write: checked before the work starts (so a long
//! run does not fail at its end, and never overwrites its own input), then
//! written by the one writer, [`kda_host::output::write_atomic`]: a regular
//! file (a link followed to it) replaced atomically with its mode and owner
//! kept, a device, FIFO or pipe written through.

use std::path::Path;

use kda_host::case::{check_output, same_file, write_atomic};

use super::{CliResult, Failure};

/// Exit 2 unless a file can be written at `path` (a device or FIFO; or its
/// folder exists and takes a new file; it is not a folder).
pub fn check(path: &Path) -> CliResult {
    check_output(path).map_err(|e| Failure::usage(format!("cannot write the output: {e}")))
}

/// Exit 2 if `out` is the input file `input` under any name (another
/// spelling, a symbolic or hard link): writing it would destroy the input.
pub fn not_the_input(input: &Path, out: &Path, flag: &str) -> CliResult {
    if same_file(input, out) {
        return Err(Failure::usage(format!(
            "{flag} {} is the input file {}: writing it would replace the input; choose \
             another path",
            out.display(),
            input.display()
        )));
    }
    Ok(())
}

/// Writes `bytes` to `path` by the one writer's rules (exit 3 if it fails).
pub fn write(path: &Path, bytes: &[u8]) -> CliResult {
    write_atomic(path, bytes).map_err(|e| Failure::input(format!("writing {e}")))
}
