//! Running the built `kda-split` binary from the CLI tests.
#![allow(dead_code)] // each test binary uses its own subset

use std::path::PathBuf;
use std::process::Command;

/// What one run of the binary did.
pub struct Out {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Out {
    /// Panics with the whole transcript unless the exit code is `code`.
    pub fn expect_code(self, code: i32) -> Self {
        assert_eq!(self.code, code, "exit code\n{self}");
        self
    }

    pub fn expect_ok(self) -> Self {
        self.expect_code(0)
    }
}

impl std::fmt::Display for Out {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit code {}\n--- stdout\n{}--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

/// Runs `kda-split args...`.
pub fn kda_split(args: &[&str]) -> Out {
    let out = Command::new(env!("CARGO_BIN_EXE_kda-split"))
        .args(args)
        .output()
        .expect("the kda-split binary runs");
    Out {
        // A signal (a crash) has no code: never 0.
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// A temporary file path unique to this process and `name`; removed on drop.
pub struct TempFile(pub PathBuf);

impl TempFile {
    pub fn new(name: &str) -> Self {
        Self(std::env::temp_dir().join(format!(
            "kda-split-cli-{}-{name}.safetensors",
            std::process::id()
        )))
    }

    pub fn path(&self) -> &str {
        self.0.to_str().expect("UTF-8 temp path")
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}
