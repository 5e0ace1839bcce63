//! `docs/guide.md` quotes files the test suite compiles; this test keeps the
//! quotes and the files equal.
//!
//! * A ```` ```rust ```` or ```` ```text ```` block whose first line is
//!   `// <path>` (relative to the workspace root) is a copy of that file:
//!   the rest of the block must equal the file. Every ```` ```rust ```` block
//!   must be such a copy, so no Rust in the guide goes uncompiled.
//! * A ```` ```text ```` block whose first line is
//!   `$ cargo run -p guide --example inspect -- VIEW [CLUSTER] [early]` shows
//!   that command's output: its other lines must appear in that order in
//!   what the command prints (`...` stands for lines left out).
//! * Every step of the tutorial and every compile error of
//!   `tests/ui/guide/` is quoted.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A fenced block: its info string, the guide line it starts on, its lines.
struct Block {
    lang: String,
    line: usize,
    body: Vec<String>,
}

fn blocks() -> Vec<Block> {
    let guide = std::fs::read_to_string(root().join("docs/guide.md")).expect("docs/guide.md");
    let mut out = Vec::new();
    let mut open: Option<Block> = None;
    for (n, l) in guide.lines().enumerate() {
        match (&mut open, l.strip_prefix("```")) {
            (None, Some(info)) => {
                open = Some(Block {
                    lang: info.trim().to_string(),
                    line: n + 1,
                    body: Vec::new(),
                })
            }
            (Some(_), Some("")) => out.push(open.take().expect("open block")),
            (Some(b), _) => b.body.push(l.to_string()),
            (None, None) => {}
        }
    }
    assert!(open.is_none(), "docs/guide.md ends inside a code block");
    out
}

/// The path a block copies (`// path` on its first line), if any.
fn copied(b: &Block) -> Option<&str> {
    let path = b.body.first()?.strip_prefix("// ")?;
    (path.contains('/') && !path.contains(' ')).then_some(path)
}

#[test]
fn every_rust_block_is_a_compiled_file_and_every_copy_is_exact() {
    let mut checked = 0;
    for b in blocks() {
        let path = copied(&b);
        if b.lang == "rust" {
            assert!(
                path.is_some(),
                "docs/guide.md:{}: a ```rust block must start with `// <path>` of a file the tests compile",
                b.line
            );
        }
        let Some(path) = path.filter(|_| b.lang == "rust" || b.lang == "text") else {
            continue;
        };
        let file = std::fs::read_to_string(root().join(path))
            .unwrap_or_else(|e| panic!("docs/guide.md:{}: {path}: {e}", b.line));
        let quoted = b.body[1..].join("\n");
        assert_eq!(
            quoted.trim_end(),
            file.trim_end(),
            "docs/guide.md:{} quotes {path}, which has changed: copy it again",
            b.line
        );
        checked += 1;
    }
    assert!(checked > 0);
}

#[test]
fn every_step_and_every_compile_error_is_quoted() {
    let quoted: Vec<String> = blocks()
        .iter()
        .filter_map(|b| copied(b).map(str::to_string))
        .collect();
    let mut want = Vec::new();
    for (dir, ext) in [("examples/guide/src", "rs"), ("tests/ui/guide", "stderr")] {
        for entry in std::fs::read_dir(root().join(dir)).expect(dir) {
            let name = entry.expect(dir).file_name().into_string().expect("utf-8");
            let step = name.starts_with("step_") || ext == "stderr";
            if step && name.ends_with(&format!(".{ext}")) {
                want.push(format!("{dir}/{name}"));
            }
        }
    }
    assert!(want.len() >= 5);
    for path in want {
        assert!(
            quoted.contains(&path),
            "docs/guide.md does not quote {path}"
        );
    }
}

#[test]
fn shown_outputs_are_what_the_commands_print() {
    const COMMAND: &str = "$ cargo run -p guide --example inspect -- ";
    let mut checked = 0;
    for b in blocks() {
        let Some(args) = b.body.first().and_then(|l| l.strip_prefix(COMMAND)) else {
            continue;
        };
        let args: Vec<&str> = args.split_whitespace().collect();
        let cluster = args.get(1).map_or(2, |c| c.parse().expect("cluster"));
        let early = args.get(2) == Some(&"early");
        let kernel = guide::step_5::ema_step(cluster, early);
        let output = match guide::inspect::show(&kernel, args[0]) {
            Ok(out) => out,
            Err(e) if args[0] == "ptxas" && kda::ir::ptxas::find().is_none() => {
                println!("docs/guide.md:{}: not checked: {e}", b.line);
                continue;
            }
            Err(e) => panic!("docs/guide.md:{}: {e}", b.line),
        };
        let mut lines = output.lines();
        for want in b.body[1..].iter().filter(|l| l.trim() != "...") {
            assert!(
                lines.any(|l| l == want),
                "docs/guide.md:{}: `{want}` is not in the output of `{}` (or not in this order):\n{output}",
                b.line,
                &b.body[0][2..]
            );
        }
        checked += 1;
    }
    assert!(
        checked >= 3,
        "the guide shows the IR, the PTX and the ptxas report"
    );
}
