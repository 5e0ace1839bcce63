//! What can go wrong in `kda-split autotune`.

use std::path::PathBuf;

use kda_runtime::RuntimeError;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum AutotuneError {
    /// The device or the driver failed.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    #[error("reading {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// Larger than any bench file or tuned table (read no further).
    #[error("{}: larger than {limit} bytes, which no bench file or tuned table is", path.display())]
    TooLarge { path: PathBuf, limit: u64 },
    /// Not a bench file or a tuned table.
    #[error("{}: {source}", path.display())]
    Parse {
        path: PathBuf,
        source: serde_json::Error,
    },
    /// `--from-bench`: the file does not say which GPU it measured.
    #[error("{}: no `device`", path.display())]
    NoDevice { path: PathBuf },
    #[error("writing {}: {source}", path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    /// `--merge`: the two tables were measured on different GPUs or
    /// workloads.
    #[error("{}: measured with {key} {part}, the table at --out ({}) with {base}: timings of the two would not compare", path.display(), out.display())]
    Mismatch {
        path: PathBuf,
        out: PathBuf,
        key: &'static str,
        base: String,
        part: String,
    },
    /// `--merge`: a table holds one point twice, or the partial table none.
    #[error("{}: {why}", path.display())]
    BadTable { path: PathBuf, why: String },
    #[error("serializing the table: {0}")]
    Json(#[from] serde_json::Error),
}
