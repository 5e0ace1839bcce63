//! The one writer of every file the tools write (case files, results, PTX,
//! bench JSON, tuned tables): [`write_atomic`], with [`check_output`] run
//! before the work so a long run does not fail at its end.
//!
//! What a target gets (issue 32 item 1):
//!
//! - a regular file, or a new name: the bytes go to a hidden temporary file
//!   beside it, synced, then renamed over it, so a reader sees the old file
//!   or the whole new one. An existing file keeps its mode and owner (the
//!   owner as far as the process may set it: root always can).
//! - a symbolic link: followed to the file it finally names (a dangling link
//!   to the name it would create), and that file is replaced as above; the
//!   link stays a link.
//! - a character device, a FIFO or a pipe (`/dev/null`, `mkfifo`, process
//!   substitution's `/dev/fd/N`): written through, never replaced.
//! - `/dev/stdout`, `/dev/stderr`, `/dev/fd/N`, `/proc/self/fd/N` naming one
//!   of the process's open descriptors: written through that descriptor,
//!   whatever is behind it (`-o /dev/stdout >> log` appends to the log
//!   instead of replacing it).
//! - a folder, a block device, a socket: refused.
//!
//! The temporary files are named `.NAME.kda-tmp.PID.N` (issue 32 item 2).
//! A process that calls [`remove_temporaries_on_signals`] removes its own
//! on SIGINT and SIGTERM before dying of the signal; a write removes the
//! ones beside its target left by processes that no longer run (killed by
//! SIGKILL, a power cut).

use std::fs::{self, File, Metadata, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use crate::case::FileError;

/// The marker in every temporary file's name: `.NAME.kda-tmp.PID.N`.
pub const TEMP_MARKER: &str = ".kda-tmp.";

/// Most symbolic links followed to a target (Linux's own limit).
const MAX_LINKS: usize = 40;

/// Where the bytes for a path go.
#[derive(Debug)]
enum Target {
    /// A regular file at `path` (links resolved), `existing` if there is one.
    File {
        path: PathBuf,
        existing: Option<Metadata>,
    },
    /// A character device, FIFO or pipe: opened and written in place.
    Stream { path: PathBuf },
    /// One of this process's open file descriptors (`/dev/stdout`,
    /// `/dev/stderr`, `/dev/fd/N`, `/proc/self/fd/N`): written through it,
    /// at its offset and in its mode (`>> log` appends), whatever it is.
    #[cfg(unix)]
    Descriptor { fd: std::os::fd::RawFd },
}

/// The descriptor `path` names, if it is one of this process's open ones
/// under a name that means "this descriptor" (not the file behind it).
#[cfg(unix)]
fn own_descriptor(path: &Path) -> Option<std::os::fd::RawFd> {
    let text = path.to_str()?;
    let fd: std::os::fd::RawFd = match text {
        "/dev/stdout" => 1,
        "/dev/stderr" => 2,
        _ => text
            .strip_prefix("/dev/fd/")
            .or_else(|| text.strip_prefix("/proc/self/fd/"))?
            .parse()
            .ok()?,
    };
    // SAFETY: F_GETFL only reads the descriptor's flags; -1 if it is closed.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    let writable = flags != -1 && matches!(flags & libc::O_ACCMODE, libc::O_WRONLY | libc::O_RDWR);
    writable.then_some(fd)
}

fn refuse(path: &Path, reason: impl Into<String>) -> FileError {
    FileError::Output {
        path: path.to_owned(),
        reason: reason.into(),
    }
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> FileError {
    let path = path.to_owned();
    move |source| FileError::Io { path, source }
}

/// What `path` names once every link is followed.
fn resolve(path: &Path) -> Result<Target, FileError> {
    if path.file_name().is_none() {
        return Err(refuse(path, "names no file"));
    }
    #[cfg(unix)]
    if let Some(fd) = own_descriptor(path) {
        return Ok(Target::Descriptor { fd });
    }
    match fs::metadata(path) {
        Ok(m) if m.is_file() => {
            // Through every link (in the folders too) to the file itself.
            let real = fs::canonicalize(path).map_err(io_error(path))?;
            Ok(Target::File {
                path: real,
                existing: Some(m),
            })
        }
        Ok(m) if m.is_dir() => Err(refuse(path, "is a folder")),
        Ok(m) => special(path, &m),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Target::File {
            path: dangling_end(path)?,
            existing: None,
        }),
        Err(e) => Err(refuse(path, e.to_string())),
    }
}

/// A target that is neither a file nor a folder: written through if it is
/// a stream, else refused.
fn special(path: &Path, m: &Metadata) -> Result<Target, FileError> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt as _;
        let t = m.file_type();
        if t.is_char_device() || t.is_fifo() {
            return Ok(Target::Stream {
                path: path.to_owned(),
            });
        }
        if t.is_block_device() {
            return Err(refuse(
                path,
                "is a block device (a disk): refusing to write it",
            ));
        }
        if t.is_socket() {
            return Err(refuse(path, "is a socket"));
        }
    }
    let _ = m;
    Err(refuse(path, "is not a regular file, a device or a FIFO"))
}

/// The name a chain of links ending nowhere would create (`path` itself if
/// it is no link).
fn dangling_end(path: &Path) -> Result<PathBuf, FileError> {
    let mut p = path.to_owned();
    for _ in 0..MAX_LINKS {
        match fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => {
                let to = fs::read_link(&p).map_err(io_error(&p))?;
                p = if to.is_absolute() {
                    to
                } else {
                    folder_of(&p).join(to)
                };
            }
            _ => return Ok(p),
        }
    }
    Err(refuse(path, "too many levels of symbolic links"))
}

/// The folder a file at `path` goes in (`.` for a bare name).
pub(crate) fn folder_of(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// The temporary files this process has open, removed on SIGINT / SIGTERM
/// once [`remove_temporaries_on_signals`] is on. Held only to create or
/// forget one; the signal thread holds it to the end, so none is created
/// after it has cleaned up.
static LIVE: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

fn live() -> MutexGuard<'static, Vec<PathBuf>> {
    LIVE.lock().unwrap_or_else(|e| e.into_inner())
}

fn forget(temp: &Path) {
    live().retain(|p| p != temp);
}

/// `.NAME.kda-tmp.` for the file `name`.
fn temp_prefix(name: &str) -> String {
    format!(".{name}{TEMP_MARKER}")
}

/// Creates a fresh temporary file beside `path` (`.NAME.kda-tmp.PID.N`) and
/// registers it for removal on a signal. `private`: readable only by its
/// owner until [`keep_mode_and_owner`] gives it the old file's mode (else
/// 0666 less the umask, as a plain create).
fn create_temp(path: &Path, private: bool) -> Result<(PathBuf, File), FileError> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let name = path
        .file_name()
        .map_or_else(|| "out".into(), |n| n.to_string_lossy().into_owned());
    let mut live = live();
    loop {
        let temp = path.with_file_name(format!(
            "{}{}.{}",
            temp_prefix(&name),
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let mut options = OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt as _;
            options.mode(if private { 0o600 } else { 0o666 });
        }
        match options.open(&temp) {
            Ok(file) => {
                live.push(temp.clone());
                return Ok((temp, file));
            }
            // Left by an earlier process of this pid: take the next number.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => {
                return Err(FileError::Io {
                    path: temp,
                    source: e,
                });
            }
        }
    }
}

/// Whether process `pid` is running (on non-Unix systems: assumed so).
fn running(pid: u32) -> bool {
    if pid == std::process::id() {
        return true;
    }
    #[cfg(unix)]
    {
        let Ok(pid) = libc::pid_t::try_from(pid) else {
            return false;
        };
        // SAFETY: signal 0 only checks that the process exists.
        let found = unsafe { libc::kill(pid, 0) } == 0;
        found || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
    }
    #[cfg(not(unix))]
    true
}

/// Removes the temporary files beside `path` for its name that an earlier
/// process left behind: those of a process no longer running, and those of
/// this process's pid that it does not have open (a dead namesake's).
/// Best effort: returns how many went.
pub fn remove_stale_temporaries(path: &Path) -> usize {
    let Some(name) = path.file_name() else {
        return 0;
    };
    let prefix = temp_prefix(&name.to_string_lossy());
    let Ok(entries) = fs::read_dir(folder_of(path)) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        let file_name = file_name.to_string_lossy();
        let Some(rest) = file_name.strip_prefix(&prefix) else {
            continue;
        };
        let Some((pid, n)) = rest.split_once('.') else {
            continue;
        };
        let (Ok(pid), true) = (
            pid.parse::<u32>(),
            !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()),
        ) else {
            continue;
        };
        let temp = path.with_file_name(&*file_name);
        let ours = pid == std::process::id() && live().contains(&temp);
        let stale = !ours && (pid == std::process::id() || !running(pid));
        if stale && entry.file_type().is_ok_and(|t| t.is_file()) && fs::remove_file(&temp).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// From now on, SIGINT and SIGTERM remove the temporary files this process
/// is writing, then end it as the signal would have (its exit status says
/// so). For programs (the CLI); a library embedded elsewhere (Python) keeps
/// the host's own signal handling by not calling it. Idempotent.
pub fn remove_temporaries_on_signals() -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use signal_hook::consts::{SIGINT, SIGTERM};
        use signal_hook::iterator::Signals;
        static ON: Mutex<bool> = Mutex::new(false);
        let mut on = ON.lock().unwrap_or_else(|e| e.into_inner());
        if *on {
            return Ok(());
        }
        let mut signals = Signals::new([SIGINT, SIGTERM])?;
        std::thread::Builder::new()
            .name("kda-output-signals".into())
            .spawn(move || {
                if let Some(signal) = signals.forever().next() {
                    // Kept locked: no temporary is created after this.
                    let live = live();
                    for temp in live.iter() {
                        let _ = fs::remove_file(temp);
                    }
                    let _ = signal_hook::low_level::emulate_default_handler(signal);
                    // Not reached: the default action of both ends the process.
                    std::process::exit(128 + signal);
                }
            })?;
        *on = true;
    }
    Ok(())
}

/// Checks, before any work, that a file can be written at `path` under the
/// rules of [`write_atomic`]: a folder, block device or socket is refused;
/// a device or FIFO is accepted as it is (not opened: a FIFO would block
/// until its reader comes); for a file, the folder of the resolved target
/// exists and a temporary file can be created there (the probe is removed).
pub fn check_output(path: &Path) -> Result<(), FileError> {
    let real = match resolve(path)? {
        Target::Stream { .. } => return Ok(()),
        #[cfg(unix)]
        Target::Descriptor { .. } => return Ok(()),
        Target::File { path: real, .. } => real,
    };
    let folder = folder_of(&real);
    match fs::metadata(folder) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => {
            return Err(refuse(
                path,
                format!("{} is not a folder", folder.display()),
            ));
        }
        Err(e) => {
            return Err(refuse(
                path,
                format!("its folder {}: {e}", folder.display()),
            ));
        }
    }
    let (probe, file) = create_temp(&real, false).map_err(|e| {
        let reason = match e {
            FileError::Io { source, .. } => source.to_string(),
            other => other.to_string(),
        };
        refuse(
            path,
            format!("cannot create a file in {}: {reason}", folder.display()),
        )
    })?;
    drop(file);
    // Best effort: an unremovable probe is harmless, and found as stale later.
    let _ = fs::remove_file(&probe);
    forget(&probe);
    Ok(())
}

/// Writes `bytes` to `path` under the rules of this module: a regular file
/// (or new name) atomically — a fresh temporary file beside the resolved
/// target, synced, given the old file's mode and owner, renamed over it,
/// the folder synced — so readers see the old file or the whole new one; a
/// device, FIFO or pipe written through. A failed write removes its
/// temporary file.
///
/// ```
/// use kda_host::case::{read, write_atomic};
///
/// let dir = std::env::temp_dir().join(format!("kda-host-doc-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// let path = dir.join("case.safetensors");
/// write_atomic(&path, b"first")?;
/// write_atomic(&path, b"second")?;
/// assert_eq!(read(&path)?, b"second");
/// // Nothing but the file itself is left in the folder.
/// assert_eq!(std::fs::read_dir(&dir)?.count(), 1);
/// std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), FileError> {
    write_with(path, |w| w.write_all(bytes))
}

/// [`write_atomic`] for output produced piece by piece: `fill` writes it
/// into the temporary file (or the stream).
pub fn write_with(
    path: &Path,
    fill: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<(), FileError> {
    let (real, existing) = match resolve(path)? {
        Target::Stream { path } => {
            let mut stream = OpenOptions::new()
                .write(true)
                .open(&path)
                .map_err(io_error(&path))?;
            return fill(&mut stream)
                .and_then(|()| stream.flush())
                .map_err(io_error(&path));
        }
        #[cfg(unix)]
        Target::Descriptor { fd } => {
            use std::os::fd::BorrowedFd;
            // SAFETY: `resolve` saw `fd` open; it is only borrowed to dup it.
            let owned = unsafe { BorrowedFd::borrow_raw(fd) }
                .try_clone_to_owned()
                .map_err(io_error(path))?;
            let mut stream = File::from(owned);
            return fill(&mut stream)
                .and_then(|()| stream.flush())
                .map_err(io_error(path));
        }
        Target::File { path, existing } => (path, existing),
    };
    remove_stale_temporaries(&real);
    let (temp, mut file) = create_temp(&real, existing.is_some())?;
    let written = fill(&mut file)
        .and_then(|()| keep_mode_and_owner(&file, existing.as_ref()))
        .and_then(|()| file.sync_all())
        .map_err(io_error(&temp))
        .and_then(|()| {
            drop(file);
            fs::rename(&temp, &real).map_err(io_error(&real))
        });
    if let Err(e) = written {
        // Best effort: the error that matters is the one above.
        let _ = fs::remove_file(&temp);
        forget(&temp);
        return Err(e);
    }
    forget(&temp);
    sync_folder(&real)
}

/// Gives the temporary file the mode and owner of the file it replaces (a
/// new file keeps the mode it was created with: 0666 less the umask).
fn keep_mode_and_owner(file: &File, existing: Option<&Metadata>) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
        let Some(m) = existing else {
            return Ok(()); // created with 0666 less the umask, as a plain create
        };
        let mine = file.metadata()?;
        if (m.uid(), m.gid()) != (mine.uid(), mine.gid()) {
            // Only root may give a file away; others keep their own (as any
            // editor's save would).
            let _ = std::os::unix::fs::fchown(file, Some(m.uid()), Some(m.gid()));
        }
        // After the owner: chown clears the set-id bits.
        file.set_permissions(fs::Permissions::from_mode(m.mode() & 0o7777))?;
    }
    #[cfg(not(unix))]
    if let Some(m) = existing {
        file.set_permissions(m.permissions())?;
    }
    Ok(())
}

/// Makes the rename durable (Unix: fsync the folder); a no-op elsewhere.
fn sync_folder(path: &Path) -> Result<(), FileError> {
    #[cfg(unix)]
    {
        let folder = folder_of(path);
        File::open(folder)
            .and_then(|f| f.sync_all())
            .map_err(io_error(folder))?;
    }
    #[cfg(not(unix))]
    let _ = path;
    Ok(())
}
