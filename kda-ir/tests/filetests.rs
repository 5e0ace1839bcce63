//! IR filetests: kernels in the text form under `filetests/`, each file its
//! own expected output.
//!
//! * `filetests/verifier/*.kir`: the file is what the verifier prints for the
//!   kernel in it: `VerifierErrors::listing` (each error as `;! error: ...`
//!   under its instruction, declaration errors above `kernel`), or the plain
//!   kernel when it verifies. Files named `*-ok.kir` must verify; every
//!   other file must fail.
//! * `filetests/ptx/*.kir`: a kernel in printed form that verifies, and next
//!   to it the golden `*.ptx` that `pipeline::compile` produces for it; where
//!   ptxas is installed, each golden must also assemble with no spills.
//!
//! Leading `; ` comment lines describe the test and are kept as they are.
//! Every kernel also round-trips: print → parse → print is identical.
//! `KDA_BLESS=1 cargo test -p kda-ir --test filetests` rewrites each file
//! (and each golden PTX) with the actual output; review the diff.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use kda_ir::parse::parse_kernel;
use kda_ir::pipeline::{Options, compile};
use kda_ir::verifier::verify;
use kda_ir::write::write_kernel;

fn bless() -> bool {
    std::env::var("KDA_BLESS").is_ok_and(|v| v == "1")
}

fn files(dir: &str, ext: &str) -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("filetests")
        .join(dir);
    let mut fs: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("{}: {e}", root.display()))
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == ext))
        .collect();
    fs.sort();
    assert!(!fs.is_empty(), "no .{ext} files in {}", root.display());
    fs
}

/// The leading description (`; ` lines, not the verifier's `;!`) and the rest.
fn split_header(text: &str) -> (String, String) {
    let mut header = String::new();
    let mut lines = text.lines().peekable();
    while let Some(l) = lines.next_if(|l| l.starts_with(';') && !l.starts_with(";!")) {
        header.push_str(l);
        header.push('\n');
    }
    let body = lines.map(|l| format!("{l}\n")).collect();
    (header, body)
}

/// A line diff (longest common subsequence), `-` expected, `+` actual.
fn diff(expected: &str, actual: &str) -> String {
    let (a, b): (Vec<&str>, Vec<&str>) = (expected.lines().collect(), actual.lines().collect());
    let mut lcs = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j, mut out) = (0, 0, String::new());
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            i += 1;
            j += 1;
        } else if j < b.len() && (i == a.len() || lcs[i][j + 1] >= lcs[i + 1][j]) {
            let _ = writeln!(out, "+{}", b[j]);
            j += 1;
        } else {
            let _ = writeln!(out, "-{}", a[i]);
            i += 1;
        }
    }
    out
}

/// Compare `actual` with the file's content; bless or report.
fn expect_file(path: &Path, expected: &str, actual: &str, failures: &mut Vec<String>) {
    if expected == actual {
        return;
    }
    if bless() {
        std::fs::write(path, actual).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    } else {
        failures.push(format!(
            "{}: output differs (KDA_BLESS=1 to accept):\n{}",
            path.display(),
            diff(expected, actual)
        ));
    }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Parse, and check that printing round-trips.
fn parse(path: &Path, body: &str, failures: &mut Vec<String>) -> Option<kda_ir::Kernel> {
    let k = match parse_kernel(body) {
        Ok(k) => k,
        Err(e) => {
            failures.push(format!("{}: (after the header) {e}", path.display()));
            return None;
        }
    };
    let printed = write_kernel(&k);
    match parse_kernel(&printed) {
        Ok(again) if write_kernel(&again) == printed => {}
        Ok(again) => failures.push(format!(
            "{}: print → parse → print differs:\n{}",
            path.display(),
            diff(&printed, &write_kernel(&again))
        )),
        Err(e) => failures.push(format!(
            "{}: the printed kernel does not parse: {e}\n{printed}",
            path.display()
        )),
    }
    Some(k)
}

#[test]
fn verifier() {
    let mut failures = Vec::new();
    for path in files("verifier", "kir") {
        let text = read(&path);
        let (header, body) = split_header(&text);
        let Some(k) = parse(&path, &body, &mut failures) else {
            continue;
        };
        let must_pass = path
            .file_name()
            .is_some_and(|n| n.to_string_lossy().ends_with("-ok.kir"));
        let result = verify(&k);
        let listing = match &result {
            Ok(()) => write_kernel(&k),
            Err(e) => e.listing.clone(),
        };
        match (&result, must_pass) {
            (Err(e), true) => {
                failures.push(format!(
                    "{}: must verify (named -ok), but:\n{e}",
                    path.display()
                ));
                continue;
            }
            (Ok(()), false) => {
                failures.push(format!(
                    "{}: must fail to verify, but it verifies",
                    path.display()
                ));
                continue;
            }
            _ => {}
        }
        expect_file(&path, &text, &format!("{header}{listing}"), &mut failures);
    }
    assert!(
        failures.is_empty(),
        "{} filetest(s) failed:\n\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn ptx() {
    let mut failures = Vec::new();
    // Assemble the goldens too where ptxas is installed (scripts/provision-ptxas.sh).
    let assemble = kda_ir::ptxas::find().is_some();
    if !assemble {
        eprintln!("ptxas not found: golden PTX is compared, not assembled");
    }
    for path in files("ptx", "kir") {
        let text = read(&path);
        let (_, body) = split_header(&text);
        let Some(k) = parse(&path, &body, &mut failures) else {
            continue;
        };
        if write_kernel(&k) != body {
            failures.push(format!(
                "{}: not in printed form (the input of a PTX test is kept as written):\n{}",
                path.display(),
                diff(&body, &write_kernel(&k))
            ));
        }
        let opts = Options {
            verify_each_pass: true,
            dump: None,
            skip: Vec::new(),
            probes: false,
        };
        let ptx = match compile(&k, &opts) {
            Ok(c) => c.ptx,
            Err(e) => {
                failures.push(format!("{}: does not compile: {e}", path.display()));
                continue;
            }
        };
        let golden = path.with_extension("ptx");
        let expected = std::fs::read_to_string(&golden).unwrap_or_default();
        expect_file(&golden, &expected, &ptx, &mut failures);
        if assemble {
            match kda_ir::ptxas::assemble(&ptx) {
                Ok(r) if r.spills() == 0 => {}
                Ok(r) => failures.push(format!(
                    "{}: ptxas spills {} bytes:\n{}",
                    golden.display(),
                    r.spills(),
                    r.log
                )),
                Err(e) => failures.push(format!("{}: ptxas rejects it: {e}", golden.display())),
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} filetest(s) failed:\n\n{}",
        failures.len(),
        failures.join("\n")
    );
}
