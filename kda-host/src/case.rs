//! Safetensors files of named host tensors plus string metadata, the generic
//! layer under every kernel's case files: reading diagnoses truncation and
//! header damage by tensor name before the safetensors crate parses the file
//! ([`TensorFile::parse`]) and checks dtypes per tensor
//! ([`TensorFile::tensor`]); writing is atomic ([`write_atomic`], the one
//! writer of [`crate::output`]), so a reader never sees a half-written case.

use std::collections::HashMap;
use std::fs::{self, File};
use std::io::Read as _;
use std::path::{Path, PathBuf};

use half::bf16;
use safetensors::tensor::{Dtype, SafeTensorError, SafeTensors, TensorView};
use serde_json::Value;
use thiserror::Error;

use crate::generator::{CaseLimit, LimitError};
pub use crate::output::{check_output, write_atomic};
use crate::tensor::{DType, HostTensor, dtype_list};

/// Why a tensor file cannot be read or written.
#[derive(Debug, Error)]
pub enum FileError {
    /// The file system failed.
    #[error("{path}: {source}")]
    Io {
        /// The file (or its temporary sibling) at fault.
        path: PathBuf,
        /// What failed.
        source: std::io::Error,
    },
    /// The file ends before a part its header announces.
    #[error("file is truncated: {part} needs {needed} bytes but the file has {len}")]
    Truncated {
        /// The part cut off (the header length, the header, a tensor).
        part: String,
        /// Bytes that part needs.
        needed: usize,
        /// Bytes in the file.
        len: usize,
    },
    /// The header is not a safetensors header.
    #[error("bad header: {reason}")]
    Header {
        /// What is wrong with it.
        reason: String,
    },
    /// A tensor's dtype is not one the reader allows.
    #[error("tensor `{name}` has dtype {found}; expected {allowed}")]
    Dtype {
        /// The tensor.
        name: String,
        /// Its safetensors dtype.
        found: String,
        /// The allowed dtypes, as [`dtype_list`] prints them.
        allowed: String,
    },
    /// The safetensors crate rejected the data.
    #[error("invalid safetensors data: {0}")]
    Safetensors(#[from] SafeTensorError),
    /// The file is larger than a case may be here ([`read_limited`]).
    #[error("{}: {limit}", path.display())]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The limit it breaks.
        limit: LimitError,
    },
    /// The file changed while it was read (written in place, or replaced):
    /// the bytes may mix two versions, so they are not used (issue 32 item
    /// 8: a torn case was reported as a kernel mismatch).
    #[error(
        "{}: the file changed while it was read (it is being written or was replaced); \
         read it again once it is complete",
        path.display()
    )]
    Changed {
        /// The file.
        path: PathBuf,
    },
    /// The tensors do not match the checksum recorded when the file was
    /// written ([`TensorFile::verify_checksum`]).
    #[error(
        "the tensors do not match the checksum recorded when the file was written \
         ({CHECKSUM_KEY} {recorded}, the bytes give {actual}): the file changed while it was \
         read, or was torn or edited since it was written (a tool that edits the tensors must \
         drop or update {CHECKSUM_KEY})"
    )]
    Checksum {
        /// The recorded checksum.
        recorded: String,
        /// The checksum of the bytes read.
        actual: String,
    },
    /// An output path that cannot take a file ([`check_output`]).
    #[error("{}: {reason}", path.display())]
    Output {
        /// The path.
        path: PathBuf,
        /// Why it cannot be written.
        reason: String,
    },
}

/// A parsed safetensors file, borrowing its bytes.
pub struct TensorFile<'a> {
    file: SafeTensors<'a>,
    metadata: HashMap<String, String>,
}

impl<'a> TensorFile<'a> {
    /// Diagnoses truncation and header damage by name (the safetensors
    /// crate's errors do not say which tensor was cut off), then parses.
    pub fn parse(bytes: &'a [u8]) -> Result<Self, FileError> {
        let metadata = precheck(bytes)?;
        let file = SafeTensors::deserialize(bytes)?;
        Ok(Self { file, metadata })
    }

    /// `__metadata__` (empty if absent).
    pub fn metadata(&self) -> &HashMap<String, String> {
        &self.metadata
    }

    /// Checks the tensors' bytes against the checksum their writer recorded
    /// ([`CHECKSUM_KEY`]); a file without one (another writer's) passes.
    /// Readers call it once the structure has been checked, so a file edited
    /// by hand still gets the error that names what is wrong with it.
    pub fn verify_checksum(&self) -> Result<(), FileError> {
        let Some(recorded) = self.metadata.get(CHECKSUM_KEY) else {
            return Ok(());
        };
        let tensors = self.file.tensors();
        let actual = checksum(
            tensors
                .iter()
                .map(|(name, view)| (name.as_str(), view.data())),
        );
        if &actual == recorded {
            Ok(())
        } else {
            Err(FileError::Checksum {
                recorded: recorded.clone(),
                actual,
            })
        }
    }

    /// The tensor names, in file order.
    pub fn names(&self) -> Vec<&str> {
        self.file.names()
    }

    /// Tensor `name` as a row-major host tensor, `None` if absent; its dtype
    /// must be one of `allowed`.
    pub fn tensor(&self, name: &str, allowed: &[DType]) -> Result<Option<HostTensor>, FileError> {
        let view = match self.file.tensor(name) {
            Ok(view) => view,
            Err(SafeTensorError::TensorNotFound(_)) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let dtype = from_st_dtype(view.dtype()).filter(|d| allowed.contains(d));
        let Some(dtype) = dtype else {
            return Err(FileError::Dtype {
                name: name.into(),
                found: format!("{:?}", view.dtype()),
                allowed: dtype_list(allowed),
            });
        };
        // safetensors has matched the byte count to dtype and shape.
        HostTensor::from_le_bytes(dtype, view.shape().to_vec(), view.data())
            .map(Some)
            .map_err(|e| FileError::Header {
                reason: format!("tensor `{name}`: {e}"),
            })
    }
}

/// One tensor to write: its name, dtype, shape and little-endian row-major
/// bytes.
#[derive(Clone, Debug, PartialEq)]
pub struct NamedTensor {
    /// The key in the file.
    pub name: String,
    /// Element type.
    pub dtype: DType,
    /// Extents.
    pub shape: Vec<usize>,
    /// Little-endian row-major contents.
    pub data: Vec<u8>,
}

impl NamedTensor {
    /// The logical (row-major) contents of `t`.
    pub fn of(name: impl Into<String>, t: &HostTensor) -> Self {
        Self {
            name: name.into(),
            dtype: t.dtype(),
            shape: t.shape().to_vec(),
            data: t.to_le_bytes(),
        }
    }

    /// A 0-d F32 scalar.
    pub fn scalar(name: impl Into<String>, value: f32) -> Self {
        Self {
            name: name.into(),
            dtype: DType::F32,
            shape: vec![],
            data: value.to_le_bytes().to_vec(),
        }
    }

    /// bf16 `values` under `shape` (checked when serialised).
    pub fn bf16(name: impl Into<String>, shape: &[usize], values: &[bf16]) -> Self {
        Self {
            name: name.into(),
            dtype: DType::Bf16,
            shape: shape.to_vec(),
            data: values.iter().flat_map(|x| x.to_le_bytes()).collect(),
        }
    }

    /// f32 `values` under `shape` (checked when serialised).
    pub fn f32(name: impl Into<String>, shape: &[usize], values: &[f32]) -> Self {
        Self {
            name: name.into(),
            dtype: DType::F32,
            shape: shape.to_vec(),
            data: values.iter().flat_map(|x| x.to_le_bytes()).collect(),
        }
    }
}

/// The safetensors bytes of `tensors` with `metadata` as `__metadata__`.
/// Fails if a tensor's bytes do not fill its shape.
pub fn serialize(
    tensors: &[NamedTensor],
    metadata: HashMap<String, String>,
) -> Result<Vec<u8>, FileError> {
    let views = tensors
        .iter()
        .map(|t| {
            let view = TensorView::new(st_dtype(t.dtype), t.shape.clone(), &t.data)?;
            Ok((t.name.as_str(), view))
        })
        .collect::<Result<Vec<_>, SafeTensorError>>()?;
    let mut metadata = metadata;
    metadata.insert(
        CHECKSUM_KEY.into(),
        checksum(tensors.iter().map(|t| (t.name.as_str(), &t.data[..]))),
    );
    Ok(safetensors::serialize(views, Some(metadata))?)
}

/// The `__metadata__` entry in which [`serialize`] records a checksum of
/// the tensors' bytes, so that a reader can tell a file torn by a writer
/// (half one version, half another, issue 32 item 8) from a valid one:
/// [`TensorFile::verify_checksum`].
pub const CHECKSUM_KEY: &str = "kda_checksum";

/// `mix64:` and 16 hex digits: a 64-bit hash of each tensor's name, length
/// and bytes, in name order. Not cryptographic: any single changed word
/// changes it, and a tear is caught but for a 2^-64 chance.
fn checksum<'a>(tensors: impl Iterator<Item = (&'a str, &'a [u8])>) -> String {
    let mut tensors: Vec<(&str, &[u8])> = tensors.collect();
    tensors.sort_by_key(|t| t.0);
    let mut h = Mix64(0x6b64_612d_6361_7365);
    for (name, data) in tensors {
        h.bytes(name.as_bytes());
        h.word(data.len() as u64);
        h.bytes(data);
    }
    format!("mix64:{:016x}", h.0)
}

/// A word-at-a-time mixing hash: each step (xor, multiply by an odd
/// constant, rotate) is a bijection of the state, so no single changed
/// word leaves it unchanged.
struct Mix64(u64);

impl Mix64 {
    fn word(&mut self, w: u64) {
        self.0 = (self.0 ^ w)
            .wrapping_mul(0x9e37_79b9_7f4a_7c15)
            .rotate_left(29);
    }

    fn bytes(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for w in &mut words {
            self.word(u64::from_le_bytes(w.try_into().expect("8 bytes")));
        }
        let rest = words.remainder();
        let mut last = [0u8; 8];
        last[..rest.len()].copy_from_slice(rest);
        self.word(u64::from_le_bytes(last) ^ ((rest.len() as u64) << 59));
    }
}

/// The bytes of the file at `path`.
pub fn read(path: &Path) -> Result<Vec<u8>, FileError> {
    fs::read(path).map_err(|source| FileError::Io {
        path: path.to_owned(),
        source,
    })
}

/// The bytes of the file at `path`, refused without reading when it is
/// larger than `limit` (a regular file's length is known up front; a pipe or
/// device is read at most one byte past the limit), so a huge or endless file
/// fails with a message instead of exhausting memory. A regular file that
/// changes while it is read ([`FileError::Changed`]: its length, times or
/// contents differ between the start and the end of the read, or the path
/// names another file by then) is refused rather than returned torn.
pub fn read_limited(path: &Path, limit: &CaseLimit) -> Result<Vec<u8>, FileError> {
    read_observed(path, limit, &mut || {})
}

/// [`read_limited`], calling `midway` after the first half of the bytes
/// (tests change the file there).
fn read_observed(
    path: &Path,
    limit: &CaseLimit,
    midway: &mut dyn FnMut(),
) -> Result<Vec<u8>, FileError> {
    let io = |source| FileError::Io {
        path: path.to_owned(),
        source,
    };
    let too_large = |bytes: u64| {
        limit
            .check("the file", bytes)
            .map_err(|limit| FileError::TooLarge {
                path: path.to_owned(),
                limit,
            })
    };
    let mut file = File::open(path).map_err(io)?;
    let before = file.metadata().map_err(io)?;
    let len = before.len();
    too_large(len)?;
    let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    let half = len / 2;
    (&mut file).take(half).read_to_end(&mut bytes).map_err(io)?;
    midway();
    (&mut file)
        .take(
            limit
                .bytes
                .saturating_add(1)
                .saturating_sub(bytes.len() as u64),
        )
        .read_to_end(&mut bytes)
        .map_err(io)?;
    too_large(bytes.len() as u64)?;
    if before.is_file() && changed(path, &file, &before, &bytes).map_err(io)? {
        return Err(FileError::Changed {
            path: path.to_owned(),
        });
    }
    Ok(bytes)
}

/// Whether the regular file `file` (opened at `path`, `before` its metadata
/// at the start) changed while `bytes` were read from it: another length or
/// change time now, `path` naming another file, or a second read of the
/// same bytes differing (a writer within the file system's time
/// granularity leaves the times as they were).
fn changed(path: &Path, file: &File, before: &fs::Metadata, bytes: &[u8]) -> std::io::Result<bool> {
    let after = file.metadata()?;
    let stamp = |m: &fs::Metadata| (m.len(), m.modified().ok());
    if bytes.len() as u64 != before.len() || stamp(&after) != stamp(before) {
        return Ok(true);
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::{FileExt as _, MetadataExt as _};
        if before.ctime() != after.ctime() || before.ctime_nsec() != after.ctime_nsec() {
            return Ok(true);
        }
        // Replaced by a rename: the bytes are whole, but of the old file.
        match fs::metadata(path) {
            Ok(now) if (now.dev(), now.ino()) == (before.dev(), before.ino()) => {}
            _ => return Ok(true),
        }
        let mut again = vec![0u8; bytes.len().min(1 << 20)];
        let mut offset = 0usize;
        while offset < bytes.len() {
            let n = again.len().min(bytes.len() - offset);
            file.read_exact_at(&mut again[..n], offset as u64)?;
            if again[..n] != bytes[offset..offset + n] {
                return Ok(true);
            }
            offset += n;
        }
    }
    #[cfg(not(unix))]
    let _ = path;
    Ok(false)
}

/// Whether `a` and `b` name the same existing file: the same path, another
/// spelling of it (`..`, `./`), a symbolic or hard link to it. A path that
/// does not exist is no other file.
pub fn same_file(a: &Path, b: &Path) -> bool {
    let (Ok(ma), Ok(mb)) = (fs::metadata(a), fs::metadata(b)) else {
        return false;
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt as _;
        let _ = (&ma, &mb);
        ma.dev() == mb.dev() && ma.ino() == mb.ino()
    }
    #[cfg(not(unix))]
    {
        let _ = (ma, mb);
        matches!((fs::canonicalize(a), fs::canonicalize(b)), (Ok(x), Ok(y)) if x == y)
    }
}

/// Returns `__metadata__` (empty if absent) once the header parses and every
/// tensor's bytes are present.
fn precheck(bytes: &[u8]) -> Result<HashMap<String, String>, FileError> {
    let truncated = |part: String, needed: usize| FileError::Truncated {
        part,
        needed,
        len: bytes.len(),
    };
    let Some(prefix) = bytes.first_chunk::<8>() else {
        return Err(truncated("the 8-byte header length".into(), 8));
    };
    let n = u64::from_le_bytes(*prefix);
    let header_end = usize::try_from(n).ok().and_then(|n| n.checked_add(8));
    let Some(header) = header_end.and_then(|end| bytes.get(8..end)) else {
        let needed = header_end.unwrap_or(usize::MAX);
        return Err(truncated(format!("the {n}-byte header"), needed));
    };
    let header_end = 8 + header.len();
    let bad = |reason: String| FileError::Header { reason };
    let text = std::str::from_utf8(header).map_err(|e| bad(format!("not UTF-8: {e}")))?;
    let json: Value = serde_json::from_str(text).map_err(|e| bad(format!("invalid JSON: {e}")))?;
    let Value::Object(entries) = json else {
        return Err(bad("the header must be a JSON object".into()));
    };
    let mut ends = Vec::new();
    let mut metadata = HashMap::new();
    for (name, entry) in &entries {
        if name == "__metadata__" {
            let strings = entry.as_object().and_then(|m| {
                m.iter()
                    .map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                    .collect::<Option<HashMap<_, _>>>()
            });
            metadata =
                strings.ok_or_else(|| bad("__metadata__ must map names to strings".into()))?;
            continue;
        }
        let offsets = entry.get("data_offsets").and_then(Value::as_array);
        let end = match offsets.map(Vec::as_slice) {
            Some([start, end]) => start.as_u64().zip(end.as_u64()).map(|(_, end)| end),
            _ => None,
        };
        let Some(end) = end.and_then(|e| usize::try_from(e).ok()) else {
            return Err(bad(format!(
                "tensor `{name}` needs `data_offsets` [start, end]"
            )));
        };
        ends.push((end, name));
    }
    ends.sort();
    if let Some((end, name)) = ends
        .into_iter()
        .find(|&(end, _)| header_end.saturating_add(end) > bytes.len())
    {
        return Err(truncated(
            format!("tensor `{name}`"),
            header_end.saturating_add(end),
        ));
    }
    Ok(metadata)
}

fn st_dtype(dtype: DType) -> Dtype {
    match dtype {
        DType::Bf16 => Dtype::BF16,
        DType::F32 => Dtype::F32,
        DType::I32 => Dtype::I32,
    }
}

fn from_st_dtype(dtype: Dtype) -> Option<DType> {
    match dtype {
        Dtype::BF16 => Some(DType::Bf16),
        Dtype::F32 => Some(DType::F32),
        Dtype::I32 => Some(DType::I32),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file() -> Vec<u8> {
        let t = HostTensor::new(vec![bf16::from_f32(1.5), bf16::from_f32(-2.0)], vec![2]).unwrap();
        let tensors = [NamedTensor::of("t", &t), NamedTensor::scalar("s", 0.25)];
        let metadata = HashMap::from([("format".to_string(), "test/1".to_string())]);
        serialize(&tensors, metadata).unwrap()
    }

    #[test]
    fn tensors_and_metadata_round_trip() {
        let bytes = file();
        let f = TensorFile::parse(&bytes).unwrap();
        assert_eq!(f.metadata()["format"], "test/1");
        let t = f.tensor("t", &[DType::Bf16]).unwrap().unwrap();
        assert_eq!(t.values(), [1.5, -2.0]);
        assert_eq!(
            f.tensor("s", &[DType::F32]).unwrap().unwrap().shape(),
            [0usize; 0]
        );
        assert!(f.tensor("absent", &[DType::F32]).unwrap().is_none());
        let err = f.tensor("t", &[DType::F32, DType::I32]).err().unwrap();
        assert_eq!(
            err.to_string(),
            "tensor `t` has dtype BF16; expected F32 or I32"
        );
    }

    #[test]
    fn truncation_is_named() {
        let bytes = file();
        let err = TensorFile::parse(&bytes[..bytes.len() - 1]).err().unwrap();
        assert!(
            matches!(err, FileError::Truncated { ref part, .. } if part.starts_with("tensor")),
            "{err}"
        );
        let err = TensorFile::parse(&bytes[..4]).err().unwrap();
        assert!(err.to_string().contains("8-byte header length"), "{err}");
    }

    /// Issue 32 item 8: a file torn by a writer (one tensor's bytes from
    /// another version) that no longer changes while it is read is caught by
    /// its checksum.
    #[test]
    fn a_torn_file_fails_its_checksum() {
        let bytes = file();
        let f = TensorFile::parse(&bytes).unwrap();
        assert!(f.metadata()[CHECKSUM_KEY].starts_with("mix64:"));
        f.verify_checksum().unwrap();
        // The last byte is tensor data: flip it.
        let mut torn = bytes.clone();
        *torn.last_mut().unwrap() ^= 1;
        let e = TensorFile::parse(&torn)
            .unwrap()
            .verify_checksum()
            .unwrap_err();
        assert!(matches!(e, FileError::Checksum { .. }), "{e}");
        assert!(e.to_string().contains("changed while it was read"), "{e}");
    }

    #[test]
    fn short_data_is_rejected_when_serialising() {
        let bad = NamedTensor::f32("x", &[3], &[1.0, 2.0]);
        assert!(matches!(
            serialize(&[bad], HashMap::new()),
            Err(FileError::Safetensors(_))
        ));
    }

    #[test]
    fn a_failed_atomic_write_leaves_nothing_behind() {
        let dir = std::env::temp_dir().join(format!("kda-host-atomic-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        // The folder is gone: creating the temporary fails, nothing stays.
        let target = dir.join("gone/taken");
        assert!(matches!(
            write_atomic(&target, b"x"),
            Err(FileError::Io { .. })
        ));
        // The target is a folder: refused before a temporary is made.
        let target = dir.join("taken");
        fs::create_dir_all(target.join("inner")).unwrap();
        assert!(matches!(
            write_atomic(&target, b"x"),
            Err(FileError::Output { .. })
        ));
        assert_eq!(fs::read_dir(&dir).unwrap().count(), 1);
        fs::remove_dir_all(&dir).unwrap();
    }

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("kda-host-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn outputs_are_checked_before_the_work() {
        let dir = scratch("check-output");
        check_output(&dir.join("new.safetensors")).unwrap();
        let e = check_output(&dir.join("no/such/f")).unwrap_err();
        assert!(matches!(e, FileError::Output { .. }), "{e}");
        let e = check_output(&dir).unwrap_err();
        assert!(e.to_string().contains("is a folder"), "{e}");
        // The probe leaves nothing behind.
        assert_eq!(fs::read_dir(&dir).unwrap().count(), 0);
        fs::remove_dir_all(&dir).unwrap();
    }

    /// Issue 32 item 8: a case file rewritten in place or replaced while it
    /// is read was returned torn (half old, half new) and reported as a
    /// kernel mismatch; now the read fails, saying the file changed.
    #[test]
    fn a_file_changed_while_read_is_refused() {
        let dir = scratch("changed");
        let path = dir.join("case");
        let limit = CaseLimit {
            bytes: 1 << 20,
            basis: "a test".into(),
        };
        let old = vec![1u8; 4096];
        fs::write(&path, &old).unwrap();
        assert_eq!(read_observed(&path, &limit, &mut || {}).unwrap(), old);
        // Rewritten in place, same length (what a non-atomic writer does).
        let e = read_observed(&path, &limit, &mut || {
            fs::write(&path, vec![2u8; 4096]).unwrap();
        })
        .unwrap_err();
        assert!(matches!(e, FileError::Changed { .. }), "{e}");
        assert!(e.to_string().contains("changed while it was read"), "{e}");
        // Only the second half changed, with the old times put back (a
        // writer within the time granularity): the second read sees it.
        fs::write(&path, &old).unwrap();
        let e = read_observed(&path, &limit, &mut || {
            let times = fs::metadata(&path).unwrap().modified().unwrap();
            let mut f = fs::OpenOptions::new().write(true).open(&path).unwrap();
            std::io::Seek::seek(&mut f, std::io::SeekFrom::Start(4000)).unwrap();
            std::io::Write::write_all(&mut f, &[9u8; 96]).unwrap();
            f.set_modified(times).unwrap();
        })
        .unwrap_err();
        assert!(matches!(e, FileError::Changed { .. }), "{e}");
        // Replaced by a rename: the bytes are of a file no longer there.
        fs::write(&path, &old).unwrap();
        let e = read_observed(&path, &limit, &mut || {
            let other = dir.join("other");
            fs::write(&other, vec![3u8; 4096]).unwrap();
            fs::rename(&other, &path).unwrap();
        })
        .unwrap_err();
        assert!(matches!(e, FileError::Changed { .. }), "{e}");
        // Grown past what was read.
        fs::write(&path, &old).unwrap();
        let e = read_observed(&path, &limit, &mut || {
            let mut f = fs::OpenOptions::new().append(true).open(&path).unwrap();
            std::io::Write::write_all(&mut f, b"more").unwrap();
        })
        .unwrap_err();
        assert!(matches!(e, FileError::Changed { .. }), "{e}");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn same_file_sees_through_spellings_and_links() {
        let dir = scratch("same-file");
        let a = dir.join("a");
        fs::write(&a, b"x").unwrap();
        fs::create_dir_all(dir.join("sub")).unwrap();
        assert!(same_file(&a, &a));
        assert!(same_file(&a, &dir.join("sub/../a")));
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(&a, dir.join("link")).unwrap();
            assert!(same_file(&a, &dir.join("link")));
        }
        fs::hard_link(&a, dir.join("hard")).unwrap();
        assert!(same_file(&a, &dir.join("hard")));
        fs::write(dir.join("b"), b"x").unwrap();
        assert!(!same_file(&a, &dir.join("b")));
        assert!(!same_file(&a, &dir.join("absent")));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn reads_are_bounded() {
        let dir = scratch("read-limited");
        let path = dir.join("big");
        // Sparse: a terabyte that takes no disk and must not be read.
        let f = File::create(&path).unwrap();
        f.set_len(1 << 40).unwrap();
        let limit = CaseLimit {
            bytes: 1 << 20,
            basis: "a test".into(),
        };
        let e = read_limited(&path, &limit).unwrap_err();
        assert!(matches!(e, FileError::TooLarge { .. }), "{e}");
        assert!(e.to_string().contains("the limit is 1.0 MiB"), "{e}");
        f.set_len(10).unwrap();
        assert_eq!(read_limited(&path, &limit).unwrap(), [0; 10]);
        #[cfg(unix)]
        {
            // A device has no length: reading stops one byte past the limit.
            let e = read_limited(Path::new("/dev/zero"), &limit).unwrap_err();
            assert!(matches!(e, FileError::TooLarge { .. }), "{e}");
        }
        fs::remove_dir_all(&dir).unwrap();
    }
}
