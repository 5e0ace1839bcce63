//! Assembling PTX with `ptxas -arch=sm_90a -v` and reading its resource
//! report (registers, spills, shared memory, stack), so tests can hold every
//! generated variant to the budgets.
//!
//! `ptxas` is looked up in order: `$KDA_PTXAS`; `<workspace>/.tools/ptxas/bin/ptxas`
//! (what `scripts/provision-ptxas.sh` installs from the pinned
//! `nvidia-cuda-nvcc-cu12` wheel); `ptxas` on `PATH`.

use std::io::{self, Read as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// The most bytes read from ptxas's stdout or stderr; a report is a few
/// KiB (`-v` with a long rejection log a few MiB at most).
pub const MAX_LOG_BYTES: usize = 16 << 20;

/// How long one ptxas run may take: `$KDA_PTXAS_TIMEOUT` seconds, else 300
/// (the largest kernels assemble in a few seconds).
pub fn timeout() -> Duration {
    let seconds = std::env::var("KDA_PTXAS_TIMEOUT")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .filter(|&s| s > 0)
        .unwrap_or(300);
    Duration::from_secs(seconds)
}

/// What `ptxas -v` reports for the (one) entry of a module.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PtxasReport {
    /// Registers per thread.
    pub registers: u32,
    /// Bytes of spill stores.
    pub spill_stores: u32,
    /// Bytes of spill loads.
    pub spill_loads: u32,
    /// Bytes of stack frame per thread.
    pub stack_frame: u32,
    /// Static shared memory (dynamic shared memory is not counted).
    pub shared_bytes: u32,
    /// Named barriers used (`bar.sync` ids).
    pub barriers: u32,
    /// The whole `-v` log.
    pub log: String,
}

impl PtxasReport {
    /// Bytes spilled, stores and loads together; 0 is what the tests require.
    pub fn spills(&self) -> u32 {
        self.spill_stores.saturating_add(self.spill_loads)
    }
}

/// Why assembling failed, or what [`check_no_spills`] found.
#[derive(Debug, thiserror::Error)]
pub enum PtxasError {
    /// No ptxas at any of the places the module docs list.
    #[error(
        "ptxas not found: set KDA_PTXAS, put ptxas on PATH, or run scripts/provision-ptxas.sh \
         (installs it into <workspace>/.tools/ptxas/bin)"
    )]
    NotFound,
    /// Writing the PTX to the temporary directory, or starting ptxas, failed.
    #[error("running {path}: {source}")]
    Io {
        /// The file written or the ptxas run.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// ptxas exited with an error.
    #[error("ptxas rejected the PTX:\n{stderr}")]
    Rejected {
        /// ptxas's stderr, each `line N` it names followed by that PTX line.
        stderr: String,
    },
    /// ptxas succeeded but its log lacks the register, stack or spill counts.
    #[error("cannot read the ptxas -v report:\n{log}")]
    Report {
        /// The whole `-v` log.
        log: String,
    },
    /// ptxas ran past its time limit ([`timeout`]) and was killed.
    #[error(
        "{path} did not finish within {seconds} s and was killed (set KDA_PTXAS_TIMEOUT to \
         allow longer)"
    )]
    Timeout {
        /// The ptxas run.
        path: PathBuf,
        /// The limit.
        seconds: u64,
    },
    /// ptxas wrote more than [`MAX_LOG_BYTES`] to stdout or stderr (no real
    /// report is near that) and was killed.
    #[error("{path} wrote more than {limit} bytes of output and was killed")]
    OutputTooLarge {
        /// The ptxas run.
        path: PathBuf,
        /// The limit.
        limit: usize,
    },
    /// From [`check_no_spills`]: it assembled, but spills.
    #[error("{} B spill stores, {} B spill loads:\n{}", .0.spill_stores, .0.spill_loads, .0.log)]
    Spills(Box<PtxasReport>),
}

/// The workspace root: the nearest directory above the crate (or the current
/// directory) holding `.tools`, or a `Cargo.toml` with `[workspace]`.
pub fn workspace_root() -> Option<PathBuf> {
    let starts = [
        std::env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from),
        Some(PathBuf::from(env!("CARGO_MANIFEST_DIR"))),
        std::env::current_dir().ok(),
    ];
    starts.into_iter().flatten().find_map(|start| {
        start
            .ancestors()
            .find(|d| is_workspace_root(d))
            .map(Path::to_path_buf)
    })
}

fn is_workspace_root(d: &Path) -> bool {
    d.join(".tools").is_dir()
        || std::fs::read_to_string(d.join("Cargo.toml")).is_ok_and(|t| t.contains("[workspace]"))
}

/// The ptxas to run, if any.
pub fn find() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("KDA_PTXAS").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    if let Some(root) = workspace_root() {
        let p = root.join(".tools/ptxas/bin/ptxas");
        if p.is_file() {
            return Some(p);
        }
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("ptxas"))
        .find(|p| p.is_file())
}

/// What the test suites require of every PTX they generate: it assembles
/// for sm_90a and spills nothing. `Ok(None)` when `KDA_SKIP_PTXAS` is set;
/// otherwise the report, or why not (ptxas missing or rejecting it, or
/// [`PtxasError::Spills`] with ptxas's report).
pub fn check_no_spills(ptx: &str) -> Result<Option<PtxasReport>, PtxasError> {
    if std::env::var_os("KDA_SKIP_PTXAS").is_some() {
        return Ok(None);
    }
    let report = assemble(ptx)?;
    if report.spills() > 0 {
        return Err(PtxasError::Spills(Box::new(report)));
    }
    Ok(Some(report))
}

/// Assemble `ptx` for sm_90a and return ptxas's resource report.
pub fn assemble(ptx: &str) -> Result<PtxasReport, PtxasError> {
    let ptxas = find().ok_or(PtxasError::NotFound)?;
    static SEQ: AtomicU32 = AtomicU32::new(0);
    let stem = format!(
        "kda-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    );
    let dir = std::env::temp_dir();
    let (src, out) = (
        dir.join(format!("{stem}.ptx")),
        dir.join(format!("{stem}.cubin")),
    );
    let io_err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| PtxasError::Io { path, source }
    };
    std::fs::write(&src, ptx).map_err(io_err(&src))?;
    let mut command = Command::new(&ptxas);
    command
        .arg("-arch=sm_90a")
        .arg("-v")
        .arg(&src)
        .arg("-o")
        .arg(&out);
    let run = run_bounded(&mut command, &ptxas, timeout(), MAX_LOG_BYTES);
    let _ = std::fs::remove_file(&src);
    let _ = std::fs::remove_file(&out);
    let run = run?;
    let stdout = String::from_utf8_lossy(&run.stdout);
    let stderr = String::from_utf8_lossy(&run.stderr);
    if !run.success {
        return Err(PtxasError::Rejected {
            stderr: with_context(&stderr, ptx),
        });
    }
    parse_report(format!("{stdout}{stderr}"))
}

/// What a bounded run printed, and whether it succeeded.
struct Ran {
    success: bool,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
}

/// Runs `command` (no stdin), reading at most `limit` bytes of each output
/// stream; kills it when it runs past `time` or writes more (issue 32 item
/// 7: `info` trusted ptxas with no timeout or size bound).
fn run_bounded(
    command: &mut Command,
    path: &Path,
    time: Duration,
    limit: usize,
) -> Result<Ran, PtxasError> {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| PtxasError::Io {
            path: path.to_owned(),
            source,
        })?;
    let too_much = Arc::new(AtomicBool::new(false));
    let reader = |pipe: Option<Box<dyn io::Read + Send>>| {
        let too_much = Arc::clone(&too_much);
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(pipe) = pipe {
                let _ = pipe.take(limit as u64 + 1).read_to_end(&mut bytes);
            }
            if bytes.len() > limit {
                too_much.store(true, Ordering::Relaxed);
                bytes.truncate(limit);
            }
            bytes
        })
    };
    let out = reader(child.stdout.take().map(|p| Box::new(p) as _));
    let err = reader(child.stderr.take().map(|p| Box::new(p) as _));
    let deadline = Instant::now() + time;
    let status = loop {
        if too_much.load(Ordering::Relaxed) {
            let _ = child.kill();
            let _ = child.wait();
            return Err(PtxasError::OutputTooLarge {
                path: path.to_owned(),
                limit,
            });
        }
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                // The readers are left: a child of ptxas may hold the pipes.
                return Err(PtxasError::Timeout {
                    path: path.to_owned(),
                    seconds: time.as_secs(),
                });
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(source) => {
                return Err(PtxasError::Io {
                    path: path.to_owned(),
                    source,
                });
            }
        }
    };
    // Exited: the pipes close unless a child of its own still holds them,
    // so wait for the readers only as long as the time left.
    let mut readers = [Some(out), Some(err)];
    let mut got: [Vec<u8>; 2] = [Vec::new(), Vec::new()];
    loop {
        for (slot, bytes) in readers.iter_mut().zip(got.iter_mut()) {
            if slot.as_ref().is_some_and(|h| h.is_finished()) {
                *bytes = slot
                    .take()
                    .map(|h| h.join().unwrap_or_default())
                    .unwrap_or_default();
            }
        }
        if readers.iter().all(Option::is_none) {
            break;
        }
        if Instant::now() >= deadline {
            return Err(PtxasError::Timeout {
                path: path.to_owned(),
                seconds: time.as_secs(),
            });
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    if too_much.load(Ordering::Relaxed) {
        return Err(PtxasError::OutputTooLarge {
            path: path.to_owned(),
            limit,
        });
    }
    let [stdout, stderr] = got;
    Ok(Ran {
        success: status.success(),
        stdout,
        stderr,
    })
}

/// ptxas errors name PTX lines (`a.ptx, line 42; error ...`): quote them.
fn with_context(stderr: &str, ptx: &str) -> String {
    let lines: Vec<&str> = ptx.lines().collect();
    let mut out = String::new();
    for l in stderr.lines() {
        out.push_str(l);
        out.push('\n');
        let n = l
            .split(", line ")
            .nth(1)
            .and_then(|r| r.split(';').next())
            .and_then(|n| n.trim().parse::<usize>().ok());
        if let Some(text) = n.and_then(|n| lines.get(n.wrapping_sub(1))) {
            out.push_str(&format!("    | {}\n", text.trim()));
        }
    }
    out
}

/// The number just before `what` (`"14 registers"` -> 14), if `what` occurs.
fn number_before(log: &str, what: &str) -> Option<u32> {
    let at = log.find(what)?;
    log[..at].split_whitespace().last()?.parse().ok()
}

fn parse_report(log: String) -> Result<PtxasReport, PtxasError> {
    let get = |what| number_before(&log, what);
    let (Some(registers), Some(stack_frame), Some(spill_stores), Some(spill_loads)) = (
        get(" registers"),
        get(" bytes stack frame"),
        get(" bytes spill stores"),
        get(" bytes spill loads"),
    ) else {
        return Err(PtxasError::Report { log });
    };
    Ok(PtxasReport {
        registers,
        spill_stores,
        spill_loads,
        stack_frame,
        shared_bytes: get(" bytes smem").unwrap_or(0),
        barriers: get(" barriers").unwrap_or(0),
        log,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_report() {
        let log = "ptxas info    : Compiling entry function 'k' for 'sm_90a'\n\
                   ptxas info    : Function properties for k\n    \
                   8 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads\n\
                   ptxas info    : Used 40 registers, used 2 barriers, 256 bytes smem, 400 bytes cmem[0]\n";
        let r = parse_report(log.into()).unwrap();
        assert_eq!(
            (
                r.registers,
                r.stack_frame,
                r.spill_stores,
                r.spill_loads,
                r.shared_bytes,
                r.barriers
            ),
            (40, 8, 4, 12, 256, 2)
        );
    }

    /// Issue 32 item 7: a ptxas that hangs or floods its output is killed
    /// with an error naming the limit, instead of hanging `info` or filling
    /// memory.
    #[cfg(unix)]
    #[test]
    fn a_hung_or_flooding_ptxas_is_killed() {
        let sh = Path::new("/bin/sh");
        let start = Instant::now();
        let e = run_bounded(
            Command::new(sh).args(["-c", "exec sleep 30"]),
            sh,
            Duration::from_millis(300),
            1 << 20,
        )
        .err()
        .unwrap();
        assert!(matches!(e, PtxasError::Timeout { .. }), "{e}");
        assert!(e.to_string().contains("KDA_PTXAS_TIMEOUT"), "{e}");
        assert!(start.elapsed() < Duration::from_secs(10));
        let e = run_bounded(
            Command::new(sh).args(["-c", "exec yes"]),
            sh,
            Duration::from_secs(60),
            1 << 20,
        )
        .err()
        .unwrap();
        assert!(matches!(e, PtxasError::OutputTooLarge { .. }), "{e}");
        let ran = run_bounded(
            Command::new(sh).args(["-c", "echo out; echo err >&2; exit 3"]),
            sh,
            Duration::from_secs(60),
            1 << 20,
        )
        .unwrap();
        assert!(!ran.success);
        assert_eq!(
            (&ran.stdout[..], &ran.stderr[..]),
            (&b"out\n"[..], &b"err\n"[..])
        );
        // Absurd counts saturate instead of overflowing.
        let r = PtxasReport {
            spill_stores: u32::MAX,
            spill_loads: 1,
            ..PtxasReport::default()
        };
        assert_eq!(r.spills(), u32::MAX);
    }

    #[test]
    fn quotes_the_rejected_line() {
        let s = with_context(
            "x.ptx, line 2; error   : Unknown symbol 'q'",
            "a\n  mov.u32 %r1, q;\n",
        );
        assert!(s.contains("| mov.u32 %r1, q;"), "{s}");
    }
}
