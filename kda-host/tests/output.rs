//! Issue 32 items 1 and 2: the one writer of every output file
//! (`kda_host::output`) writes through devices, FIFOs and links instead of
//! replacing them, keeps a replaced file's mode and owner, and leaves no
//! temporary file behind when interrupted by SIGINT / SIGTERM or killed.
#![cfg(unix)]

use kda_host::testing::Scratch;
use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _, PermissionsExt as _};
use std::os::unix::process::ExitStatusExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use kda_host::output::{TEMP_MARKER, check_output, write_atomic, write_with};

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().mode() & 0o7777
}

fn mkfifo(p: &Path) {
    let ok = Command::new("mkfifo").arg(p).status().unwrap().success();
    assert!(ok, "mkfifo {}", p.display());
}

/// Before, a link was replaced by a regular file and the file it named kept
/// its old contents; now the file it names is replaced, and the link stays.
#[test]
fn a_link_is_followed_to_its_file() {
    let dir = Scratch::new("kda-host-output", "link");
    std::fs::create_dir_all(dir.join("real")).unwrap();
    let file = dir.join("real/target");
    std::fs::write(&file, b"old").unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    // A chain: link -> link2 -> real/target (relative, resolved from each link's folder).
    std::os::unix::fs::symlink("real/target", dir.join("link2")).unwrap();
    std::os::unix::fs::symlink(dir.join("link2"), dir.join("link")).unwrap();
    write_atomic(&dir.join("link"), b"new").unwrap();
    for link in ["link", "link2"] {
        let m = std::fs::symlink_metadata(dir.join(link)).unwrap();
        assert!(m.file_type().is_symlink(), "{link} was replaced");
    }
    assert_eq!(std::fs::read(&file).unwrap(), b"new");
    assert_eq!(mode(&file), 0o600);
    // No temporary beside the link or the file.
    assert_eq!(dir.names(), ["link", "link2", "real"]);
    assert_eq!(std::fs::read_dir(dir.join("real")).unwrap().count(), 1);

    // A dangling link creates the file it names.
    std::os::unix::fs::symlink("real/new", dir.join("dangling")).unwrap();
    check_output(&dir.join("dangling")).unwrap();
    write_atomic(&dir.join("dangling"), b"made").unwrap();
    assert!(
        std::fs::symlink_metadata(dir.join("dangling"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(std::fs::read(dir.join("real/new")).unwrap(), b"made");
}

/// Before, every replaced file became 0644 (0666 less the umask).
#[test]
fn a_replaced_file_keeps_its_mode_and_owner() {
    let dir = Scratch::new("kda-host-output", "mode");
    // Root (the folder just made is root's) can check the owner too.
    let root = std::fs::metadata(&dir.0).unwrap().uid() == 0;
    for m in [0o600, 0o640, 0o755, 0o444] {
        let file = dir.join(&format!("f{m:o}"));
        std::fs::write(&file, b"old").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(m)).unwrap();
        if root {
            // Give it away: root's rewrite must hand it back to that owner.
            std::os::unix::fs::chown(&file, Some(4242), Some(4343)).unwrap();
        }
        write_atomic(&file, b"new").unwrap();
        assert_eq!(std::fs::read(&file).unwrap(), b"new");
        assert_eq!(mode(&file), m, "{}", file.display());
        if root {
            let meta = std::fs::metadata(&file).unwrap();
            assert_eq!((meta.uid(), meta.gid()), (4242, 4343));
        }
    }
    // A new file gets a plain create's mode.
    write_atomic(&dir.join("fresh"), b"x").unwrap();
    assert_eq!(mode(&dir.join("fresh")) & 0o600, 0o600);
}

/// Before, a FIFO (and, as root, `/dev/null`) was replaced by a regular
/// file and its reader got nothing; now it is written through.
#[test]
fn a_fifo_is_written_through() {
    let dir = Scratch::new("kda-host-output", "fifo");
    let fifo = dir.join("fifo");
    mkfifo(&fifo);
    // check_output must not open it (a FIFO blocks until its reader comes).
    check_output(&fifo).unwrap();
    let got = dir.join("got");
    let mut reader = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "exec cat '{}' > '{}'",
            fifo.display(),
            got.display()
        ))
        .spawn()
        .unwrap();
    let written = write_atomic(&fifo, b"through the fifo\n");
    // Never leave the reader waiting, whatever happened (`exec`: the kill
    // reaches `cat` itself).
    let deadline = Instant::now() + Duration::from_secs(20);
    while reader.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = reader.kill();
            panic!("the FIFO's reader got no end of file");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    written.unwrap();
    assert!(
        std::fs::symlink_metadata(&fifo)
            .unwrap()
            .file_type()
            .is_fifo()
    );
    assert_eq!(std::fs::read(&got).unwrap(), b"through the fifo\n");
    assert_eq!(dir.names(), ["fifo", "got"]);
}

/// `/dev/null` is a character device: written through (this test only runs
/// on the fixed writer's rules, checked first on a FIFO above, so it can
/// never replace the real device).
#[test]
fn dev_null_stays_a_device() {
    let null = Path::new("/dev/null");
    assert!(
        std::fs::metadata(null)
            .unwrap()
            .file_type()
            .is_char_device()
    );
    check_output(null).unwrap();
    write_atomic(null, b"nothing").unwrap();
    assert!(
        std::fs::metadata(null)
            .unwrap()
            .file_type()
            .is_char_device()
    );
}

#[test]
fn folders_and_nameless_paths_are_refused() {
    let dir = Scratch::new("kda-host-output", "refused");
    let e = check_output(&dir.0).unwrap_err();
    assert!(e.to_string().contains("is a folder"), "{e}");
    let e = write_atomic(&dir.0, b"x").unwrap_err();
    assert!(e.to_string().contains("is a folder"), "{e}");
    let e = check_output(Path::new("/")).unwrap_err();
    assert!(e.to_string().contains("names no file"), "{e}");
    assert!(dir.names().is_empty());
}

/// A pid that no longer runs: a child that has exited and been reaped.
fn dead_pid() -> u32 {
    let mut child = Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    pid
}

/// Temporary files of processes that died without cleaning up (SIGKILL) go
/// at the next write of the same file; those of running processes, and
/// other names, stay.
#[test]
fn stale_temporaries_of_dead_processes_are_removed() {
    let dir = Scratch::new("kda-host-output", "stale");
    let target = dir.join("case.safetensors");
    let dead = format!(".case.safetensors{TEMP_MARKER}{}.0", dead_pid());
    let alive = format!(".case.safetensors{TEMP_MARKER}1.0"); // init runs
    let other = format!(".other{TEMP_MARKER}{}.0", dead_pid());
    let unrelated = ".case.safetensors.kda-tmp.notapid".to_string();
    for name in [&dead, &alive, &other, &unrelated] {
        std::fs::write(dir.join(name), b"left over").unwrap();
    }
    write_atomic(&target, b"x").unwrap();
    let mut expected = vec![alive, other, unrelated, "case.safetensors".to_string()];
    expected.sort();
    assert_eq!(dir.names(), expected);
}

const CHILD_ENV: &str = "KDA_HOST_OUTPUT_CHILD";

/// Not a test by itself: the process [`an_interrupted_write_leaves_nothing`]
/// interrupts. It starts a write, says so with a marker file, and waits.
#[test]
#[ignore = "run by an_interrupted_write_leaves_nothing"]
fn interrupted_writer_child() {
    let Some(target) = std::env::var_os(CHILD_ENV) else {
        return;
    };
    let target = PathBuf::from(target);
    kda_host::output::remove_temporaries_on_signals().unwrap();
    let _ = write_with(&target, |w| {
        w.write_all(&[7u8; 1 << 20])?;
        std::fs::write(target.with_extension("started"), b"")?;
        std::thread::sleep(Duration::from_secs(60));
        Ok(())
    });
    panic!("not interrupted");
}

/// Before, SIGINT or SIGTERM during a write left the hidden temporary file
/// (up to 1 GB seen) beside the target.
#[test]
fn an_interrupted_write_leaves_nothing() {
    for (signal, number) in [("INT", 2), ("TERM", 15)] {
        let dir = Scratch::new("kda-host-output", &format!("signal-{signal}"));
        let target = dir.join("out.bin");
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--ignored",
                "--exact",
                "interrupted_writer_child",
                "--nocapture",
            ])
            .env(CHILD_ENV, &target)
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let started = target.with_extension("started");
        let deadline = Instant::now() + Duration::from_secs(60);
        while !started.exists() {
            if Instant::now() > deadline || child.try_wait().unwrap().is_some() {
                let _ = child.kill();
                panic!("the child never started its write");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        std::fs::remove_file(&started).unwrap();
        let temps = dir.names();
        assert!(
            temps.len() == 1 && temps[0].contains(TEMP_MARKER),
            "{temps:?}"
        );
        let sent = Command::new("kill")
            .args([format!("-{signal}"), child.id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
        let status = child.wait().unwrap();
        assert_eq!(status.signal(), Some(number), "SIG{signal}: {status:?}");
        assert!(dir.names().is_empty(), "SIG{signal}: {:?}", dir.names());
    }
}

const FD_CHILD_ENV: &str = "KDA_HOST_OUTPUT_FD_CHILD";

/// Not a test by itself: writes to `/dev/stdout` for
/// [`dev_stdout_is_written_through_its_descriptor`].
#[test]
#[ignore = "run by dev_stdout_is_written_through_its_descriptor"]
fn dev_stdout_writer_child() {
    if std::env::var_os(FD_CHILD_ENV).is_none() {
        return;
    }
    check_output(Path::new("/dev/stdout")).unwrap();
    write_atomic(Path::new("/dev/stdout"), b"through stdout\n").unwrap();
    write_atomic(Path::new("/proc/self/fd/1"), b"and again\n").unwrap();
}

/// `-o /dev/stdout >> log`: before, `/dev/stdout` led (through
/// `/proc/self/fd/1`) to the log, which was replaced by a new file (the
/// shell's descriptor then wrote into the old, unlinked one); now the
/// bytes go through the descriptor, appended.
#[test]
fn dev_stdout_is_written_through_its_descriptor() {
    let dir = Scratch::new("kda-host-output", "stdout");
    let log = dir.join("log");
    std::fs::write(&log, b"before\n").unwrap();
    let inode = std::fs::metadata(&log).unwrap().ino();
    let append = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
    let status = Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", "dev_stdout_writer_child", "--quiet"])
        .env(FD_CHILD_ENV, "1")
        .stdout(append)
        .status()
        .unwrap();
    assert!(status.success());
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.starts_with("before\n") && text.contains("through stdout\nand again\n"),
        "{text:?}"
    );
    assert_eq!(std::fs::metadata(&log).unwrap().ino(), inode);
    assert_eq!(dir.names(), ["log"]);
}
