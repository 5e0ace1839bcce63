//! The kernel's IR: the ring's phases are loop-carried bits, waits use
//! register parities, the ring ops index their barriers at run time.

use ::pipelined_copy::{Ring, pipelined_copy};

#[test]
fn phases_are_loop_carried_and_the_ring_is_indexed_at_run_time() {
    for (stages, bulk_out) in (1..=4).flat_map(|s| [(s, false), (s, true)]) {
        let k = pipelined_copy(&Ring::new(stages, bulk_out));
        kda::ir::verifier::verify(&k).unwrap_or_else(|e| panic!("{stages} stages: {e}"));
        let text = kda::ir::write::write_kernel(&k);
        if std::env::var_os("DUMP").is_some() {
            println!("{text}");
        }
        let ring = format!(" of {stages}]");
        // Both roles wait by a register parity on an element of a ring: the
        // producer in its loop and once after it (the stage of the stop
        // phase, whose parity the loop left), the consumers in theirs.
        assert_eq!(text.matches("mbarrier.wait.parity").count(), 3, "{text}");
        assert!(
            !text.contains("phase "),
            "no comptime phase in a loop: {text}"
        );
        assert!(text.matches(&ring).count() >= 4, "{text}");
    }
}
