//! The compile cache on disk: the driver's cubin for a PTX text, so that a
//! second process loads it instead of running the JIT (ptxas) again.
//!
//! This module is the pure part: where the cache lives (environment
//! variables), the key, the entry file format, atomic writes and eviction.
//! It makes no driver call; `module.rs` derives the key from the device and
//! produces the cubin.
//!
//! An entry is one file per PTX text and architecture,
//! `<hex of SHA-256 of both>.kdac`: a driver update or other JIT options
//! find the old entry, name the field that changed
//! ([`Lookup::Rejected`]) and replace it, rather than leave it to eviction.
//!
//!
//! ```text
//! magic "KDACUBIN" | format version u32 | key digest [32]
//! | PTX sha256 [32] | driver version i32 | arch length u16 | JIT options length u16
//! | arch | JIT options | log length u64 | cubin length u64 | payload sha256 [32]
//! | JIT info log (UTF-8) | cubin
//! ```
//!
//! (integers little-endian; the payload checksum covers log and cubin). An
//! entry that is truncated, damaged, of another format version or of another
//! key is ignored, and the load that missed replaces it. Writes go to a
//! temporary file in the same directory, renamed over the entry when
//! complete, so no reader sees half an entry. No filesystem error here
//! panics: each is returned as a reason, and the caller loads without the
//! cache.

use std::ffi::OsString;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use sha2::{Digest, Sha256};

/// `KDA_CACHE_MAX_MB` when unset: the bound on the cache directory's size.
pub const DEFAULT_MAX_MB: u64 = 512;
/// The extension of entry files; nothing else in the directory is evicted
/// (except stale temporary files of crashed writers).
pub const ENTRY_EXT: &str = "kdac";

const MAGIC: [u8; 8] = *b"KDACUBIN";
/// Bumped when the entry layout changes: older entries are then ignored.
const FORMAT_VERSION: u32 = 1;
/// A temporary file older than this is a crashed writer's, and eviction removes it.
const STALE_TMP: Duration = Duration::from_secs(3600);

/// What a cached cubin is valid for: the PTX text, the GPU architecture, the
/// driver (its JIT made the cubin) and the JIT options.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CacheKey {
    /// SHA-256 of the PTX text.
    pub ptx_sha256: [u8; 32],
    /// The device's compute capability as `sm_XY`.
    pub arch: String,
    /// `cuDriverGetVersion`, e.g. 12080.
    pub driver: i32,
    /// The JIT options that shape the cubin or the log, as text.
    pub jit_options: String,
}

impl CacheKey {
    /// The key of `ptx` compiled for `arch` by driver `driver` with `jit_options`.
    pub fn new(ptx: &str, arch: &str, driver: i32, jit_options: &str) -> CacheKey {
        CacheKey {
            ptx_sha256: Sha256::digest(ptx.as_bytes()).into(),
            arch: arch.to_string(),
            driver,
            jit_options: jit_options.to_string(),
        }
    }

    /// SHA-256 over every field (length-prefixed, so no two keys share a
    /// byte string) and the format version.
    pub fn digest(&self) -> [u8; 32] {
        let mut h = Sha256::new();
        h.update(MAGIC);
        h.update(FORMAT_VERSION.to_le_bytes());
        h.update(self.ptx_sha256);
        h.update((self.arch.len() as u64).to_le_bytes());
        h.update(self.arch.as_bytes());
        h.update(self.driver.to_le_bytes());
        h.update((self.jit_options.len() as u64).to_le_bytes());
        h.update(self.jit_options.as_bytes());
        h.finalize().into()
    }

    /// The entry's file name: SHA-256 of the PTX hash and the arch in hex,
    /// then `.kdac`. The driver version and JIT options are not in it: an
    /// entry of another driver or other options has the same name, is
    /// rejected naming that field, and is replaced.
    pub fn file_name(&self) -> String {
        let mut h = Sha256::new();
        h.update(self.ptx_sha256);
        h.update((self.arch.len() as u64).to_le_bytes());
        h.update(self.arch.as_bytes());
        format!("{}.{ENTRY_EXT}", hex(&h.finalize()))
    }

    /// The first field in which `other` differs from `self`, named for a
    /// message ("the driver version (12080, entry 12040)").
    fn first_difference(&self, other: &CacheKey) -> Option<String> {
        if self.ptx_sha256 != other.ptx_sha256 {
            Some("the PTX hash".into())
        } else if self.arch != other.arch {
            Some(format!("the arch ({}, entry {})", self.arch, other.arch))
        } else if self.driver != other.driver {
            Some(format!(
                "the driver version ({}, entry {})",
                self.driver, other.driver
            ))
        } else if self.jit_options != other.jit_options {
            Some(format!(
                "the JIT options ({:?}, entry {:?})",
                self.jit_options, other.jit_options
            ))
        } else {
            None
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// What an entry holds besides its key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The JIT's info log of the compile that made the cubin.
    pub log: String,
    /// The cubin (an ELF image `cuModuleLoadData` accepts).
    pub cubin: Vec<u8>,
}

/// The bytes of the entry file for `key`.
pub fn encode(key: &CacheKey, log: &str, cubin: &[u8]) -> Vec<u8> {
    let mut payload = Sha256::new();
    payload.update(log.as_bytes());
    payload.update(cubin);
    let checksum: [u8; 32] = payload.finalize().into();
    // The key's text fields are bounded by u16 lengths; longer ones are
    // cut (they would then not match, so the entry is never read back).
    let arch = &key.arch.as_bytes()[..key.arch.len().min(u16::MAX as usize)];
    let opts = &key.jit_options.as_bytes()[..key.jit_options.len().min(u16::MAX as usize)];
    let mut out = Vec::with_capacity(160 + arch.len() + opts.len() + log.len() + cubin.len());
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&key.digest());
    out.extend_from_slice(&key.ptx_sha256);
    out.extend_from_slice(&key.driver.to_le_bytes());
    out.extend_from_slice(&(arch.len() as u16).to_le_bytes());
    out.extend_from_slice(&(opts.len() as u16).to_le_bytes());
    out.extend_from_slice(arch);
    out.extend_from_slice(opts);
    out.extend_from_slice(&(log.len() as u64).to_le_bytes());
    out.extend_from_slice(&(cubin.len() as u64).to_le_bytes());
    out.extend_from_slice(&checksum);
    out.extend_from_slice(log.as_bytes());
    out.extend_from_slice(cubin);
    out
}

/// Reads an entry's fields front to back; every read checks the length.
struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: u64) -> Result<&'a [u8], String> {
        let n = usize::try_from(n)
            .ok()
            .filter(|&n| n <= self.bytes.len())
            .ok_or_else(|| "truncated".to_string())?;
        let (head, tail) = self.bytes.split_at(n);
        self.bytes = tail;
        Ok(head)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], String> {
        Ok(self.take(N as u64)?.try_into().expect("took N bytes"))
    }
}

/// The entry in `bytes` if it is whole, of this format and of `key`; else
/// why not (for the caller's note: "truncated", "payload checksum mismatch", ...).
pub fn decode(bytes: &[u8], key: &CacheKey) -> Result<Entry, String> {
    let mut r = Reader { bytes };
    if r.array::<8>().ok() != Some(MAGIC) {
        return Err("not a kda cache entry (bad magic)".into());
    }
    let version = u32::from_le_bytes(r.array()?);
    if version != FORMAT_VERSION {
        return Err(format!(
            "entry format version {version}, this build reads {FORMAT_VERSION}"
        ));
    }
    let digest: [u8; 32] = r.array()?;
    let stored = CacheKey {
        ptx_sha256: r.array()?,
        driver: i32::from_le_bytes(r.array()?),
        arch: String::new(),
        jit_options: String::new(),
    };
    let arch_len = u16::from_le_bytes(r.array()?);
    let opts_len = u16::from_le_bytes(r.array()?);
    let text = |b: &[u8]| String::from_utf8(b.to_vec()).map_err(|_| "a key field is not UTF-8");
    let stored = CacheKey {
        arch: text(r.take(arch_len.into())?)?,
        jit_options: text(r.take(opts_len.into())?)?,
        ..stored
    };
    if digest != stored.digest() {
        return Err("the key digest does not match the key fields".into());
    }
    if let Some(field) = key.first_difference(&stored) {
        return Err(format!("the entry is for another key: {field} differs"));
    }
    let log_len = u64::from_le_bytes(r.array()?);
    let cubin_len = u64::from_le_bytes(r.array()?);
    let checksum: [u8; 32] = r.array()?;
    let log = r.take(log_len)?;
    let cubin = r.take(cubin_len)?;
    if !r.bytes.is_empty() {
        return Err(format!("{} bytes after the cubin", r.bytes.len()));
    }
    let mut payload = Sha256::new();
    payload.update(log);
    payload.update(cubin);
    if <[u8; 32]>::from(payload.finalize()) != checksum {
        return Err("payload checksum mismatch".into());
    }
    let log = String::from_utf8(log.to_vec()).map_err(|_| "the log is not UTF-8".to_string())?;
    Ok(Entry {
        log,
        cubin: cubin.to_vec(),
    })
}

/// Where the cache lives and how large it may grow, from the environment
/// (`var` reads one variable, so tests pass their own):
///
/// * it is **opt-in**: `KDA_CACHE=1` (or `on`, `true`, `yes`, `cubin`)
///   turns it on; unset or `0` (`off`, `false`, `no`) leaves it off. The
///   driver's linker (`cuLink*`), the only driver route to a cubin, compiles
///   PTX as relocatable code, and measured on the H200 that costs registers
///   and time (KdaSplit H12 B128: 96 → 166 registers, 58.6 → 74.8 µs;
///   `docs/perf.md`); without it modules are JIT-loaded with
///   `cuModuleLoadDataEx`, whose results the driver's own compute cache
///   (`~/.nv/ComputeCache`, `CUDA_CACHE_PATH`) keeps across processes;
/// * the directory is `$KDA_CACHE_DIR`, else `$XDG_CACHE_HOME/kda/modules`,
///   else `$HOME/.cache/kda/modules` (empty variables count as unset, and
///   `XDG_CACHE_HOME` must be absolute, as the XDG spec says);
/// * `KDA_CACHE_MAX_MB` (default [`DEFAULT_MAX_MB`]) bounds its size in MiB;
///   0 disables it.
///
/// `Err` says why there is no cache.
pub fn settings_from(var: impl Fn(&str) -> Option<OsString>) -> Result<(PathBuf, u64), String> {
    let set = |name: &str| var(name).filter(|v| !v.is_empty());
    match set("KDA_CACHE") {
        None => {
            return Err(
                "off unless KDA_CACHE=1: the driver's linker compiles PTX as \
                        relocatable code (more registers, slower kernels); the driver's JIT \
                        cache serves later processes"
                    .into(),
            );
        }
        Some(v) => {
            let v = v.to_string_lossy().trim().to_ascii_lowercase();
            if matches!(v.as_str(), "0" | "off" | "false" | "no") {
                return Err(format!("disabled by KDA_CACHE={v}"));
            }
            if !matches!(v.as_str(), "1" | "on" | "true" | "yes" | "cubin") {
                return Err(format!("KDA_CACHE={v}: expected 1 (on) or 0 (off)"));
            }
        }
    }
    let max_mb = match set("KDA_CACHE_MAX_MB") {
        None => DEFAULT_MAX_MB,
        Some(v) => match v.to_string_lossy().trim().parse::<u64>() {
            Ok(0) => return Err("disabled by KDA_CACHE_MAX_MB=0".into()),
            Ok(mb) => mb,
            Err(_) => {
                return Err(format!(
                    "KDA_CACHE_MAX_MB={} is not a whole number of MiB",
                    v.to_string_lossy()
                ));
            }
        },
    };
    let dir = if let Some(dir) = set("KDA_CACHE_DIR") {
        PathBuf::from(dir)
    } else if let Some(xdg) = set("XDG_CACHE_HOME").filter(|v| Path::new(v).is_absolute()) {
        PathBuf::from(xdg).join("kda").join("modules")
    } else if let Some(home) = set("HOME") {
        PathBuf::from(home)
            .join(".cache")
            .join("kda")
            .join("modules")
    } else {
        return Err(
            "no cache directory: none of KDA_CACHE_DIR, XDG_CACHE_HOME, HOME is set".into(),
        );
    };
    Ok((dir, max_mb.saturating_mul(1 << 20)))
}

/// The process's disk cache, read from the environment at the first call
/// ([`settings_from`]) and kept for the process, or why there is none.
/// Every module a [`CudaDevice`](crate::CudaDevice) loads goes through it.
pub fn current() -> Result<&'static DiskCache, &'static str> {
    static CACHE: OnceLock<Result<DiskCache, String>> = OnceLock::new();
    CACHE
        .get_or_init(DiskCache::from_env)
        .as_ref()
        .map_err(String::as_str)
}

/// What a lookup found.
#[derive(Debug, PartialEq, Eq)]
pub enum Lookup {
    /// A whole entry of the key.
    Hit(Entry),
    /// No entry file.
    Absent,
    /// An entry file that cannot be used, and why (it will be replaced).
    Rejected(String),
}

/// A cache directory and its size bound.
#[derive(Clone, Debug)]
pub struct DiskCache {
    dir: PathBuf,
    max_bytes: u64,
}

impl DiskCache {
    /// The cache at `dir` (created if missing), bounded to `max_bytes`, or
    /// why it cannot be used.
    pub fn open(dir: PathBuf, max_bytes: u64) -> Result<DiskCache, String> {
        fs::create_dir_all(&dir)
            .map_err(|e| format!("cannot create the cache directory {}: {e}", dir.display()))?;
        if !dir.is_dir() {
            return Err(format!("{} is not a directory", dir.display()));
        }
        Ok(DiskCache { dir, max_bytes })
    }

    /// The cache the environment names ([`settings_from`]), or why there is none.
    pub fn from_env() -> Result<DiskCache, String> {
        let (dir, max_bytes) = settings_from(|name| std::env::var_os(name))?;
        DiskCache::open(dir, max_bytes)
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The size bound in bytes.
    pub fn max_bytes(&self) -> u64 {
        self.max_bytes
    }

    /// The entry file of `key`.
    pub fn path(&self, key: &CacheKey) -> PathBuf {
        self.dir.join(key.file_name())
    }

    /// The entry of `key`. A hit refreshes the file's modification time, so
    /// eviction removes the least recently used entries first.
    pub fn lookup(&self, key: &CacheKey) -> Lookup {
        let path = self.path(key);
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Lookup::Absent,
            Err(e) => return Lookup::Rejected(format!("cannot read {}: {e}", path.display())),
        };
        match decode(&bytes, key) {
            Ok(entry) => {
                // A read-only cache still serves hits; the time is a hint.
                let _ = fs::File::options()
                    .write(true)
                    .open(&path)
                    .and_then(|f| f.set_modified(SystemTime::now()));
                Lookup::Hit(entry)
            }
            Err(why) => Lookup::Rejected(why),
        }
    }

    /// Write the entry of `key` (replacing any), then evict the oldest
    /// entries while the directory exceeds the bound. `Err` says why the
    /// entry was not written; eviction failures are not errors.
    pub fn store(&self, key: &CacheKey, log: &str, cubin: &[u8]) -> Result<(), String> {
        let name = key.file_name();
        let bytes = encode(key, log, cubin);
        if bytes.len() as u64 > self.max_bytes {
            return Err(format!(
                "the entry ({} bytes) exceeds the cache bound ({} bytes)",
                bytes.len(),
                self.max_bytes
            ));
        }
        write_atomic(&self.dir, &name, |f| f.write_all(&bytes))
            .map_err(|e| format!("cannot write {}: {e}", self.dir.join(&name).display()))?;
        let _ = evict(&self.dir, self.max_bytes, Some(&name));
        Ok(())
    }
}

/// Distinguishes temporary files of one process (several devices may store
/// at once).
static TMP_SEQ: AtomicU64 = AtomicU64::new(0);

/// Write `dir/name` atomically: `write` fills `.<name>.tmp.<pid>.<n>` in the
/// same directory, which is then flushed and renamed over `name`. On any
/// error the temporary file is removed and `name` is left as it was.
pub fn write_atomic(
    dir: &Path,
    name: &str,
    write: impl FnOnce(&mut fs::File) -> io::Result<()>,
) -> io::Result<()> {
    let seq = TMP_SEQ.fetch_add(1, Ordering::Relaxed);
    let tmp = dir.join(format!(".{name}.tmp.{}.{seq}", std::process::id()));
    let result = (|| {
        let mut f = fs::File::options()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        write(&mut f)?;
        f.sync_all()?;
        drop(f);
        fs::rename(&tmp, dir.join(name))
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

fn is_tmp(name: &str) -> bool {
    name.starts_with('.') && name.contains(".tmp.")
}

/// While the entries of `dir` (files `*.kdac`) take more than `max_bytes`,
/// remove the one modified longest ago (ties by name), never `keep`; also
/// remove temporary files older than an hour (crashed writers). Returns the
/// entries removed, oldest first. Entries that vanish meanwhile (another
/// process evicting) are skipped.
pub fn evict(dir: &Path, max_bytes: u64, keep: Option<&str>) -> io::Result<Vec<PathBuf>> {
    let now = SystemTime::now();
    let mut entries = Vec::new();
    let mut total = 0u64;
    for item in fs::read_dir(dir)? {
        let Ok(item) = item else { continue };
        let Ok(meta) = item.metadata() else { continue };
        if !meta.is_file() {
            continue;
        }
        let name = item.file_name().to_string_lossy().into_owned();
        let mtime = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
        if is_tmp(&name) {
            if now.duration_since(mtime).is_ok_and(|age| age > STALE_TMP) {
                let _ = fs::remove_file(item.path());
            }
            continue;
        }
        if !name.ends_with(&format!(".{ENTRY_EXT}")) {
            continue;
        }
        total += meta.len();
        entries.push((mtime, name, meta.len()));
    }
    entries.sort();
    let mut removed = Vec::new();
    for (_, name, len) in entries {
        if total <= max_bytes {
            break;
        }
        if Some(name.as_str()) == keep {
            continue;
        }
        let path = dir.join(&name);
        match fs::remove_file(&path) {
            Ok(()) => removed.push(path),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(_) => continue,
        }
        total = total.saturating_sub(len);
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// A fresh directory under the target's temp dir, removed on drop.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(tag: &str) -> TempDir {
            let seq = TMP_SEQ.fetch_add(1, Ordering::Relaxed);
            let dir = std::env::temp_dir().join(format!(
                "kda-disk-cache-test-{tag}-{}-{seq}",
                std::process::id()
            ));
            let _ = fs::remove_dir_all(&dir);
            fs::create_dir_all(&dir).unwrap();
            TempDir(dir)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    fn files(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    fn key() -> CacheKey {
        CacheKey::new(".version 8.1\n.target sm_90a\n", "sm_90", 12080, "verbose")
    }

    #[test]
    fn every_key_field_changes_the_key() {
        let base = key();
        let variants = [
            CacheKey::new(
                ".version 8.1\n.target sm_90a\n\n",
                "sm_90",
                12080,
                "verbose",
            ),
            CacheKey::new(".version 8.1\n.target sm_90a\n", "sm_100", 12080, "verbose"),
            CacheKey::new(".version 8.1\n.target sm_90a\n", "sm_90", 12090, "verbose"),
            CacheKey::new(".version 8.1\n.target sm_90a\n", "sm_90", 12080, "quiet"),
        ];
        for v in &variants {
            assert_ne!(v.digest(), base.digest(), "{v:?}");
        }
        // The PTX and the arch name the file; an entry of another driver or
        // other options is found and rejected naming the field.
        assert_ne!(variants[0].file_name(), base.file_name());
        assert_ne!(variants[1].file_name(), base.file_name());
        for (v, field) in [
            (&variants[2], "driver version"),
            (&variants[3], "JIT options"),
        ] {
            assert_eq!(v.file_name(), base.file_name());
            let why = decode(&encode(&base, "", b""), v).unwrap_err();
            assert!(why.contains(field), "{why}");
        }
        // Stable: the same inputs give the same name, in another process too.
        assert_eq!(key().file_name(), base.file_name());
        assert_eq!(base.file_name().len(), 64 + 1 + ENTRY_EXT.len());
        // Length prefixes: moving a byte between text fields changes the key.
        let a = CacheKey::new("x", "sm_9", 1, "0v");
        let b = CacheKey::new("x", "sm_90", 1, "v");
        assert_ne!(a.digest(), b.digest());
        // The PTX hash is SHA-256 (reference value of "abc").
        assert_eq!(
            hex(&CacheKey::new("abc", "", 0, "").ptx_sha256),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn entries_round_trip() {
        let k = key();
        for (log, cubin) in [
            ("", Vec::new()),
            (
                "ptxas info : Used 32 registers",
                b"\x7fELF\x02\x01\x01".to_vec(),
            ),
            ("é", vec![0u8; 10_000]),
        ] {
            let bytes = encode(&k, log, &cubin);
            let entry = decode(&bytes, &k).unwrap();
            assert_eq!(entry.log, log);
            assert_eq!(entry.cubin, cubin);
        }
    }

    #[test]
    fn damaged_and_foreign_entries_are_rejected() {
        let k = key();
        let good = encode(&k, "log text", b"\x7fELF cubin bytes");
        assert!(decode(&good, &k).is_ok());
        // Every truncation, including the empty file.
        for n in 0..good.len() {
            assert!(decode(&good[..n], &k).is_err(), "truncated to {n}");
        }
        // Every single flipped byte.
        for i in 0..good.len() {
            let mut bad = good.clone();
            bad[i] ^= 0x20;
            assert!(decode(&bad, &k).is_err(), "byte {i} flipped");
        }
        let mut longer = good.clone();
        longer.push(0);
        assert!(decode(&longer, &k).unwrap_err().contains("after the cubin"));
        let mut payload = good.clone();
        *payload.last_mut().unwrap() ^= 1;
        assert_eq!(
            decode(&payload, &k).unwrap_err(),
            "payload checksum mismatch"
        );
        let mut version = good.clone();
        version[8] = 2;
        assert!(
            decode(&version, &k)
                .unwrap_err()
                .contains("format version 2")
        );
        assert!(decode(b"garbage", &k).unwrap_err().contains("bad magic"));
        // A whole entry of another key names the field that differs.
        let other = CacheKey::new(".version 8.1\n.target sm_90a\n", "sm_90", 12040, "verbose");
        let err = decode(&encode(&other, "", b""), &k).unwrap_err();
        assert!(err.contains("driver version (12080, entry 12040)"), "{err}");
    }

    #[test]
    fn store_then_lookup_and_corrupt_entries_are_replaced() {
        let tmp = TempDir::new("store");
        let cache = DiskCache::open(tmp.0.join("a/b"), 1 << 20).unwrap();
        let k = key();
        assert_eq!(cache.lookup(&k), Lookup::Absent);
        cache.store(&k, "the log", b"cubin").unwrap();
        assert_eq!(files(cache.dir()), [k.file_name()]);
        let Lookup::Hit(entry) = cache.lookup(&k) else {
            panic!("no hit")
        };
        assert_eq!(
            (entry.log.as_str(), entry.cubin.as_slice()),
            ("the log", &b"cubin"[..])
        );
        // Damage it: rejected, and a store replaces it.
        let path = cache.path(&k);
        let mut bytes = fs::read(&path).unwrap();
        bytes.truncate(bytes.len() - 2);
        fs::write(&path, &bytes).unwrap();
        let Lookup::Rejected(why) = cache.lookup(&k) else {
            panic!("not rejected")
        };
        assert_eq!(why, "truncated");
        cache.store(&k, "the log", b"cubin").unwrap();
        assert!(matches!(cache.lookup(&k), Lookup::Hit(_)));
        // A driver update: the old entry is found, rejected naming the
        // field, and replaced in place.
        let newer = CacheKey {
            driver: 12090,
            ..k.clone()
        };
        let Lookup::Rejected(why) = cache.lookup(&newer) else {
            panic!("not rejected")
        };
        assert!(
            why.contains("the driver version (12090, entry 12080)"),
            "{why}"
        );
        cache.store(&newer, "new log", b"new cubin").unwrap();
        assert!(matches!(cache.lookup(&newer), Lookup::Hit(_)));
        assert_eq!(files(cache.dir()), [k.file_name()]);
        // An entry larger than the whole bound is not stored.
        let small = DiskCache::open(tmp.0.join("small"), 100).unwrap();
        assert!(
            small
                .store(&k, "", &[0; 200])
                .unwrap_err()
                .contains("exceeds")
        );
        assert!(files(small.dir()).is_empty());
    }

    #[test]
    fn atomic_writes_leave_no_temporary_file() {
        let tmp = TempDir::new("atomic");
        let dir = &tmp.0;
        write_atomic(dir, "e.kdac", |f| f.write_all(b"first")).unwrap();
        assert_eq!(files(dir), ["e.kdac"]);
        // A writer that fails halfway: the old entry stays, no temp file.
        let err = write_atomic(dir, "e.kdac", |f| {
            f.write_all(b"half")?;
            Err(io::Error::other("disk full"))
        })
        .unwrap_err();
        assert_eq!(err.to_string(), "disk full");
        assert_eq!(files(dir), ["e.kdac"]);
        assert_eq!(fs::read(dir.join("e.kdac")).unwrap(), b"first");
        // A rename that fails (the target is a non-empty directory).
        fs::create_dir(dir.join("d.kdac")).unwrap();
        fs::write(dir.join("d.kdac/x"), b"").unwrap();
        assert!(write_atomic(dir, "d.kdac", |f| f.write_all(b"x")).is_err());
        assert_eq!(files(dir), ["d.kdac", "e.kdac"]);
        // A directory that does not exist.
        assert!(write_atomic(&dir.join("missing"), "e.kdac", |_| Ok(())).is_err());
    }

    #[test]
    fn unwritable_directories_degrade_to_reasons() {
        let tmp = TempDir::new("unwritable");
        // A file where the directory should be: open fails with a reason.
        let file = tmp.0.join("file");
        fs::write(&file, b"").unwrap();
        let err = DiskCache::open(file.join("modules"), 1 << 20).unwrap_err();
        assert!(err.contains("cannot create the cache directory"), "{err}");
        // A directory that vanishes after open: store and lookup report, never panic.
        let dir = tmp.0.join("gone");
        let cache = DiskCache::open(dir.clone(), 1 << 20).unwrap();
        fs::remove_dir_all(&dir).unwrap();
        assert!(
            cache
                .store(&key(), "", b"x")
                .unwrap_err()
                .contains("cannot write")
        );
        assert_eq!(cache.lookup(&key()), Lookup::Absent);
        assert!(evict(&dir, 0, None).is_err());
    }

    #[test]
    fn eviction_removes_the_oldest_entries_first() {
        let tmp = TempDir::new("evict");
        let dir = &tmp.0;
        let base = SystemTime::now() - Duration::from_secs(1000);
        // Written in another order than their times.
        for (name, age) in [("c", 3), ("a", 1), ("d", 4), ("b", 2)] {
            let path = dir.join(format!("{name}.kdac"));
            fs::write(&path, [0u8; 100]).unwrap();
            let f = fs::File::options().write(true).open(&path).unwrap();
            f.set_modified(base + Duration::from_secs(age)).unwrap();
        }
        // Not entries: never counted or removed.
        fs::write(dir.join("README"), [0u8; 1000]).unwrap();
        let fresh_tmp = ".x.kdac.tmp.1.0";
        fs::write(dir.join(fresh_tmp), [0u8; 1000]).unwrap();
        let stale_tmp = dir.join(".y.kdac.tmp.1.1");
        fs::write(&stale_tmp, b"").unwrap();
        fs::File::options()
            .write(true)
            .open(&stale_tmp)
            .unwrap()
            .set_modified(base - STALE_TMP)
            .unwrap();

        assert!(evict(dir, 400, None).unwrap().is_empty());
        assert!(!stale_tmp.exists(), "a crashed writer's file is removed");
        let removed = evict(dir, 250, Some("a.kdac")).unwrap();
        let names: Vec<_> = removed
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        // `a` is oldest but kept; then `b` and `c` go.
        assert_eq!(names, ["b.kdac", "c.kdac"]);
        assert_eq!(files(dir), [fresh_tmp, "README", "a.kdac", "d.kdac"]);
    }

    #[test]
    fn store_bounds_the_directory() {
        let tmp = TempDir::new("bound");
        let cache = DiskCache::open(tmp.0.clone(), 3000).unwrap();
        let keys: Vec<CacheKey> = (0..5)
            .map(|i| CacheKey::new(&format!("ptx {i}"), "sm_90", 12080, ""))
            .collect();
        for (i, k) in keys.iter().enumerate() {
            cache.store(k, "", &[i as u8; 1000]).unwrap();
            // Distinct modification times even on coarse filesystems.
            let f = fs::File::options().write(true).open(cache.path(k)).unwrap();
            f.set_modified(SystemTime::now() - Duration::from_secs(100 - i as u64))
                .unwrap();
        }
        // Each entry is a little over 1000 bytes: the last two fit.
        let present: Vec<bool> = keys
            .iter()
            .map(|k| matches!(cache.lookup(k), Lookup::Hit(_)))
            .collect();
        assert_eq!(present, [false, false, false, true, true]);
    }

    fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<OsString> {
        let map: HashMap<String, OsString> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), OsString::from(v)))
            .collect();
        move |name| map.get(name).cloned()
    }

    #[test]
    fn settings_follow_the_environment() {
        let mb = 1u64 << 20;
        assert!(
            settings_from(env(&[("HOME", "/home/u")]))
                .unwrap_err()
                .contains("KDA_CACHE=1")
        );
        let odd = [("HOME", "/home/u"), ("KDA_CACHE", "maybe")];
        assert!(settings_from(env(&odd)).unwrap_err().contains("maybe"));
        let home = [("HOME", "/home/u"), ("KDA_CACHE", "1")];
        assert_eq!(
            settings_from(env(&home)).unwrap(),
            (PathBuf::from("/home/u/.cache/kda/modules"), 512 * mb)
        );
        let xdg = [
            ("HOME", "/home/u"),
            ("XDG_CACHE_HOME", "/xdg"),
            ("KDA_CACHE", "on"),
        ];
        assert_eq!(
            settings_from(env(&xdg)).unwrap().0,
            PathBuf::from("/xdg/kda/modules")
        );
        // A relative or empty XDG_CACHE_HOME is ignored.
        for v in ["rel", ""] {
            let vars = [
                ("HOME", "/home/u"),
                ("XDG_CACHE_HOME", v),
                ("KDA_CACHE", "yes"),
            ];
            assert_eq!(
                settings_from(env(&vars)).unwrap().0,
                PathBuf::from("/home/u/.cache/kda/modules")
            );
        }
        let own = [
            ("HOME", "/home/u"),
            ("XDG_CACHE_HOME", "/xdg"),
            ("KDA_CACHE_DIR", "/c"),
            ("KDA_CACHE_MAX_MB", " 7 "),
            ("KDA_CACHE", "1"),
        ];
        assert_eq!(
            settings_from(env(&own)).unwrap(),
            (PathBuf::from("/c"), 7 * mb)
        );
        for off in ["0", "off", "OFF", "false", "no"] {
            let vars = [("KDA_CACHE_DIR", "/c"), ("KDA_CACHE", off)];
            let why = settings_from(env(&vars)).unwrap_err();
            assert!(why.starts_with("disabled by KDA_CACHE="), "{why}");
        }
        let zero = [
            ("KDA_CACHE_DIR", "/c"),
            ("KDA_CACHE_MAX_MB", "0"),
            ("KDA_CACHE", "1"),
        ];
        assert!(settings_from(env(&zero)).unwrap_err().contains("MAX_MB=0"));
        let bad = [
            ("KDA_CACHE_DIR", "/c"),
            ("KDA_CACHE_MAX_MB", "lots"),
            ("KDA_CACHE", "1"),
        ];
        assert!(settings_from(env(&bad)).unwrap_err().contains("lots"));
        assert!(
            settings_from(env(&[("KDA_CACHE", "1")]))
                .unwrap_err()
                .contains("no cache directory")
        );
    }

    #[test]
    fn from_env_uses_a_given_directory() {
        // Only reads the process environment; the test binary never sets
        // KDA_CACHE_DIR, so this builds the same cache from a temp dir.
        let tmp = TempDir::new("env");
        let dir = tmp.0.join("modules");
        let vars = [("KDA_CACHE_DIR", dir.to_str().unwrap()), ("KDA_CACHE", "1")];
        let (d, max) = settings_from(env(&vars)).unwrap();
        let cache = DiskCache::open(d, max).unwrap();
        assert_eq!(cache.dir(), dir);
        assert_eq!(cache.max_bytes(), DEFAULT_MAX_MB << 20);
        assert!(dir.is_dir());
    }
}
