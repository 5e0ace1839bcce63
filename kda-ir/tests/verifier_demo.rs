//! The demo kernel verifies clean; a broken one reports every error at once,
//! inline in the listing.

mod verifier_support;

use kda_ir::testkernels::dsmem_exchange;
use kda_ir::verifier::verify;
use kda_ir::write::write_kernel;
use verifier_support::*;

/// The text form without `; @file:line:col` locations.
fn without_locs(text: &str) -> String {
    text.lines()
        .map(|l| format!("{}\n", l.split("  ; @").next().unwrap_or(l)))
        .collect()
}

#[test]
fn demo_verifies() {
    for cluster in [1, 2, 4, 8, 16] {
        assert_ok(&demo(cluster));
        assert_ok(&dsmem_exchange(cluster));
    }
}

/// The example's kernel as `cargo run -p dsmem-exchange --example dump`
/// printed it, without the leading `; ` description.
fn example_as_dumped() -> String {
    include_str!("../filetests/verifier/dsmem-exchange-ok.kir")
        .lines()
        .skip_while(|l| l.starts_with("; "))
        .map(|l| format!("{l}\n"))
        .collect()
}

#[test]
fn support_demo_is_the_example() {
    assert_eq!(
        without_locs(&write_kernel(&demo(2))),
        without_locs(&write_kernel(&dsmem_exchange(2)))
    );
    assert_eq!(
        without_locs(&write_kernel(&dsmem_exchange(2))),
        without_locs(&example_as_dumped())
    );
}

#[test]
fn errors_are_collected_and_listed_inline() {
    let k = Demo {
        pdl_wait: false,
        wait: false,
        cluster_sync: false,
        ..Demo::default()
    }
    .build();
    let e = verify(&k).unwrap_err();
    let msgs: Vec<&str> = e.errors.iter().map(|e| e.msg.as_str()).collect();
    assert_eq!(msgs.len(), 3, "{e}");
    // In layout order, as printed.
    assert!(msgs[0].starts_with("`ld.global` reads t0 \"input\""), "{e}");
    assert!(
        msgs[1].starts_with("`st.async` sends to bar0 \"inbox_full\""),
        "{e}"
    );
    assert!(
        msgs[2].starts_with("`ld.shared` reads buf0 \"inbox\""),
        "{e}"
    );
    // Each error sits under its instruction, with the instruction's location.
    let lines: Vec<&str> = e.listing.lines().collect();
    for err in &e.errors {
        let at = lines
            .iter()
            .position(|l| l.ends_with(&format!("; @{}", err.loc)))
            .expect("instruction printed");
        assert_eq!(
            lines[at + 1].trim_start(),
            format!(";! error: {}", err.msg),
            "{}",
            e.listing
        );
    }
    // Display: the errors with their locations, then each error in its
    // context (not the whole listing, which `KDA_DUMP` writes).
    let shown = e.to_string();
    assert!(shown.starts_with("error: `ld.global` reads"), "{shown}");
    assert!(
        shown.contains(&e.excerpt) && !shown.contains(&e.listing),
        "{shown}"
    );
}

#[test]
fn declaration_errors_go_above_the_kernel() {
    let mut k = demo(2);
    k.launch.block = 48;
    let e = verify(&k).unwrap_err();
    assert!(
        e.listing.starts_with(";! error: block of 48 threads"),
        "{}",
        e.listing
    );
}
