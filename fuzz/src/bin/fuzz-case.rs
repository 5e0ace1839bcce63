//! `fuzz-case`: the case-file target for `KDA_FUZZ_SECONDS` (default 60),
//! reproducers written to `KDA_FUZZ_CRASH_DIR` (default `fuzz/crashes/case`,
//! to be checked in). Prints one summary line; exits 1 on any finding.

use std::path::PathBuf;
use std::process::ExitCode;

use kda_fuzz::case::CaseTarget;
use kda_fuzz::driver::folder;
use kda_fuzz::{Budget, Target, fuzz, replay};

fn main() -> ExitCode {
    let target = CaseTarget;
    let budget = match Budget::from_env(60.0) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let crash_dir = std::env::var_os("KDA_FUZZ_CRASH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| folder("crashes", target.name()));
    let replayed = match replay(&target) {
        Ok(failures) => failures,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    for (path, message) in &replayed {
        eprintln!("regression: {} panics: {message}", path.display());
    }
    let stats = match fuzz(&target, &budget, &crash_dir) {
        Ok(stats) => stats,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    println!("{}", stats.summary(target.name(), budget.seed));
    for f in stats.crashes.iter().chain(&stats.slow) {
        println!("  {}: {}", f.path.display(), f.what);
    }
    if replayed.is_empty() && stats.crashes.is_empty() && stats.slow.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
