//! The compile cache on disk (`kda_cuda::disk_cache`) across processes: this
//! test binary runs itself as a child that loads and launches `pdl_scale`
//! with `KDA_CACHE_DIR` pointing at a fresh directory. The first child
//! compiles and stores the cubin, the second loads it with no JIT; a
//! damaged entry is ignored and replaced; `KDA_CACHE=0` turns the cache off
//! (the children run with `KDA_CACHE=1`: the cache is opt-in).
//! Skips (printing why) where there is no CUDA driver.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::kernels::{SCALE_BLOCK, pdl_scale};
use common::{bytes_f32, f32_bytes, gpu};
use kda_runtime::{CudaDevice, Device, LaunchConfig, ScalarArg};

/// Set in the child's environment: run [`child`]'s body.
const CHILD: &str = "KDA_DISK_CACHE_TEST_CHILD";
const N: usize = 1000;

/// What one child reported.
struct Report {
    outcome: String,
    jit_log: String,
    stdout: String,
}

/// Run [`child`] in a new process of this binary with `env`.
fn run_child(env: &[(&str, &Path)], disable: bool) -> Report {
    let exe = std::env::current_exe().unwrap();
    let mut cmd = Command::new(exe);
    cmd.args(["child", "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .env("KDA_CACHE", "1")
        .env_remove("KDA_CACHE_MAX_MB");
    for (k, v) in env {
        cmd.env(k, v);
    }
    if disable {
        cmd.env("KDA_CACHE", "0");
    }
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "child failed\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let field = |tag: &str| -> String {
        stdout
            .lines()
            // With --nocapture the harness's `test child ... ` may precede
            // the first line on the same line.
            .find_map(|l| l.find(tag).map(|at| &l[at + tag.len()..]))
            .unwrap_or_else(|| panic!("no `{tag}` line in\n{stdout}"))
            .to_string()
    };
    Report {
        outcome: field("cache-outcome: "),
        jit_log: field("jit-log: "),
        stdout,
    }
}

/// The child: load `pdl_scale` (through the disk cache the environment
/// names), check one launch, print the outcome. A no-op in a normal run.
#[test]
fn child() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    let dev = CudaDevice::new(0).expect("the parent found a GPU");
    let k = dev.load(&pdl_scale()).unwrap();
    let a: Vec<f32> = (0..N).map(|i| i as f32).collect();
    let a = dev.upload(&f32_bytes(&a)).unwrap();
    let b = dev.upload(&f32_bytes(&[0.0; N])).unwrap();
    let cfg = LaunchConfig {
        grid: [N.div_ceil(SCALE_BLOCK as usize) as u32, 1, 1],
        pdl: false,
        syms: vec![N as i64],
        scalars: vec![ScalarArg::F32(2.0), ScalarArg::U32(N as u32)],
    };
    dev.launch(&k, &cfg, &[&a, &b]).unwrap();
    let got = bytes_f32(&dev.download(&b).unwrap());
    let want: Vec<f32> = (0..N).map(|i| 2.0 * i as f32 + 1.0).collect();
    assert_eq!(got, want);
    println!("cache-outcome: {:?}", k.cache_outcome());
    println!("load-time: {:?}", k.load_time());
    // One line: the log's lines joined.
    println!("jit-log: {}", k.jit_log().replace('\n', " | "));
}

fn entries(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    v.sort();
    v
}

#[test]
fn a_second_process_loads_the_cubin_from_disk() {
    let Some(dev) = gpu() else { return };
    drop(dev);
    let dir = std::env::temp_dir().join(format!("kda-gpu-disk-cache-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let env = [("KDA_CACHE_DIR", dir.as_path())];

    let cold = run_child(&env, false);
    println!("cold:\n{}", cold.stdout);
    assert!(
        cold.outcome.starts_with("Miss { stored: true"),
        "{}",
        cold.outcome
    );
    let files = entries(&dir);
    assert_eq!(files.len(), 1, "{files:?}");
    assert!(files[0].extension().is_some_and(|e| e == "kdac"));

    let warm = run_child(&env, false);
    println!("warm:\n{}", warm.stdout);
    assert_eq!(warm.outcome, "Hit");
    // The hit reports the log of the compile that made the cubin.
    assert_eq!(warm.jit_log, cold.jit_log);
    assert_eq!(entries(&dir), files);

    // A damaged entry is ignored, recompiled and replaced.
    let mut bytes = std::fs::read(&files[0]).unwrap();
    *bytes.last_mut().unwrap() ^= 0xff;
    std::fs::write(&files[0], &bytes).unwrap();
    let damaged = run_child(&env, false);
    assert!(
        damaged
            .outcome
            .contains("stored: true, note: \"entry ignored: payload checksum mismatch"),
        "{}",
        damaged.outcome
    );
    assert_eq!(run_child(&env, false).outcome, "Hit");

    // KDA_CACHE=0: no cache, nothing written.
    let off_dir = dir.join("off");
    let off = run_child(&[("KDA_CACHE_DIR", off_dir.as_path())], true);
    assert_eq!(off.outcome, "Disabled(\"disabled by KDA_CACHE=0\")");
    assert!(!off_dir.exists());
    let _ = std::fs::remove_dir_all(&dir);
}
