//! A verifier failure shows the failing instruction with its source line and
//! its enclosing regions, not the whole kernel (issue 13); the whole
//! annotated kernel goes to `KDA_DUMP`.

use kda_ir::parse::parse_kernel;
use kda_ir::pipeline::{Options, compile};
use kda_ir::verifier::verify;

/// A kernel with a long body and one bad read deep in a role's loop.
fn long_kernel(filler: usize) -> String {
    let mut s = String::from(
        "kernel long block=64 cluster=1 {
  role role0 \"worker\" 0..64  ; @long.rs:1:1
  shared buf0 \"tile\": f32[64] align 16 guard(bar0)  ; @long.rs:2:1
  mbarrier bar0 \"full\": arrivals 1 tx 0  ; @long.rs:3:1
  v0:u32 = special tid  ; @long.rs:4:1
  v1:u32 = iconst 0  ; @long.rs:5:1
  v2:u32 = iconst 4  ; @long.rs:6:1
  v3:u32 = iconst 1  ; @long.rs:7:1
",
    );
    let mut v = 4;
    for n in 0..filler {
        s.push_str(&format!(
            "  v{v}:u32 = add v0, v3  ; @long.rs:{}:1\n",
            100 + n
        ));
        v += 1;
    }
    s.push_str(&format!(
        "  role role0 {{
    for v1..v2 step v3 |v{v}:u32| {{
      v{}:u32 = add v0, v{v}  ; @long.rs:50:9
      v{}:f32 = ld.shared buf0[v0]  ; @long.rs:51:9
    }}  ; @long.rs:49:5
  }}  ; @long.rs:48:1
}}
",
        v + 1,
        v + 2
    ));
    s
}

#[test]
fn the_error_shows_the_instruction_and_its_regions_only() {
    let k = parse_kernel(&long_kernel(400)).unwrap_or_else(|e| panic!("{e}"));
    let e = verify(&k).expect_err("the guarded read has no wait");
    let shown = e.to_string();
    let lines: Vec<&str> = shown.lines().collect();
    assert!(lines.len() < 20, "{} lines:\n{shown}", lines.len());
    assert!(e.listing.lines().count() > 400);
    assert!(lines[0].starts_with("error: `ld.shared` reads buf0 \"tile\""));
    assert!(lines[0].ends_with("(at long.rs:51:9)"), "{shown}");
    // The enclosing role and loop headers, the instruction, the error under it.
    let body: Vec<&str> = lines.iter().map(|l| l.trim()).collect();
    let role = body.iter().position(|l| l.starts_with("role role0 {"));
    let lp = body
        .iter()
        .position(|l| l.starts_with("for v1..v2 step v3"));
    let ld = body
        .iter()
        .position(|l| l.contains("ld.shared buf0[v0]") && l.ends_with("; @long.rs:51:9"));
    let (Some(role), Some(lp), Some(ld)) = (role, lp, ld) else {
        panic!("missing context:\n{shown}");
    };
    assert!(role < lp && lp < ld, "{shown}");
    assert!(
        body[ld + 1].starts_with(";! error: `ld.shared` reads"),
        "{shown}"
    );
    assert!(shown.contains("KDA_DUMP"), "{shown}");
    // The filler is not shown.
    assert!(!shown.contains("@long.rs:300:1"), "{shown}");
}

#[test]
fn the_pipeline_writes_the_whole_listing_to_the_dump() {
    let k = parse_kernel(&long_kernel(10)).unwrap_or_else(|e| panic!("{e}"));
    let dir = std::env::temp_dir().join(format!("kda-verify-dump-{}", std::process::id()));
    let opts = Options {
        verify_each_pass: true,
        dump: Some(dir.clone()),
        skip: Vec::new(),
        probes: false,
    };
    let err = compile(&k, &opts).expect_err("does not verify").to_string();
    let file = dir.join("long.verify-input.ir");
    assert!(err.contains(&file.display().to_string()), "{err}");
    let listing = std::fs::read_to_string(&file).expect("the dump is written");
    assert_eq!(listing, verify(&k).expect_err("fails").listing);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn declaration_errors_and_many_errors_stay_short() {
    let mut text = String::from("kernel many block=48 cluster=1 {\n");
    text.push_str("  shared buf0 \"tile\": f32[64] align 16 guard(bar0)\n");
    text.push_str("  mbarrier bar0 \"full\": arrivals 1 tx 0\n");
    text.push_str("  v0:u32 = special tid\n");
    for n in 0..50 {
        text.push_str(&format!("  v{}:f32 = ld.shared buf0[v0]\n", n + 1));
    }
    text.push_str("}\n");
    let k = parse_kernel(&text).unwrap_or_else(|e| panic!("{e}"));
    let e = verify(&k).expect_err("block of 48 and 50 unguarded reads");
    assert!(e.errors.len() > 50);
    let shown = e.to_string();
    assert!(shown.contains(";! error: block of 48 threads"), "{shown}");
    assert!(shown.contains("more errors"), "{shown}");
    // 51 message lines, 8 excerpts of a few lines, the tail.
    assert!(shown.lines().count() < 51 + 8 * 8 + 3, "{shown}");
}
