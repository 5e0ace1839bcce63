//! `docs/gpu-runs/` holds the GPU logs the docs cite, trimmed to what they
//! prove: every path under it that the docs or the code name exists, it
//! holds no experiment patches (those live in git history), and it stays
//! under 2 MB. No GPU, no build of anything else: it reads files.

use std::fs;
use std::path::{Path, PathBuf};

const RUNS: &str = "docs/gpu-runs/";
const LIMIT_BYTES: u64 = 2_000_000;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        let name = e.file_name();
        let name = name.to_string_lossy();
        if p.is_dir() {
            if !matches!(name.as_ref(), "target" | ".git" | "node_modules")
                && !name.starts_with('.')
            {
                walk(&p, out);
            }
        } else {
            out.push(p);
        }
    }
}

/// `a{b,c}d` → `abd`, `acd` (no nesting needed by the docs).
fn expand_braces(p: &str) -> Vec<String> {
    match (p.find('{'), p.find('}')) {
        (Some(a), Some(b)) if a < b => p[a + 1..b]
            .split(',')
            .flat_map(|alt| expand_braces(&format!("{}{}{}", &p[..a], alt, &p[b + 1..])))
            .collect(),
        _ => vec![p.to_string()],
    }
}

fn glob_match(pattern: &str, name: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == name,
        Some((head, tail)) => {
            name.starts_with(head)
                && (head.len()..=name.len())
                    .any(|i| name.is_char_boundary(i) && glob_match(tail, &name[i..]))
        }
    }
}

/// Whether the path (relative to the root, `*` within a component) names
/// an existing file or folder.
fn exists(pattern: &str) -> bool {
    let mut current = vec![root()];
    for comp in pattern.trim_end_matches('/').split('/') {
        let mut next = Vec::new();
        for dir in &current {
            if comp.contains('*') {
                for e in fs::read_dir(dir).into_iter().flatten().flatten() {
                    if glob_match(comp, &e.file_name().to_string_lossy()) {
                        next.push(e.path());
                    }
                }
            } else if dir.join(comp).exists() {
                next.push(dir.join(comp));
            }
        }
        current = next;
    }
    !current.is_empty()
}

fn cited_paths(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (at, _) in text.match_indices(RUNS) {
        // `git show <commit>:docs/gpu-runs/...` names a file in history.
        if text[..at].ends_with(':') {
            continue;
        }
        let path: String = text[at..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || "_.*{},+/-".contains(*c))
            .collect();
        let path = path.trim_end_matches(['.', ',', ';']).to_string();
        if !path.contains('<') {
            out.push(path);
        }
    }
    out
}

#[test]
fn every_cited_gpu_run_exists() {
    let mut files = vec![root().join("README.md")];
    for dir in [
        "docs",
        "kernels",
        "examples",
        "src",
        "tests",
        "scripts",
        "kda-python",
    ] {
        walk(&root().join(dir), &mut files);
    }
    let mut missing = Vec::new();
    for f in files {
        let rel = f
            .strip_prefix(root())
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        if rel.starts_with(RUNS) && !rel.ends_with("README.md") {
            continue;
        }
        if !["md", "rs", "json", "toml", "py", "sh"]
            .iter()
            .any(|e| rel.ends_with(&format!(".{e}")))
        {
            continue;
        }
        let Ok(text) = fs::read_to_string(&f) else {
            continue;
        };
        for p in cited_paths(&text) {
            if !expand_braces(&p).iter().all(|q| exists(q)) {
                missing.push(format!("{rel}: {p}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "cited GPU-run paths that do not exist:\n{}",
        missing.join("\n")
    );
}

#[test]
fn gpu_runs_hold_no_patches_and_stay_small() {
    let mut files = Vec::new();
    walk(&root().join(RUNS), &mut files);
    let patches: Vec<_> = files
        .iter()
        .filter(|f| f.extension().is_some_and(|e| e == "patch" || e == "diff"))
        .collect();
    assert!(
        patches.is_empty(),
        "experiment patches belong in git history, not docs/: {patches:?}"
    );
    let bytes: u64 = files
        .iter()
        .map(|f| fs::metadata(f).map(|m| m.len()).unwrap_or(0))
        .sum();
    assert!(
        bytes < LIMIT_BYTES,
        "docs/gpu-runs holds {bytes} bytes (limit {LIMIT_BYTES}): trim the logs to what the docs cite"
    );
}
