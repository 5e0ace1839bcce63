//! Issue 13, "no silent wrong answers" in the CLI: the files the commands
//! write (never their own input, checked before the work, replaced
//! atomically) and inputs too large for the machine (refused at once with
//! the limit, never a panic, an allocation abort or minutes of work).

mod cli_support;

use kda_host::testing::Scratch;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use cli_support::{Out, kda_split};
use kda_runtime::CudaDevice;

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn no_panic(out: &Out) {
    assert!(!out.stderr.contains("panicked"), "{out}");
}

/// A small case (1 head, 1 request) in `dir`.
fn small_case(dir: &Scratch) -> PathBuf {
    let case = dir.join("case.safetensors");
    let args = ["gen-case", "-o", s(&case), "--heads", "1", "--batch", "1"];
    kda_split(&args).expect_ok();
    case
}

#[test]
fn run_refuses_an_out_that_is_its_input() {
    let dir = Scratch::new("kda-split-safety", "out-is-input");
    let case = small_case(&dir);
    let before = std::fs::read(&case).unwrap();
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    std::os::unix::fs::symlink(&case, dir.join("link.safetensors")).unwrap();
    std::fs::hard_link(&case, dir.join("hard.safetensors")).unwrap();
    for out in [
        case.clone(),
        dir.join("sub/../case.safetensors"),
        dir.join("link.safetensors"),
        dir.join("hard.safetensors"),
    ] {
        let args = [
            "run",
            "--device",
            "sim",
            "--case",
            s(&case),
            "--out",
            s(&out),
        ];
        let out = kda_split(&args).expect_code(2);
        assert!(out.stderr.contains("is the input file"), "{out}");
        // Refused before anything ran.
        assert!(!out.stdout.contains("KdaSplit:"), "{out}");
        assert_eq!(std::fs::read(&case).unwrap(), before);
    }
    // The other way round: the case given through the link, --out the file.
    let link = dir.join("link.safetensors");
    let args = [
        "run",
        "--device",
        "sim",
        "--case",
        s(&link),
        "--out",
        s(&case),
    ];
    kda_split(&args).expect_code(2);
    assert_eq!(std::fs::read(&case).unwrap(), before);
}

#[test]
fn ptx_refuses_an_out_that_is_its_case() {
    let dir = Scratch::new("kda-split-safety", "ptx-out-is-case");
    let case = small_case(&dir);
    let before = std::fs::read(&case).unwrap();
    let out = kda_split(&["ptx", "--case", s(&case), "-o", s(&case)]).expect_code(2);
    assert!(out.stderr.contains("is the input file"), "{out}");
    assert_eq!(std::fs::read(&case).unwrap(), before);
}

#[test]
fn output_paths_are_checked_before_the_work() {
    let dir = Scratch::new("kda-split-safety", "out-checked");
    let case = small_case(&dir);
    let missing = dir.join("no/such/folder/out.safetensors");
    for args in [
        vec![
            "run",
            "--device",
            "sim",
            "--case",
            s(&case),
            "--out",
            s(&missing),
        ],
        vec!["gen-case", "-o", s(&missing)],
        vec!["ptx", "--heads", "1", "--batch", "1", "-o", s(&missing)],
        vec!["gen-case", "-o", s(&dir.0)],
    ] {
        let out = kda_split(&args).expect_code(2);
        assert!(out.stderr.contains("cannot write the output"), "{out}");
        // `run` stopped before reading the case or running anything.
        assert!(!out.stdout.contains("KdaSplit:"), "{out}");
    }
    assert_eq!(dir.names(), ["case.safetensors"]);
}

/// A written file replaces the old one by a rename (a new file), never by
/// truncating it in place: a hard link to the old file keeps the old
/// contents, and no temporary is left behind. `ptx -o` used a plain
/// truncating write.
#[test]
fn every_output_is_a_new_file_renamed_into_place() {
    let dir = Scratch::new("kda-split-safety", "atomic");
    let case = small_case(&dir);
    let outputs: [(&str, Vec<&str>); 3] = [
        ("ptx.ptx", vec!["ptx", "--heads", "1", "--batch", "1", "-o"]),
        (
            "gen.safetensors",
            vec!["gen-case", "--heads", "1", "--batch", "1", "-o"],
        ),
        (
            "results.safetensors",
            vec!["run", "--device", "sim", "--case", s(&case), "--out"],
        ),
    ];
    for (name, args) in outputs {
        let target = dir.join(name);
        std::fs::write(&target, b"old contents").unwrap();
        let alias = dir.join(&format!("{name}.alias"));
        std::fs::hard_link(&target, &alias).unwrap();
        let mut args = args;
        args.push(s(&target));
        kda_split(&args).expect_ok();
        // (Compared as booleans: the PTX is too long to print.)
        let kept = std::fs::read(&alias).unwrap() == b"old contents";
        assert!(kept, "{name}: the old file was overwritten in place");
        let replaced = std::fs::read(&target).unwrap() != b"old contents";
        assert!(replaced, "{name}: not written");
    }
    assert!(
        dir.names()
            .iter()
            .all(|n| !n.ends_with(".tmp") && !n.contains(".kda-tmp.")),
        "{:?}",
        dir.names()
    );
}

fn bench_file() -> String {
    format!(
        "{}/../../docs/bench-2026-11-29.json",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// Every command that writes a file, as `(name, args)`: the output path
/// goes last. (`bench --json` needs a GPU to reach its write; it goes
/// through the same writer, tested in kda-host's `tests/output.rs`.)
fn writers<'a>(case: &'a str, bench: &'a str) -> Vec<(&'static str, Vec<&'a str>)> {
    vec![
        ("ptx", vec!["ptx", "--heads", "1", "--batch", "1", "-o"]),
        (
            "gen-case",
            vec!["gen-case", "--heads", "1", "--batch", "1", "-o"],
        ),
        (
            "run",
            vec!["run", "--device", "sim", "--case", case, "--out"],
        ),
        ("autotune", vec!["autotune", "--from-bench", bench, "--out"]),
    ]
}

fn mkfifo(p: &Path) {
    let ok = std::process::Command::new("mkfifo")
        .arg(p)
        .status()
        .unwrap()
        .success();
    assert!(ok, "mkfifo {}", p.display());
}

/// Issue 32 item 1. Before, every output was a temporary renamed over the
/// target: a FIFO (and, as root, `/dev/null` or `/dev/full`) was replaced
/// by a regular file and its reader hung; a link was replaced instead of
/// written through; a 0600 file became 0644. Now a FIFO is written
/// through, a link is followed to its file, and the file keeps its mode.
#[test]
fn outputs_write_through_fifos_and_follow_links() {
    use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _, PermissionsExt as _};
    let dir = Scratch::new("kda-split-safety", "targets");
    let case = small_case(&dir);
    let bench = bench_file();
    for (name, args) in writers(s(&case), &bench) {
        // A FIFO, read by `cat`.
        let fifo = dir.join(&format!("{name}.fifo"));
        mkfifo(&fifo);
        let got = dir.join(&format!("{name}.got"));
        let mut reader = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("exec cat '{}' > '{}'", s(&fifo), s(&got)))
            .spawn()
            .unwrap();
        let mut with_fifo = args.clone();
        with_fifo.push(s(&fifo));
        let out = kda_split(&with_fifo);
        let deadline = Instant::now() + Duration::from_secs(30);
        while reader.try_wait().unwrap().is_none() {
            if Instant::now() > deadline {
                let _ = reader.kill();
                panic!("{name}: the FIFO's reader got nothing\n{out}");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let out = out.expect_ok();
        let still = std::fs::symlink_metadata(&fifo).unwrap().file_type();
        assert!(still.is_fifo(), "{name}: the FIFO was replaced\n{out}");
        let len = std::fs::metadata(&got).unwrap().len();
        assert!(len > 0, "{name}: nothing came through the FIFO\n{out}");

        // A link to a 0600 file.
        let real = dir.join(&format!("{name}.real"));
        std::fs::write(&real, b"old contents").unwrap();
        std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o600)).unwrap();
        let link = dir.join(&format!("{name}.link"));
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let mut with_link = args.clone();
        with_link.push(s(&link));
        let out = kda_split(&with_link).expect_ok();
        let kind = std::fs::symlink_metadata(&link).unwrap().file_type();
        assert!(kind.is_symlink(), "{name}: the link was replaced\n{out}");
        let written = std::fs::read(&real).unwrap() != b"old contents";
        assert!(written, "{name}: the linked file was not written\n{out}");
        let mode = std::fs::metadata(&real).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o600, "{name}: mode changed\n{out}");
    }
    let left: Vec<String> = dir
        .names()
        .into_iter()
        .filter(|n| n.contains("kda-tmp") || n.ends_with(".tmp"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// Issue 32 item 1: process substitution (`-o >(gzip > x)`) names a pipe
/// as `/dev/fd/N`; before, the probe for a temporary file in `/dev/fd`
/// failed and the command refused the output.
#[test]
fn outputs_go_into_process_substitution() {
    let dir = Scratch::new("kda-split-safety", "procsub");
    let case = small_case(&dir);
    let bench = bench_file();
    for (name, args) in writers(s(&case), &bench) {
        let got = dir.join(&format!("{name}.got"));
        let script =
            r#"bin=$1; got=$2; shift 2; "$bin" "$@" >(cat > "$got"); rc=$?; wait $!; exit $rc"#;
        let out = std::process::Command::new("bash")
            .arg("-c")
            .arg(script)
            .arg("bash")
            .arg(env!("CARGO_BIN_EXE_kda-split"))
            .arg(s(&got))
            .args(&args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{name}: {stderr}");
        let len = std::fs::metadata(&got).map_or(0, |m| m.len());
        assert!(len > 0, "{name}: nothing came through the pipe: {stderr}");
    }
}

/// A pid that no longer runs: a child that has exited and been reaped.
fn dead_pid() -> u32 {
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    pid
}

/// Issue 32 item 2: a run killed mid-write (SIGKILL cannot be caught)
/// leaves `.NAME.kda-tmp.PID.N`; the next write of NAME removes it once
/// that process is gone. (SIGINT and SIGTERM remove it at once:
/// `an_interrupted_gen_case_leaves_no_temporary_file` here, and kda-host's
/// `tests/output.rs`, `an_interrupted_write_leaves_nothing`.)
#[test]
fn stale_temporaries_beside_an_output_are_removed() {
    let dir = Scratch::new("kda-split-safety", "stale");
    let target = dir.join("x.safetensors");
    let stale = format!(".x.safetensors.kda-tmp.{}.0", dead_pid());
    std::fs::write(dir.join(&stale), vec![0u8; 4096]).unwrap();
    let args = ["gen-case", "--heads", "1", "--batch", "1", "-o", s(&target)];
    kda_split(&args).expect_ok();
    assert_eq!(dir.names(), ["x.safetensors"]);
}

/// Each must fail at once (exit 2 naming the limit or the overflow): before,
/// they panicked (capacity overflow, slice index) or aborted in the
/// allocator after a while.
#[test]
fn generated_sizes_beyond_the_machine_are_refused_at_once() {
    let dir = Scratch::new("kda-split-safety", "huge");
    let o = dir.join("x.safetensors");
    let huge: [&[&str]; 9] = [
        &["--num-slots", "18446744073709551615"],
        &["--num-slots", "1000000000000"],
        &["--tokens", "2", "--slot-extra", "18446744073709551615"],
        &["--conv-extra", "18446744073709551615"],
        &["--conv-extra", "1000000000000"],
        &["--batch", "4294967295"],
        &["--heads", "100000"],
        &["--heads", "65535"],
        &[
            "--heads",
            "4294967295",
            "--batch",
            "4294967295",
            "--tokens",
            "8",
        ],
    ];
    for extra in huge {
        let mut args = vec!["gen-case", "-o", s(&o)];
        args.extend_from_slice(extra);
        let start = Instant::now();
        let out = kda_split(&args).expect_code(2);
        no_panic(&out);
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{extra:?} took {:?}",
            start.elapsed()
        );
        assert!(
            out.stderr.contains("the limit is")
                || out.stderr.contains("overflow")
                || out.stderr.contains("slot ids are I32")
                || out.stderr.contains("heads must be at most 65535"),
            "{out}"
        );
    }
    assert!(dir.names().is_empty(), "{:?}", dir.names());
    // The demo generates its case too.
    let out = kda_split(&["--device", "sim", "--batch", "4294967295"]).expect_code(2);
    assert!(out.stderr.contains("the limit is"), "{out}");
    let out = kda_split(&["--device", "sim", "--heads", "65535", "--batch", "1"]).expect_code(2);
    assert!(out.stderr.contains("the limit is"), "{out}");
    let out = kda_split(&["--device", "sim", "--heads", "100000", "--batch", "1"]).expect_code(2);
    assert!(out.stderr.contains("heads must be at most 65535"), "{out}");
}

/// A case file larger than the limit is refused before it is read (a
/// sparse terabyte used to be read into memory: an allocation abort), and
/// an endless one (a device) stops at the limit.
#[test]
fn case_files_beyond_the_limit_are_refused_unread() {
    let dir = Scratch::new("kda-split-safety", "huge-file");
    let path = dir.join("huge.safetensors");
    std::fs::File::create(&path)
        .unwrap()
        .set_len(1 << 40)
        .unwrap();
    for case in [s(&path), "/dev/zero"] {
        let start = Instant::now();
        let out = kda_split(&["run", "--device", "sim", "--case", case]).expect_code(3);
        no_panic(&out);
        assert!(out.stderr.contains("the limit is"), "{out}");
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{case}: {:?}",
            start.elapsed()
        );
    }
}

#[test]
fn bench_without_a_gpu_fails_with_exit_4() {
    if CudaDevice::new(0).is_ok() {
        return; // there is a GPU: `bench` would measure
    }
    let dir = Scratch::new("kda-split-safety", "bench");
    let json = dir.join("bench.json");
    let out = kda_split(&["bench", "--quick", "--json", s(&json)]).expect_code(4);
    assert!(out.stdout.contains("bench: no usable GPU"), "{out}");
    assert!(dir.names().is_empty());
}

#[test]
fn bench_sim_checks_the_kernels_and_workload_without_a_gpu() {
    // What `bench` would run, on the simulator: the copies (the same-bytes
    // copy's PDL-chained steps included) and the rotating workload.
    let out = kda_split(&["bench", "--sim"]).expect_ok();
    for line in [
        "copy b64 u2: exact over 3 tiles",
        "H1 B1 T3 same-bytes copy bench_copy_step_b64_u2_t3: 3 chained steps over 3 groups write 3 exact copies",
        "H2 B2 T3 e1: 3 chained steps",
        "bench --sim: ok",
    ] {
        assert!(out.stdout.contains(line), "{line}\n{out}");
    }
}

#[test]
fn repeat_is_bounded() {
    let out = kda_split(&["--device", "sim", "--repeat", "18446744073709551615"]).expect_code(2);
    assert!(out.stderr.contains("at most 100000"), "{out}");
}

/// Issue 32 item 3. `ptx` and `info` built a whole generated case only to
/// learn its strides: `ptx --heads 65535` allocated gigabytes (and `--heads
/// 100000` aborted in the allocator). Now the strides are computed, the
/// largest launchable head count prints at once, and larger ones are
/// refused naming `heads`.
#[test]
fn ptx_of_huge_configurations_needs_no_case() {
    let dir = Scratch::new("kda-split-safety", "ptx-huge");
    let out_file = dir.join("huge.ptx");
    let start = Instant::now();
    let args = [
        "ptx",
        "--heads",
        "65535",
        "--batch",
        "1",
        "-o",
        s(&out_file),
    ];
    let out = kda_split(&args).expect_ok();
    assert!(
        start.elapsed() < Duration::from_secs(60),
        "{:?}\n{out}",
        start.elapsed()
    );
    let ptx = std::fs::read_to_string(&out_file).unwrap();
    assert!(ptx.contains(".entry"), "{out}");
    for heads in ["65536", "100000", "4294967295"] {
        let out = kda_split(&["ptx", "--heads", heads]).expect_code(2);
        no_panic(&out);
        assert!(out.stderr.contains("heads must be at most 65535"), "{out}");
    }
}

/// A stand-in ptxas in `dir` running `body` (a shell script).
fn fake_ptxas(dir: &Scratch, body: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt as _;
    let path = dir.join("ptxas");
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

fn info_with(ptxas: &Path, timeout_s: &str, args: &[&str]) -> Out {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kda-split"))
        .arg("info")
        .args(args)
        .env("KDA_PTXAS", ptxas)
        .env("KDA_PTXAS_TIMEOUT", timeout_s)
        .output()
        .unwrap();
    Out {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Issue 32 items 3 and 7: `info` trusted ptxas with no time or size
/// bound (a hung ptxas hung `info`; one that floods its output filled
/// memory), and built a whole case per configuration (`--heads 100000`
/// aborted in the allocator).
#[test]
fn info_bounds_ptxas_and_huge_configurations() {
    let dir = Scratch::new("kda-split-safety", "info");
    let one = ["--heads", "1", "--batch", "1"];
    let hung = fake_ptxas(&dir, "exec sleep 60");
    let start = Instant::now();
    let out = info_with(&hung, "1", &one).expect_code(4);
    assert!(out.stderr.contains("did not finish within 1 s"), "{out}");
    assert!(start.elapsed() < Duration::from_secs(30), "{out}");
    let flood = fake_ptxas(&dir, "exec yes");
    let out = info_with(&flood, "60", &one).expect_code(4);
    assert!(
        out.stderr.contains("bytes of output and was killed"),
        "{out}"
    );
    // A ptxas that reports (absurd numbers, too): huge head counts are
    // invalid rows, never a case built.
    let fine = fake_ptxas(
        &dir,
        "echo '4294967295 bytes stack frame, 4294967295 bytes spill stores, 4294967295 bytes \
         spill loads'; echo 'Used 4294967295 registers, used 1 barriers, 4294967295 bytes smem'",
    );
    let out = info_with(&fine, "60", &["--heads", "1,100000", "--batch", "1"]).expect_code(2);
    no_panic(&out);
    assert!(out.stdout.contains("heads must be at most 65535"), "{out}");
    assert!(out.stdout.contains("SPILLS"), "{out}");
}

/// Issue 32 item 7: flags that do not apply are refused (exit 2, naming
/// them), not silently ignored. `bench --sim --heads 64` checked its fixed
/// small workloads and said "ok"; `gen-case --eps=-1` wrote a case whose
/// RMSNorm takes the square root of a negative number.
#[test]
fn flags_that_would_not_apply_are_refused() {
    for (flag, args) in [
        ("--heads", vec!["bench", "--sim", "--heads", "64"]),
        ("--batch", vec!["bench", "--sim", "--batch", "8"]),
        ("--tokens", vec!["bench", "--sim", "--tokens", "2"]),
        (
            "--json",
            vec!["bench", "--sim", "--json", "/nonexistent/x.json"],
        ),
        ("--full", vec!["bench", "--sim", "--full"]),
    ] {
        let out = kda_split(&args).expect_code(2);
        assert!(out.stderr.contains(flag), "{out}");
        assert!(out.stderr.contains("--sim"), "{out}");
        assert!(!out.stdout.contains("bench --sim: ok"), "{out}");
    }
    let dir = Scratch::new("kda-split-safety", "eps");
    let case = dir.join("x.safetensors");
    for eps in ["-1", "-1e-9", "inf", "NaN"] {
        let eps_flag = format!("--eps={eps}");
        let out = kda_split(&["gen-case", "-o", s(&case), &eps_flag]).expect_code(2);
        assert!(out.stderr.contains("--eps"), "{out}");
    }
    assert!(dir.names().is_empty(), "{:?}", dir.names());
    kda_split(&[
        "gen-case",
        "-o",
        s(&case),
        "--eps=0",
        "--heads",
        "1",
        "--batch",
        "1",
    ])
    .expect_ok();
}

/// Two cases of the same shapes (so the same length) in `dir`.
fn two_versions(dir: &Scratch) -> (Vec<u8>, Vec<u8>) {
    let mut versions = Vec::new();
    for seed in ["1", "2"] {
        let path = dir.join(&format!("seed{seed}.safetensors"));
        let args = [
            "gen-case",
            "-o",
            s(&path),
            "--heads",
            "1",
            "--batch",
            "1",
            "--seed",
            seed,
        ];
        kda_split(&args).expect_ok();
        versions.push(std::fs::read(&path).unwrap());
    }
    let b = versions.pop().unwrap();
    let a = versions.pop().unwrap();
    assert_eq!(a.len(), b.len());
    (a, b)
}

/// Issue 32 item 8. A case file rewritten in place while `run` reads it
/// (half one version, half the other) was run as it was and reported as a
/// kernel mismatch (exit 1); now it is an input change (exit 3, "changed
/// while it was read"): while the writer is at work the read sees the
/// change, and a torn file left behind fails the checksum its writer
/// recorded.
#[test]
fn a_torn_case_file_is_an_input_change_not_a_mismatch() {
    let dir = Scratch::new("kda-split-safety", "torn");
    let (a, b) = two_versions(&dir);
    let case = dir.join("case.safetensors");
    // Torn and left so: the first half of one version, the rest of the other.
    let half = a.len() / 2;
    let torn: Vec<u8> = a[..half].iter().chain(&b[half..]).copied().collect();
    std::fs::write(&case, &torn).unwrap();
    let out = kda_split(&["run", "--device", "sim", "--case", s(&case)]).expect_code(3);
    assert!(out.stderr.contains("changed while it was read"), "{out}");
    assert!(out.stderr.contains(s(&case)), "{out}");

    // Rewritten in place, over and over, while `run` reads it.
    use std::os::unix::fs::FileExt as _;
    std::fs::write(&case, &a).unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (stop, case) = (stop.clone(), case.clone());
        std::thread::spawn(move || {
            let f = std::fs::OpenOptions::new().write(true).open(&case).unwrap();
            let mut next_b = true;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                f.write_all_at(if next_b { &b } else { &a }, 0).unwrap();
                next_b = !next_b;
            }
        })
    };
    let mut codes = Vec::new();
    for _ in 0..12 {
        let out = kda_split(&["run", "--device", "sim", "--case", s(&case)]);
        if out.code == 3 {
            assert!(out.stderr.contains("changed while it was read"), "{out}");
        }
        codes.push(out.code);
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    writer.join().unwrap();
    assert!(codes.iter().all(|&c| c == 0 || c == 3), "{codes:?}");
}

/// Issue 32 item 2. Ctrl-C or SIGTERM during a write left the hidden
/// temporary file (up to 1 GB seen) beside the target; now the command
/// removes it and dies of the signal. (A 137 MiB case: its write takes long
/// enough to be caught in the act.)
#[test]
fn an_interrupted_gen_case_leaves_no_temporary_file() {
    use std::os::unix::process::ExitStatusExt as _;
    for (signal, number) in [("INT", 2), ("TERM", 15)] {
        let dir = Scratch::new("kda-split-safety", &format!("interrupted-{signal}"));
        let target = dir.join("big.safetensors");
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_kda-split"))
            .args([
                "gen-case",
                "--heads",
                "8",
                "--batch",
                "256",
                "--no-expected",
            ])
            .arg("-o")
            .arg(&target)
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(120);
        let seen = loop {
            if dir.names().iter().any(|n| n.contains(".kda-tmp.")) {
                break true;
            }
            if child.try_wait().unwrap().is_some() || Instant::now() > deadline {
                break false;
            }
            std::thread::sleep(Duration::from_millis(1));
        };
        if !seen {
            let _ = child.kill();
            let _ = child.wait();
            panic!("SIG{signal}: the write was never caught in progress");
        }
        let sent = std::process::Command::new("kill")
            .args([format!("-{signal}"), child.id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
        let status = child.wait().unwrap();
        // Died of the signal, or (caught just as it renamed) finished.
        assert!(
            status.signal() == Some(number) || status.success(),
            "SIG{signal}: {status:?}"
        );
        let hidden: Vec<String> = dir
            .names()
            .into_iter()
            .filter(|n| n.starts_with('.'))
            .collect();
        assert!(hidden.is_empty(), "SIG{signal}: {hidden:?} left behind");
    }
}
