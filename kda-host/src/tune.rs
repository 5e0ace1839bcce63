//! The tuning table: which schedule an autotune chose, per device, kernel
//! and call key ([`crate::kernel::HostKernel::tune_key`]), persisted as
//! JSON so later processes (and `schedule="auto"`-style defaults) use it.
//!
//! Where: `$KDA_TUNE_FILE`, else `$KDA_CACHE_DIR/tune.json`, else
//! `$XDG_CACHE_HOME/kda/tune.json`, else `$HOME/.cache/kda/tune.json`.
//! Writes go to a temporary file beside it, then a rename: a reader never
//! sees half a table, and an unreadable table is treated as empty.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// One tuned choice.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TuneEntry {
    /// The chosen schedule, as the kernel labels it.
    pub choice: String,
    /// Every schedule timed: label and median µs per launch.
    pub times_us: Vec<(String, f64)>,
}

/// The table: `"<device>|<kernel>|<key>"` → choice.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TuneTable {
    /// The entries, sorted by key.
    pub entries: BTreeMap<String, TuneEntry>,
}

/// The key of a choice.
pub fn key(device: &str, kernel: &str, call: &str) -> String {
    format!("{device}|{kernel}|{call}")
}

/// Where the table lives, from the environment (`None`: no home, nothing set).
pub fn path_from(var: impl Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let set = |k: &str| var(k).filter(|v| !v.is_empty());
    if let Some(f) = set("KDA_TUNE_FILE") {
        return Some(PathBuf::from(f));
    }
    if let Some(d) = set("KDA_CACHE_DIR") {
        return Some(Path::new(&d).join("tune.json"));
    }
    if let Some(d) = set("XDG_CACHE_HOME").filter(|d| Path::new(d).is_absolute()) {
        return Some(Path::new(&d).join("kda").join("tune.json"));
    }
    set("HOME").map(|h| Path::new(&h).join(".cache").join("kda").join("tune.json"))
}

/// [`path_from`] the process environment.
pub fn default_path() -> Option<PathBuf> {
    path_from(|k| std::env::var(k).ok())
}

impl TuneTable {
    /// The table at `path`; empty where it is missing or unreadable.
    pub fn load(path: &Path) -> TuneTable {
        std::fs::read(path)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default()
    }

    /// Write the table to `path` (parent folders created): a temporary file
    /// beside it, then a rename.
    pub fn save(&self, path: &Path) -> std::io::Result<()> {
        let dir = path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir)?;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "tune.json".into());
        let tmp = dir.join(format!(".{name}.tmp.{}", std::process::id()));
        let text = serde_json::to_vec_pretty(self).map_err(std::io::Error::other)?;
        let written = std::fs::write(&tmp, text).and_then(|()| std::fs::rename(&tmp, path));
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        written
    }

    /// Record `entry` under `key` in the table at `path` (re-read first, so
    /// choices another process stored meanwhile are kept).
    pub fn record(path: &Path, key: String, entry: TuneEntry) -> std::io::Result<TuneTable> {
        let mut table = TuneTable::load(path);
        table.entries.insert(key, entry);
        table.save(path)?;
        Ok(table)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_path_follows_the_environment() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        assert_eq!(
            path_from(env(&[("KDA_TUNE_FILE", "/t/x.json"), ("HOME", "/h")])),
            Some("/t/x.json".into())
        );
        assert_eq!(
            path_from(env(&[("KDA_CACHE_DIR", "/c"), ("HOME", "/h")])),
            Some("/c/tune.json".into())
        );
        assert_eq!(
            path_from(env(&[("XDG_CACHE_HOME", "rel"), ("HOME", "/h")])),
            Some("/h/.cache/kda/tune.json".into())
        );
        assert_eq!(
            path_from(env(&[("XDG_CACHE_HOME", "/x")])),
            Some("/x/kda/tune.json".into())
        );
        assert_eq!(path_from(env(&[])), None);
    }

    #[test]
    fn records_round_trip_and_keep_other_entries() {
        let dir = std::env::temp_dir().join(format!("kda-tune-test-{}", std::process::id()));
        let path = dir.join("sub").join("tune.json");
        let e = |c: &str| TuneEntry {
            choice: c.into(),
            times_us: vec![(c.into(), 1.5)],
        };
        TuneTable::record(&path, key("H200", "GdnDecode", "a"), e("x")).unwrap();
        let t = TuneTable::record(&path, key("H200", "GdnDecode", "b"), e("y")).unwrap();
        assert_eq!(TuneTable::load(&path), t);
        assert_eq!(t.entries.len(), 2);
        assert_eq!(t.entries["H200|GdnDecode|a"].choice, "x");
        let leftovers: Vec<_> = std::fs::read_dir(path.parent().unwrap()).unwrap().collect();
        assert_eq!(leftovers.len(), 1, "no temporary file left");
        std::fs::write(&path, b"{ not json").unwrap();
        assert_eq!(TuneTable::load(&path), TuneTable::default());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
