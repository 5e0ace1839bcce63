//! The table's files: reading a bench file or a table, the metadata of a
//! run, the table made from a bench file (`--from-bench`), the markdown
//! summary, and writing the table.

use std::path::Path;

use serde_json::{Map, Value, json};
use time::OffsetDateTime;

use super::error::AutotuneError;
use super::select::tuned_point;
use super::text;
use crate::bench::report::BenchFile;
use crate::bench::workload::Point;
use crate::tuned::{Measured, RawSchedule, TunedTable};

/// The largest bench file or tuned table read: the checked-in ones are a
/// few KiB, a full sweep's bench file well under 1 MiB.
const MAX_JSON_BYTES: u64 = 64 << 20;

/// The whole of `path`, refusing more than [`MAX_JSON_BYTES`] before
/// reading it all (a pipe, a device or a huge file would not end or fit).
fn read(path: &Path) -> Result<String, AutotuneError> {
    use std::io::Read as _;
    let io = |source| AutotuneError::Read {
        path: path.to_path_buf(),
        source,
    };
    let mut text = String::new();
    std::fs::File::open(path)
        .map_err(io)?
        .take(MAX_JSON_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(io)?;
    if text.len() as u64 > MAX_JSON_BYTES {
        return Err(AutotuneError::TooLarge {
            path: path.to_path_buf(),
            limit: MAX_JSON_BYTES,
        });
    }
    Ok(text)
}

/// A `kda-split bench --json` file.
pub fn read_bench(path: &Path) -> Result<BenchFile, AutotuneError> {
    serde_json::from_str(&read(path)?).map_err(|source| AutotuneError::Parse {
        path: path.to_path_buf(),
        source,
    })
}

/// A tuned table.
pub fn read_table(path: &Path) -> Result<TunedTable, AutotuneError> {
    TunedTable::parse(&read(path)?).map_err(|source| AutotuneError::Parse {
        path: path.to_path_buf(),
        source,
    })
}

/// Write `table` to `path` (whole or not at all).
pub fn write(path: &Path, table: &TunedTable) -> Result<(), AutotuneError> {
    kda_host::case::write_atomic(path, table.to_json_string()?.as_bytes())
        .map_err(|e| write_error(path, e))
}

/// Fails now, before any timing, if `path` cannot take the table.
pub fn check_output(path: &Path) -> Result<(), AutotuneError> {
    kda_host::case::check_output(path).map_err(|e| write_error(path, e))
}

fn write_error(path: &Path, e: kda_host::case::FileError) -> AutotuneError {
    let source = match e {
        kda_host::case::FileError::Io { source, .. } => source,
        kda_host::case::FileError::Output { reason, .. } => std::io::Error::other(reason),
        other => std::io::Error::other(other.to_string()),
    };
    AutotuneError::Write {
        path: path.to_path_buf(),
        source,
    }
}

/// `YYYY-MM-DD` (UTC) of a Unix time; `?` past the year 9999.
pub fn date_of(unix: u64) -> String {
    i64::try_from(unix)
        .ok()
        .and_then(|s| OffsetDateTime::from_unix_timestamp(s).ok())
        .map_or_else(|| "?".into(), |t| t.date().to_string())
}

/// The table's metadata of a run on `device` (as `CudaDevice::describe`
/// writes it: `NAME (sm_90, N SMs, driver CUDA X.Y)`) at `unix` time.
pub fn metadata(source: String, device: &str, unix: u64) -> Map<String, Value> {
    let gpu = device.split(" (").next().unwrap_or(device);
    let driver = device
        .split("driver ")
        .nth(1)
        .map(|d| d.trim_end_matches(')'));
    let mut meta = Map::new();
    meta.insert("source".into(), json!(source));
    meta.insert("device".into(), json!(device));
    meta.insert("gpu".into(), json!(gpu));
    meta.insert("driver".into(), json!(driver));
    meta.insert("date".into(), json!(date_of(unix)));
    meta.insert("unix_time".into(), json!(unix));
    meta.insert("gate_mode".into(), json!(0));
    meta.insert("has_bias".into(), json!(true));
    meta
}

pub fn now_unix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// The table from a `kda-split bench --json` file (read from `file`): per
/// point, every schedule measured (`timing: "bench"`), the fastest chosen as
/// by [`tuned_point`] with `usable` (of a point and a schedule).
pub fn table_from_bench(
    doc: &BenchFile,
    file: &Path,
    min_gain: f64,
    usable: &mut dyn FnMut(&Point, &RawSchedule) -> bool,
) -> Result<TunedTable, AutotuneError> {
    let device = doc
        .device
        .as_deref()
        .ok_or_else(|| AutotuneError::NoDevice {
            path: file.to_path_buf(),
        })?;
    let mut points: Vec<(Point, Option<RawSchedule>, Vec<Measured>)> = Vec::new();
    for r in &doc.rows {
        let point = r.point();
        let at = match points.iter().position(|(p, _, _)| *p == point) {
            Some(i) => i,
            None => {
                points.push((point, None, Vec::new()));
                points.len() - 1
            }
        };
        let entry = &mut points[at];
        if r.schedule_raw.len() >= 3 && r.schedule_raw.iter().all(|&x| x == 0) {
            entry.1 = r.schedule();
        }
        if let (Some(us), Some(schedule)) = (r.good_us(), r.schedule()) {
            entry.2.push(Measured {
                schedule,
                us_per_step: us,
                timing: "bench".into(),
            });
        }
    }
    let names = doc.options.schedules.len();
    let date = date_of(doc.unix_time);
    let file = file.display();
    let source = format!(
        "seeded from {file} (`kda-split autotune --from-bench`): per point the fastest of the \
         {names} schedules `kda-split bench` measured on {device}, {date}; not a search of the \
         schedule space: `kda-split autotune` on the GPU replaces it"
    );
    let mut meta = metadata(source, device, doc.unix_time);
    meta.insert("bench_file".into(), json!(file.to_string()));
    meta.insert("min_gain".into(), json!(min_gain));
    let table_points = points
        .into_iter()
        .filter_map(|(point, seed, measured)| {
            let seed = seed.unwrap_or(RawSchedule([u32::MAX; 7]));
            tuned_point(&point, seed, measured, min_gain, Map::new(), &mut |s| {
                usable(&point, s)
            })
        })
        .collect();
    Ok(TunedTable {
        meta,
        points: table_points,
    })
}

/// The table as a markdown summary.
pub fn markdown(table: &TunedTable) -> String {
    let mut s = format!(
        "## Tuned schedules ({}, {})\n\n",
        table.meta_str("device").unwrap_or("?"),
        table.meta_str("date").unwrap_or("?")
    );
    s += "| point | schedule [early,lanes,occ,cluster,evict[,bulk_store[,balance]]] | µs/step | seed µs/step | speedup | schedules timed |\n";
    s += "|---|---|---:|---:|---:|---:|\n";
    for p in &table.points {
        s += &format!(
            "| {} | {} | {:.2} | {} | {} | {} |\n",
            p.name(),
            text(&p.schedule),
            p.us_per_step,
            p.seed_us_per_step.map_or("—".into(), |x| format!("{x:.2}")),
            p.seed_us_per_step
                .map_or("—".into(), |x| format!("{:.3}×", x / p.us_per_step)),
            p.measured.len()
        );
    }
    s
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_endless_input_is_refused_at_the_limit() {
        // /dev/zero never ends: it used to be read until memory ran out.
        match super::read(std::path::Path::new("/dev/zero")) {
            Err(super::AutotuneError::TooLarge { limit, .. }) => {
                assert_eq!(limit, super::MAX_JSON_BYTES)
            }
            other => panic!("{other:?}"),
        }
    }

    use super::*;

    #[test]
    fn dates_and_metadata() {
        assert_eq!(date_of(0), "1970-01-01");
        assert_eq!(date_of(951_782_400), "2000-02-29");
        assert_eq!(date_of(1_795_965_996), "2026-11-29");
        // Past what a table can mean: no date, no panic.
        assert_eq!(date_of(u64::MAX), "?");
        assert_eq!(date_of(400_000_000_000), "?");
        let m = metadata(
            "x".into(),
            "NVIDIA H200 (sm_90, 132 SMs, driver CUDA 13.0)",
            1_795_965_996,
        );
        assert_eq!(m["gpu"], "NVIDIA H200");
        assert_eq!(m["driver"], "CUDA 13.0");
        assert_eq!(m["date"], "2026-11-29");
    }

    #[test]
    fn a_bench_file_makes_a_table() {
        let row = |h: u32, b: u32, label: &str, raw: &[u32], res: [u32; 5], us: Option<f64>| {
            json!({
                "heads": h, "batch": b, "tokens": 1, "schedule": label, "schedule_raw": raw,
                "resolved": {"early": res[0], "lanes": res[1], "occupancy": res[2],
                             "cluster": res[3], "evict": res[4] == 1},
                "status": if us.is_some() { "ok" } else { "skipped" },
                "us_per_step": us,
            })
        };
        let doc = json!({
            "device": "NVIDIA H200 (sm_90, 132 SMs, driver CUDA 13.0)",
            "unix_time": 1_795_965_996u64,
            "options": {"schedules": [{"label": "default"}, {"label": "e1"}]},
            "rows": [
                row(12, 1, "default", &[0, 0, 0], [0, 8, 0, 8, 0], Some(3.3)),
                row(12, 1, "e1", &[1, 0, 0], [1, 8, 0, 8, 0], Some(2.6)),
                row(12, 64, "default", &[0, 0, 0], [0, 16, 0, 4, 0], Some(34.0)),
                row(12, 64, "e1", &[1, 0, 0], [1, 16, 0, 4, 0], Some(33.9)),
                row(12, 64, "e1-l16", &[1, 16, 0], [1, 16, 0, 4, 0], None),
            ],
        });
        let doc: BenchFile = serde_json::from_value(doc).unwrap();
        let t = table_from_bench(&doc, Path::new("b.json"), 0.01, &mut |_, _| true).unwrap();
        assert_eq!(t.points.len(), 2);
        assert_eq!(t.points[0].schedule, [1, 8, 0, 8, 0]);
        assert_eq!(t.points[0].seed_us_per_step, Some(3.3));
        // 0.3 % faster than the seed's defaults: not enough.
        assert_eq!(t.points[1].schedule, [0, 16, 0, 4, 0]);
        assert!(t.meta_str("source").unwrap().contains("seeded from b.json"));
        assert_eq!(t.meta_str("date"), Some("2026-11-29"));
        assert_eq!(TunedTable::parse(&t.to_json_string().unwrap()).unwrap(), t);
        assert!(markdown(&t).contains("| H12 B1 T1 | [1,8,0,8,0] | 2.60 | 3.30 | 1.269× | 2 |"));
    }
}
