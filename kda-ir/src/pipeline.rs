//! The compile pipeline, as data: verify the kernel, run each pass of
//! [`PASSES`] in order (verifying after each in debug builds and tests), then
//! lower to PTX. `KDA_DUMP=<dir>` (or [`Options::dump`]) writes every stage:
//! `<kernel>.0-input.ir`, `<kernel>.<n>-<pass>.ir` after pass n, and
//! `<kernel>.ptx`.

use std::path::{Path, PathBuf};

use crate::kernel::Kernel;
use crate::passes;
use crate::ptx::{self, Layout, PtxError};
use crate::verifier::{self, VerifierErrors};
use crate::write::write_kernel;

/// One scheduling pass.
pub struct Pass {
    pub name: &'static str,
    pub run: fn(&mut Kernel),
}

/// The scheduling passes, in the order they run.
pub const PASSES: &[Pass] = &[Pass {
    name: "hoist_ready_loads",
    run: passes::hoist_ready_loads::run,
}];

#[derive(Clone, Debug)]
pub struct Options {
    /// Verify after every pass (default: in debug builds). The input and the
    /// final kernel are always verified.
    pub verify_each_pass: bool,
    /// Write each stage's IR and the PTX here (default: `$KDA_DUMP`).
    pub dump: Option<PathBuf>,
    /// Passes to leave out, by name: e.g. `hoist_ready_loads` for the seed's
    /// `early = 0` schedule, which keeps every load after the PDL wait.
    pub skip: Vec<String>,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            verify_each_pass: cfg!(debug_assertions),
            dump: std::env::var_os("KDA_DUMP")
                .filter(|d| !d.is_empty())
                .map(PathBuf::from),
            skip: Vec::new(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CompileError {
    #[error("kernel `{kernel}` does not verify ({stage}):\n{errors}")]
    Verify {
        kernel: String,
        stage: String,
        errors: VerifierErrors,
    },
    #[error(transparent)]
    Ptx(#[from] PtxError),
    #[error("unknown pass `{0}` in Options::skip")]
    UnknownPass(String),
    #[error("KDA_DUMP: writing {path}: {source}")]
    Dump {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// The scheduled kernel, its PTX and its shared-memory layout.
#[derive(Clone, Debug)]
pub struct Compiled {
    pub scheduled: Kernel,
    pub ptx: String,
    pub layout: Layout,
}

fn dump(opts: &Options, file: String, text: &str) -> Result<(), CompileError> {
    let Some(dir) = &opts.dump else { return Ok(()) };
    let path = Path::new(dir).join(file);
    std::fs::create_dir_all(dir)
        .and_then(|()| std::fs::write(&path, text))
        .map_err(|source| CompileError::Dump { path, source })
}

fn check(k: &Kernel, stage: &str) -> Result<(), CompileError> {
    verifier::verify(k).map_err(|errors| CompileError::Verify {
        kernel: k.name.clone(),
        stage: stage.to_string(),
        errors,
    })
}

/// Verify `k` and run the scheduling passes on a copy of it.
pub fn schedule(k: &Kernel, opts: &Options) -> Result<Kernel, CompileError> {
    if let Some(name) = opts
        .skip
        .iter()
        .find(|s| !PASSES.iter().any(|p| p.name == s.as_str()))
    {
        return Err(CompileError::UnknownPass(name.clone()));
    }
    check(k, "input")?;
    dump(opts, format!("{}.0-input.ir", k.name), &write_kernel(k))?;
    let mut k = k.clone();
    let mut last = "input";
    for (n, pass) in PASSES.iter().enumerate() {
        if opts.skip.iter().any(|s| s == pass.name) {
            continue;
        }
        (pass.run)(&mut k);
        last = pass.name;
        if opts.verify_each_pass {
            check(&k, &format!("after {}", pass.name))?;
        }
        dump(
            opts,
            format!("{}.{}-{}.ir", k.name, n + 1, pass.name),
            &write_kernel(&k),
        )?;
    }
    if !opts.verify_each_pass && last != "input" {
        check(&k, &format!("after {last}"))?;
    }
    Ok(k)
}

/// Schedule `k` and lower it to PTX.
pub fn compile(k: &Kernel, opts: &Options) -> Result<Compiled, CompileError> {
    let scheduled = schedule(k, opts)?;
    let ptx = ptx::emit(&scheduled)?;
    dump(opts, format!("{}.ptx", scheduled.name), &ptx)?;
    let layout = Layout::of(&scheduled);
    Ok(Compiled {
        scheduled,
        ptx,
        layout,
    })
}
