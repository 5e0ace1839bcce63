//! Fuzzing the IR text form (issue 13): seeded mutations of the filetest
//! kernels (`filetests/**/*.kir`) fed through parse → verify → print →
//! parse (the print must round-trip) → schedule → PTX, each input under
//! `catch_unwind`. Any panic fails the test; its input is written under
//! `$CARGO_TARGET_TMPDIR/fuzz_text/` to be checked in to `tests/fuzz_text/`,
//! which every run replays first.
//!
//! `KDA_FUZZ_SECONDS` (default 10) bounds the mutation loop, `KDA_FUZZ_SEED`
//! (default 1) picks the mutations.
//!
//! The parser refuses entity numbers far past what the text can define and
//! regions nested deeper than `MAX_NESTING` (`parse/mod.rs`); the mutator
//! goes past both. An input that runs for over 5 s is a finding too, written
//! out as `slow-<seed>-<n>.kir`.

use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kda_ir::parse::parse_kernel;
use kda_ir::pipeline::{Options, schedule};
use kda_ir::verifier::verify;
use kda_ir::write::write_kernel;

/// Value numbers above this are folded back: past the parser's limit, so
/// both sides of it are tried, but not into numbers a text could never reach.
const MAX_VALUE: u64 = 1 << 40;
/// Nested `if`s the mutator adds at most: past the parser's limit.
const MAX_NEST: usize = 300;
/// One input running longer than this is a finding (the whole pipeline on a
/// filetest-sized kernel takes milliseconds).
const SLOW: Duration = Duration::from_secs(5);

/// xorshift64*: deterministic, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn corpus() -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("filetests");
    let mut seeds = Vec::new();
    for dir in ["ptx", "verifier"] {
        let Ok(entries) = std::fs::read_dir(root.join(dir)) else {
            continue;
        };
        let mut paths: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "kir"))
            .collect();
        paths.sort();
        for p in paths {
            if let Ok(text) = std::fs::read_to_string(&p) {
                seeds.push(text);
            }
        }
    }
    seeds
}

fn reproducers() -> Vec<(PathBuf, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("fuzz_text");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    paths
        .into_iter()
        .filter_map(|p| std::fs::read_to_string(&p).ok().map(|t| (p, t)))
        .collect()
}

const NUMBERS: &[&str] = &[
    "0",
    "1",
    "-1",
    "2",
    "31",
    "32",
    "127",
    "128",
    "4294967295",
    "4294967296",
    "2147483648",
    "1073741824",
    "18446744073709551615",
    "9223372036854775807",
    "-9223372036854775808",
    "99999999999999999999999",
    "65536",
];

const WORDS: &[&str] = &[
    "if", "else", "for", "while", "do", "role", "yield", "kernel", "shared", "tensor", "mbarrier",
    "{", "}", "[", "]", "(", ")", ",", ":", "=", "..", "|", "f32", "u32", "i64", "bool", "f32x4",
    "phase", "cta", "step", "iter", "align", "guard", "roles", "tx", "arrivals", "\"", ";", "@",
];

/// Split into tokens: runs of word characters, or single other characters.
fn tokens(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for c in line.chars() {
        if c.is_alphanumeric() || c == '_' || c == '.' || c == '-' {
            cur.push(c);
        } else {
            if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
            out.push(c.to_string());
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

fn mutate(rng: &mut Rng, text: &str, donors: &[String]) -> String {
    let mut lines: Vec<String> = text.lines().map(String::from).collect();
    if lines.is_empty() {
        lines.push(String::new());
    }
    for _ in 0..1 + rng.below(4) {
        let n = rng.below(lines.len());
        match rng.below(9) {
            // A number changed, often to an extreme.
            0 | 1 => {
                let mut ts = tokens(&lines[n]);
                let nums: Vec<usize> = (0..ts.len())
                    .filter(|&i| ts[i].chars().next().is_some_and(|c| c.is_ascii_digit()))
                    .collect();
                if !nums.is_empty() {
                    let i = nums[rng.below(nums.len())];
                    ts[i] = NUMBERS[rng.below(NUMBERS.len())].to_string();
                    lines[n] = ts.concat();
                }
            }
            // Two tokens of a line swapped.
            2 => {
                let mut ts = tokens(&lines[n]);
                if ts.len() > 1 {
                    let (a, b) = (rng.below(ts.len()), rng.below(ts.len()));
                    ts.swap(a, b);
                    lines[n] = ts.concat();
                }
            }
            // A token replaced by a keyword or punctuation.
            3 => {
                let mut ts = tokens(&lines[n]);
                if !ts.is_empty() {
                    let i = rng.below(ts.len());
                    ts[i] = WORDS[rng.below(WORDS.len())].to_string();
                    lines[n] = ts.concat();
                }
            }
            // A line duplicated, deleted, or taken from another kernel.
            4 => {
                let l = lines[n].clone();
                lines.insert(n, l);
            }
            5 => {
                lines.remove(n);
                if lines.is_empty() {
                    lines.push(String::new());
                }
            }
            6 => {
                let d = &donors[rng.below(donors.len())];
                let dl: Vec<&str> = d.lines().collect();
                if !dl.is_empty() {
                    lines.insert(n, dl[rng.below(dl.len())].to_string());
                }
            }
            // Lines wrapped in nested `if`s on a fresh condition.
            7 => {
                let depth = 1 + rng.below(MAX_NEST);
                let end = (n + 1 + rng.below(4)).min(lines.len());
                let mut wrapped = vec!["  v19999:bool = iconst 1".to_string()];
                wrapped.extend((0..depth).map(|_| "  if v19999 {".to_string()));
                wrapped.extend(lines[n..end].iter().cloned());
                wrapped.extend((0..depth).map(|_| "  } else {\n  }".to_string()));
                lines.splice(n..end, wrapped);
            }
            // A byte flipped.
            _ => {
                let mut b = lines[n].clone().into_bytes();
                if !b.is_empty() {
                    let i = rng.below(b.len());
                    b[i] = b" {}[]()=:,.|;\"v0123456789-"[rng.below(26)];
                }
                lines[n] = String::from_utf8_lossy(&b).into_owned();
            }
        }
    }
    cap_values(&lines.join("\n"))
}

/// Fold value numbers above [`MAX_VALUE`] back into range (see the module doc).
fn cap_values(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let starts = b[i] == b'v'
            && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_'))
            && b.get(i + 1).is_some_and(u8::is_ascii_digit);
        if !starts {
            let c = text[i..].chars().next().unwrap_or(' ');
            out.push(c);
            i += c.len_utf8().max(1);
            continue;
        }
        let mut j = i + 1;
        while j < b.len() && b[j].is_ascii_digit() {
            j += 1;
        }
        let n: u64 = text[i + 1..j].parse().unwrap_or(u64::MAX);
        out.push('v');
        if n > MAX_VALUE {
            out.push_str(&(n % MAX_VALUE).to_string());
        } else {
            out.push_str(&text[i + 1..j]);
        }
        i = j;
    }
    out
}

/// What one input did.
#[derive(Debug, PartialEq)]
enum Outcome {
    ParseError,
    VerifyError,
    Scheduled,
    Compiled,
}

/// The pipeline on one input; a broken invariant between stages panics.
fn run(text: &str) -> Outcome {
    let Ok(k) = parse_kernel(text) else {
        return Outcome::ParseError;
    };
    let printed = write_kernel(&k);
    let verified = verify(&k);
    match parse_kernel(&printed) {
        Ok(again) => assert_eq!(
            write_kernel(&again),
            printed,
            "print → parse → print differs"
        ),
        Err(e) => panic!("the printed kernel does not parse: {e}\n{printed}"),
    }
    if let Err(e) = verified {
        // The report renders without panicking, and stays short.
        let _ = e.to_string();
        return Outcome::VerifyError;
    }
    let opts = Options {
        verify_each_pass: true,
        dump: None,
        skip: Vec::new(),
        probes: false,
    };
    let Ok(s) = schedule(&k, &opts) else {
        return Outcome::Scheduled;
    };
    match kda_ir::ptx::emit(&s) {
        Ok(_) | Err(_) => Outcome::Compiled,
    }
}

fn guarded(text: &str) -> Result<Outcome, String> {
    panic::catch_unwind(AssertUnwindSafe(|| run(text))).map_err(|p| {
        p.downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "a panic".into())
    })
}

/// Write a finding's input whole or not at all (a temporary file in the
/// same folder, renamed into place): the watchdog exits right after.
fn write_finding(path: &Path, text: &str) {
    let tmp = path.with_extension("kir.tmp");
    let written = path
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|()| std::fs::write(&tmp, text))
        .and_then(|()| std::fs::rename(&tmp, path));
    if let Err(e) = written {
        eprintln!("fuzz ir-text: could not write {}: {e}", path.display());
    }
}

fn env<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
fn the_checked_in_reproducers_do_not_panic() {
    let failures: Vec<String> = reproducers()
        .into_iter()
        .filter_map(|(p, t)| {
            let start = Instant::now();
            let result = guarded(&t);
            let took = start.elapsed();
            match result {
                Err(e) => Some(format!("{}: {e}", p.display())),
                Ok(_) if took > SLOW => Some(format!("{}: took {took:?}", p.display())),
                Ok(_) => None,
            }
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_corpus_compiles_or_fails_cleanly() {
    let seeds = corpus();
    assert!(seeds.len() > 10, "the filetests are the corpus");
    for s in &seeds {
        let out = guarded(s).unwrap_or_else(|e| panic!("a seed panics: {e}\n{s}"));
        assert_ne!(out, Outcome::ParseError, "a seed does not parse:\n{s}");
    }
}

#[test]
fn mutated_ir_text_never_panics() {
    let seconds: f64 = env("KDA_FUZZ_SECONDS", 10.0);
    let seed: u64 = env("KDA_FUZZ_SEED", 1);
    let seeds = corpus();
    let mut rng = Rng(seed.max(1).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let deadline = Instant::now() + Duration::from_secs_f64(seconds);
    let out_dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("fuzz_text");
    // Panics are findings, not noise on stderr.
    let hook = panic::take_hook();
    panic::set_hook(Box::new(|_| {}));
    let mut counts = [0u64; 4];
    let mut findings = Vec::new();
    let mut recent: Vec<String> = Vec::new();
    let mut inputs = 0u64;
    // A watchdog: an input that takes longer than SLOW is a finding too
    // (a hang or a blow-up in some pass); it is written out and the run
    // stops, instead of running into the CI limit or the OOM killer.
    let current = std::sync::Arc::new(std::sync::Mutex::new((0u64, Instant::now(), String::new())));
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watchdog = {
        let (current, done, out_dir) = (current.clone(), done.clone(), out_dir.clone());
        std::thread::spawn(move || {
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(200));
                let c = current.lock().unwrap_or_else(|e| e.into_inner());
                if c.1.elapsed() > SLOW {
                    let path = out_dir.join(format!("slow-{seed}-{}.kir", c.0));
                    write_finding(&path, &c.2);
                    eprintln!(
                        "fuzz ir-text: input {} has run for over {SLOW:?}; written to {} (check it in under tests/fuzz_text/)",
                        c.0,
                        path.display()
                    );
                    std::process::exit(1);
                }
            }
        })
    };
    while Instant::now() < deadline && findings.len() < 20 {
        let base = if !recent.is_empty() && rng.below(3) == 0 {
            recent[rng.below(recent.len())].clone()
        } else {
            seeds[rng.below(seeds.len())].clone()
        };
        let input = mutate(&mut rng, &base, &seeds);
        inputs += 1;
        *current.lock().unwrap_or_else(|e| e.into_inner()) =
            (inputs, Instant::now(), input.clone());
        match guarded(&input) {
            Ok(o) => {
                counts[o as usize] += 1;
                if recent.len() < 256 {
                    recent.push(input);
                } else {
                    let i = rng.below(recent.len());
                    recent[i] = input;
                }
            }
            Err(msg) => {
                let path = out_dir.join(format!("crash-{seed}-{inputs}.kir"));
                write_finding(&path, &input);
                findings.push(format!("{}: {msg}", path.display()));
            }
        }
    }
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let _ = watchdog.join();
    panic::set_hook(hook);
    eprintln!(
        "fuzz ir-text: seed {seed}, {inputs} inputs in {seconds} s: {} parse errors, {} verifier errors, {} failed to schedule, {} compiled; {} panics",
        counts[0],
        counts[1],
        counts[2],
        counts[3],
        findings.len()
    );
    assert!(
        findings.is_empty(),
        "panics (reproducers written; check them in under tests/fuzz_text/):\n{}",
        findings.join("\n")
    );
}
