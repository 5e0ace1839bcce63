//! The driver: a seeded loop that mutates seeds (and recent mutants, so
//! mutations stack) for a time budget and feeds each input to a [`Target`]
//! inside `catch_unwind`. A panic, or an input slower than
//! [`Budget::slow`], is a finding: its input is written to the target's
//! crash folder (to be checked in as a regression test, [`replay`]).

use std::cell::{Cell, RefCell};
use std::panic::{self, AssertUnwindSafe, PanicHookInfo};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use thiserror::Error;

/// One fuzz target: what it feeds, how it mutates, what it checks.
pub trait Target {
    /// Its name: the folders `corpus/<name>` and `crashes/<name>`.
    fn name(&self) -> &'static str;
    /// Seeds beyond the checked-in corpus (e.g. generated ones too large to
    /// check in).
    fn seeds(&self) -> Vec<Vec<u8>>;
    /// A mutant of `input`.
    fn mutate(&self, rng: &mut ChaCha8Rng, input: &[u8]) -> Vec<u8>;
    /// Runs the code under test on `input`; `true` if it accepted the input
    /// (for the statistics). Must not panic.
    fn check(&self, input: &[u8]) -> bool;
}

/// How long and from which seed.
#[derive(Clone, Debug)]
pub struct Budget {
    /// Wall-clock time of the mutation loop.
    pub time: Duration,
    /// The RNG's seed (printed, so a run can be repeated).
    pub seed: u64,
    /// An input taking longer than this is a finding (a hang, in effect).
    pub slow: Duration,
}

impl Budget {
    /// `KDA_FUZZ_SECONDS` (default `default_seconds`), `KDA_FUZZ_SEED`
    /// (default 1), `KDA_FUZZ_SLOW_MS` (default 5000).
    pub fn from_env(default_seconds: f64) -> Result<Self, FuzzError> {
        let var = |name: &'static str| std::env::var(name).ok();
        let bad = |name: &'static str, value: String| FuzzError::Env { name, value };
        let seconds = match var("KDA_FUZZ_SECONDS") {
            Some(v) => v
                .parse::<f64>()
                .ok()
                .filter(|s| s.is_finite() && *s >= 0.0)
                .ok_or_else(|| bad("KDA_FUZZ_SECONDS", v))?,
            None => default_seconds,
        };
        let seed = match var("KDA_FUZZ_SEED") {
            Some(v) => v.parse().map_err(|_| bad("KDA_FUZZ_SEED", v))?,
            None => 1,
        };
        let slow_ms = match var("KDA_FUZZ_SLOW_MS") {
            Some(v) => v.parse().map_err(|_| bad("KDA_FUZZ_SLOW_MS", v))?,
            None => 5000,
        };
        Ok(Self {
            time: Duration::from_secs_f64(seconds),
            seed,
            slow: Duration::from_millis(slow_ms),
        })
    }
}

/// What a run did.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    /// Inputs fed to the target.
    pub inputs: u64,
    /// Of those, the ones it accepted.
    pub accepted: u64,
    /// Reproducers written for panics.
    pub crashes: Vec<Finding>,
    /// Reproducers written for inputs slower than [`Budget::slow`].
    pub slow: Vec<Finding>,
    /// The slowest input's time.
    pub slowest: Duration,
    /// The loop's wall time.
    pub elapsed: Duration,
}

impl Stats {
    /// One line: inputs tried, the rate, accepted, findings.
    pub fn summary(&self, name: &str, seed: u64) -> String {
        let secs = self.elapsed.as_secs_f64().max(1e-9);
        format!(
            "fuzz {name}: seed {seed}, {} inputs in {:.1} s ({:.0}/s), {} accepted, slowest {:.1} ms, \
             {} crashes, {} slow inputs",
            self.inputs,
            secs,
            self.inputs as f64 / secs,
            self.accepted,
            self.slowest.as_secs_f64() * 1e3,
            self.crashes.len(),
            self.slow.len()
        )
    }
}

/// A failing input and where it was written.
#[derive(Clone, Debug)]
pub struct Finding {
    /// The reproducer.
    pub path: PathBuf,
    /// The panic message, or the time taken.
    pub what: String,
}

/// Why the driver itself failed.
#[derive(Debug, Error)]
pub enum FuzzError {
    #[error("{name} = `{value}` is not a valid value")]
    Env { name: &'static str, value: String },
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("no seeds: the corpus is empty and the target generated none")]
    NoSeeds,
}

/// The crate's folder of checked-in inputs of `target` (`corpus` or `crashes`).
pub fn folder(kind: &str, target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(kind)
        .join(target)
}

/// The files of `dir` (none if it does not exist), sorted.
pub fn files(dir: &Path) -> Result<Vec<PathBuf>, FuzzError> {
    let io = |source| FuzzError::Io {
        path: dir.to_owned(),
        source,
    };
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io(e)),
    };
    let mut paths = Vec::new();
    for entry in entries {
        let path = entry.map_err(io)?.path();
        if path.is_file()
            && !path
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with('.'))
        {
            paths.push(path);
        }
    }
    paths.sort();
    Ok(paths)
}

/// Feeds every checked-in corpus file and crash reproducer of `target` to it;
/// returns the files that panicked, with the message.
pub fn replay(target: &dyn Target) -> Result<Vec<(PathBuf, String)>, FuzzError> {
    let mut failures = Vec::new();
    for kind in ["corpus", "crashes"] {
        for path in files(&folder(kind, target.name()))? {
            let bytes = std::fs::read(&path).map_err(|source| FuzzError::Io {
                path: path.clone(),
                source,
            })?;
            if let Err(message) = guarded(target, &bytes) {
                failures.push((path, message));
            }
        }
    }
    Ok(failures)
}

/// Mutates the corpus (checked-in files and [`Target::seeds`]) for
/// `budget.time`, writing reproducers of findings under `crash_dir`.
pub fn fuzz(target: &dyn Target, budget: &Budget, crash_dir: &Path) -> Result<Stats, FuzzError> {
    let mut seeds = Vec::new();
    for path in files(&folder("corpus", target.name()))? {
        seeds.push(std::fs::read(&path).map_err(|source| FuzzError::Io { path, source })?);
    }
    seeds.extend(target.seeds());
    if seeds.is_empty() {
        return Err(FuzzError::NoSeeds);
    }
    let mut rng = ChaCha8Rng::seed_from_u64(budget.seed);
    let mut recent: Vec<Vec<u8>> = Vec::new();
    let mut stats = Stats::default();
    let start = Instant::now();
    // The seeds themselves first, then mutants until the time is up.
    let mut pending: Vec<Vec<u8>> = seeds.clone();
    while !pending.is_empty() || start.elapsed() < budget.time {
        let input = match pending.pop() {
            Some(input) => input,
            None => {
                let base = if !recent.is_empty() && rng.random_bool(0.3) {
                    &recent[rng.random_range(0..recent.len())]
                } else {
                    &seeds[rng.random_range(0..seeds.len())]
                };
                target.mutate(&mut rng, base)
            }
        };
        let t0 = Instant::now();
        let outcome = guarded(target, &input);
        let took = t0.elapsed();
        stats.inputs += 1;
        stats.slowest = stats.slowest.max(took);
        match outcome {
            Ok(accepted) => {
                if accepted {
                    stats.accepted += 1;
                }
                if took > budget.slow {
                    let what = format!("took {:.1} s", took.as_secs_f64());
                    stats
                        .slow
                        .push(write_finding(crash_dir, "slow", &input, what)?);
                }
            }
            Err(message) => stats
                .crashes
                .push(write_finding(crash_dir, "crash", &input, message)?),
        }
        // Keep a ring of recent mutants so that mutations stack.
        if recent.len() < 64 {
            recent.push(input);
        } else {
            let i = rng.random_range(0..recent.len());
            recent[i] = input;
        }
    }
    stats.elapsed = start.elapsed();
    Ok(stats)
}

fn write_finding(dir: &Path, kind: &str, input: &[u8], what: String) -> Result<Finding, FuzzError> {
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| FuzzError::Io { path, source }
    };
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let path = dir.join(format!("{kind}-{:016x}.bin", fnv1a(input)));
    std::fs::write(&path, input).map_err(io(&path))?;
    Ok(Finding { path, what })
}

/// FNV-1a: a stable name for a reproducer.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

thread_local! {
    /// Set while this thread runs a target: its panics are findings, not
    /// noise on standard error.
    static GUARDED: Cell<bool> = const { Cell::new(false) };
    static MESSAGE: RefCell<Option<String>> = const { RefCell::new(None) };
}

type Hook = Box<dyn Fn(&PanicHookInfo<'_>) + Sync + Send + 'static>;
static PREVIOUS: OnceLock<Hook> = OnceLock::new();

/// Runs the target on `input`; `Err(message)` if it panicked.
fn guarded(target: &dyn Target, input: &[u8]) -> Result<bool, String> {
    PREVIOUS.get_or_init(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(|info| {
            if GUARDED.get() {
                let location = info
                    .location()
                    .map(|l| format!(" at {l}"))
                    .unwrap_or_default();
                MESSAGE.set(Some(format!("{}{location}", payload(info.payload()))));
            } else if let Some(previous) = PREVIOUS.get() {
                previous(info);
            }
        }));
        previous
    });
    GUARDED.set(true);
    let result = panic::catch_unwind(AssertUnwindSafe(|| target.check(input)));
    GUARDED.set(false);
    result.map_err(|_| MESSAGE.take().unwrap_or_else(|| "panic".into()))
}

fn payload(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| (*s).to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into())
}
