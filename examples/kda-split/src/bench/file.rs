//! Writing the tools' files so that a reader never sees half of one: the
//! bench JSON and the tuned table (rewritten after every tuned point, so a
//! search stopped midway leaves the last whole table).

use std::io::Write as _;
use std::path::{Path, PathBuf};

/// Write `contents` to a temporary file beside `path`, then rename it over
/// `path` (atomic on one file system).
pub fn write_atomic(path: &Path, contents: &str) -> std::io::Result<()> {
    let tmp = temporary_beside(path);
    let written = std::fs::File::create(&tmp).and_then(|mut f| {
        f.write_all(contents.as_bytes())?;
        f.sync_all()
    });
    let renamed = written.and_then(|()| std::fs::rename(&tmp, path));
    if renamed.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    renamed
}

/// `DIR/.NAME.PID.tmp` for `DIR/NAME`.
fn temporary_beside(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map_or_else(|| "out".into(), |n| n.to_string_lossy().into_owned());
    path.with_file_name(format!(".{name}.{}.tmp", std::process::id()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_replaces_and_leaves_no_temporary() {
        let dir = std::env::temp_dir().join(format!("kda-split-atomic-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.json");
        write_atomic(&path, "one").unwrap();
        write_atomic(&path, "two").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "two");
        let names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["t.json"]);
        // A folder that does not exist: an error, nothing written.
        assert!(write_atomic(&dir.join("no/such/t.json"), "x").is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
