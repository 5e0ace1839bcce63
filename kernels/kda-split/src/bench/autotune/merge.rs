//! `kda-split autotune --merge FILE`: the points of a partial table (an
//! autotune run over a few points, e.g. `--tokens 2,4,8`) replace the same
//! points of the table at `--out`; its other points stay as they were. No
//! GPU: both tables were measured already.

use std::path::Path;

use serde_json::{Value, json};

use super::error::AutotuneError;
use crate::tuned::TunedTable;

/// The metadata of `part` that says where its points come from, as kept in
/// the merged table's `merged` list.
const PROVENANCE: [&str; 6] = ["source", "command", "date", "device", "space", "spills"];

/// A point `table` (read from `path`) holds twice: the lookup would only
/// ever see the first.
fn check_distinct(table: &TunedTable, path: &Path) -> Result<(), AutotuneError> {
    let mut seen = std::collections::HashSet::new();
    match table
        .points
        .iter()
        .find(|p| !seen.insert((p.heads, p.batch, p.tokens)))
    {
        Some(p) => Err(AutotuneError::BadTable {
            path: path.to_path_buf(),
            why: format!("{} appears twice", p.name()),
        }),
        None => Ok(()),
    }
}

/// `base` (the table at `out`) with every point of `part` (read from
/// `file`) in place of the point of the same heads, batch and tokens, or
/// appended after the base's points if it has none. Refused if the two
/// tables were measured on different GPUs, or with a different gate mode or
/// bias (their timings would not compare), if either holds a point twice,
/// or if `part` has no point.
pub fn merge(
    base: &TunedTable,
    out: &Path,
    part: &TunedTable,
    file: &Path,
) -> Result<TunedTable, AutotuneError> {
    for key in ["gpu", "gate_mode", "has_bias"] {
        let (a, b) = (base.meta.get(key), part.meta.get(key));
        if a != b {
            return Err(AutotuneError::Mismatch {
                path: file.to_path_buf(),
                out: out.to_path_buf(),
                key,
                base: a.map_or("none".into(), Value::to_string),
                part: b.map_or("none".into(), Value::to_string),
            });
        }
    }
    if part.points.is_empty() {
        return Err(AutotuneError::BadTable {
            path: file.to_path_buf(),
            why: "no points to merge".into(),
        });
    }
    check_distinct(base, out)?;
    check_distinct(part, file)?;
    let mut merged = base.clone();
    let (mut replaced, mut added) = (0usize, 0usize);
    for point in &part.points {
        let same = |p: &&mut crate::tuned::TunedPoint| {
            (p.heads, p.batch, p.tokens) == (point.heads, point.batch, point.tokens)
        };
        match merged.points.iter_mut().find(same) {
            Some(old) => {
                *old = point.clone();
                replaced += 1;
            }
            None => {
                merged.points.push(point.clone());
                added += 1;
            }
        }
    }
    let mut provenance = serde_json::Map::new();
    provenance.insert("file".into(), json!(file.display().to_string()));
    for key in PROVENANCE {
        if let Some(v) = part.meta.get(key) {
            provenance.insert(key.into(), v.clone());
        }
    }
    let points: Vec<String> = part.points.iter().map(|p| p.name()).collect();
    provenance.insert("points".into(), json!(points));
    provenance.insert("replaced".into(), json!(replaced));
    provenance.insert("added".into(), json!(added));
    let list = merged
        .meta
        .entry("merged")
        .or_insert_with(|| Value::Array(Vec::new()));
    match list {
        Value::Array(items) => items.push(Value::Object(provenance)),
        other => *other = json!([other.clone(), Value::Object(provenance)]),
    }
    Ok(merged)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn out() -> &'static Path {
        Path::new("tuned.json")
    }

    fn table(gpu: &str, points: &[(u32, u32, u32, f64)]) -> TunedTable {
        let points: Vec<String> = points
            .iter()
            .map(|&(h, b, t, us)| {
                format!(
                    r#"{{"heads":{h},"batch":{b},"tokens":{t},"schedule":[1,16,0,4,0],"us_per_step":{us},"seed_us_per_step":{us},"measured":[]}}"#
                )
            })
            .collect();
        let text = format!(
            r#"{{"gpu":"{gpu}","gate_mode":0,"has_bias":true,"source":"run of {gpu}","points":[{}]}}"#,
            points.join(",")
        );
        TunedTable::parse(&text).unwrap()
    }

    #[test]
    fn points_replace_their_twins_and_the_rest_stay() {
        let base = table(
            "H200",
            &[(12, 8, 1, 5.0), (12, 8, 4, 14.0), (12, 64, 4, 88.0)],
        );
        let part = table("H200", &[(12, 64, 4, 86.0), (12, 128, 4, 160.0)]);
        let merged = merge(&base, out(), &part, Path::new("t4.json")).unwrap();
        let us: Vec<_> = merged
            .points
            .iter()
            .map(|p| (p.name(), p.us_per_step))
            .collect();
        assert_eq!(
            us,
            [
                ("H12 B8 T1".to_string(), 5.0),
                ("H12 B8 T4".to_string(), 14.0),
                ("H12 B64 T4".to_string(), 86.0),
                ("H12 B128 T4".to_string(), 160.0),
            ]
        );
        let record = &merged.meta["merged"][0];
        assert_eq!(record["file"], "t4.json");
        assert_eq!(
            (record["replaced"].clone(), record["added"].clone()),
            (json!(1), json!(1))
        );
        assert_eq!(record["source"], "run of H200");
        // The base's own metadata is kept; a second merge appends its record.
        assert_eq!(merged.meta["source"], "run of H200");
        let again = merge(&merged, out(), &part, Path::new("again.json")).unwrap();
        assert_eq!(again.meta["merged"].as_array().unwrap().len(), 2);
        assert_eq!(again.points.len(), 4);
    }

    #[test]
    fn tables_of_different_gpus_are_refused() {
        let base = table("H200", &[(12, 8, 1, 5.0)]);
        let part = table("H100", &[(12, 8, 1, 6.0)]);
        let e = merge(&base, out(), &part, Path::new("h100.json")).unwrap_err();
        assert_eq!(
            e.to_string(),
            r#"h100.json: measured with gpu "H100", the table at --out (tuned.json) with "H200": timings of the two would not compare"#
        );
        let mut other_mode = table("H200", &[(12, 8, 1, 6.0)]);
        other_mode.meta.insert("gate_mode".into(), json!(2));
        let e = merge(&base, out(), &other_mode, Path::new("m2.json")).unwrap_err();
        assert!(e.to_string().contains("gate_mode 2"), "{e}");
    }

    #[test]
    fn twice_the_same_point_or_no_point_is_refused() {
        let base = table("H200", &[(12, 8, 1, 5.0)]);
        let twice = table("H200", &[(12, 64, 4, 86.0), (12, 64, 4, 87.0)]);
        let e = merge(&base, out(), &twice, Path::new("t.json")).unwrap_err();
        assert_eq!(e.to_string(), "t.json: H12 B64 T4 appears twice");
        let e = merge(&twice, out(), &base, Path::new("t.json")).unwrap_err();
        assert_eq!(e.to_string(), "tuned.json: H12 B64 T4 appears twice");
        let e = merge(&base, out(), &table("H200", &[]), Path::new("e.json")).unwrap_err();
        assert_eq!(e.to_string(), "e.json: no points to merge");
    }
}
