//! `kda-split autotune`: the table from a bench file (no GPU), the no-GPU
//! path and the flags.

mod cli_support;

use cli_support::{TempFile, kda_split};
use kda_runtime::CudaDevice;
use kda_split::TunedTable;
use serde_json::Value;

fn bench_file() -> String {
    format!(
        "{}/../../docs/bench-2026-11-29.json",
        env!("CARGO_MANIFEST_DIR")
    )
}

#[test]
fn a_bench_file_makes_the_table_of_its_fastest_schedules() {
    let out_file = TempFile::new("tuned-json");
    let out = kda_split(&[
        "autotune",
        "--from-bench",
        &bench_file(),
        "--out",
        out_file.path(),
    ])
    .expect_ok();
    assert!(out.stdout.contains("| H12 B1 T1 |"), "{out}");
    let table = TunedTable::parse(&std::fs::read_to_string(&out_file.0).unwrap()).unwrap();
    assert!(table.meta_str("source").unwrap().contains("seeded from"));
    assert_eq!(table.meta_str("gpu"), Some("NVIDIA H200"));
    assert_eq!(table.meta_str("driver"), Some("CUDA 13.0"));
    assert_eq!(table.meta_str("date"), Some("2026-11-29"));

    // Per point, the fastest good row of the bench (or the seed's defaults
    // when that is less than 1 % faster).
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(bench_file()).unwrap()).unwrap();
    let rows = doc["rows"].as_array().unwrap();
    assert_eq!(table.points.len(), 14);
    for p in &table.points {
        let at: Vec<&Value> = rows
            .iter()
            .filter(|r| {
                (
                    r["heads"].as_u64(),
                    r["batch"].as_u64(),
                    r["tokens"].as_u64(),
                ) == (
                    Some(p.heads.into()),
                    Some(p.batch.into()),
                    Some(p.tokens.into()),
                )
            })
            .collect();
        let us = |r: &Value| r["us_per_step"].as_f64();
        let best = at
            .iter()
            .filter_map(|r| Some((us(r)?, *r)))
            .min_by(|a, b| a.0.total_cmp(&b.0))
            .unwrap();
        let seed = at
            .iter()
            .find(|r| r["schedule"] == "default")
            .and_then(|r| us(r))
            .unwrap();
        assert_eq!(p.seed_us_per_step, Some((seed * 1000.0).round() / 1000.0));
        let want = if best.0 <= seed * 0.99 { best.0 } else { seed };
        assert!(
            (p.us_per_step - want).abs() < 1e-3,
            "{}: {} µs, want {want}",
            p.name(),
            p.us_per_step
        );
        assert!(p.us_per_step <= seed);
    }
}

#[test]
fn help_and_bad_flags() {
    let out = kda_split(&["autotune", "--help"]).expect_ok();
    assert!(out.stdout.contains("Usage: kda-split autotune"), "{out}");
    for flag in ["--full", "--bogus"] {
        let out = kda_split(&["autotune", flag]).expect_code(4);
        assert!(out.stderr.contains(flag), "{out}");
    }
}

/// Issue 13: a search that measured nothing must not pass for one that did,
/// so without a GPU `autotune` fails with exit 4 (it exited 0 before).
#[test]
fn without_a_gpu_nothing_is_measured_or_written() {
    if CudaDevice::new(0).is_ok() {
        return; // there is a GPU: `autotune` would measure
    }
    let out_file = TempFile::new("tuned-nogpu");
    let out = kda_split(&[
        "autotune",
        "--heads",
        "2",
        "--batch",
        "1",
        "--out",
        out_file.path(),
    ])
    .expect_code(4);
    assert!(out.stdout.contains("autotune: no usable GPU"), "{out}");
    assert!(!out_file.0.exists());
}
