//! The case-file fuzz target in the normal test run: the checked-in corpus
//! and crash reproducers replay without a panic, and a short seeded run
//! (`KDA_FUZZ_SECONDS`, default 10) finds nothing. `scripts/fuzz.sh` runs
//! the longer one.

use kda_fuzz::case::{CaseTarget, seed_cases};
use kda_fuzz::{Budget, fuzz, replay};

#[test]
fn the_corpus_and_every_reproducer_replay_cleanly() {
    let failures = replay(&CaseTarget).unwrap();
    assert!(failures.is_empty(), "{failures:#?}");
    // The checked-in corpus is there, and small.
    let corpus = kda_fuzz::driver::files(&kda_fuzz::driver::folder("corpus", "case")).unwrap();
    assert!(corpus.len() >= 3, "{corpus:?}");
    for path in corpus {
        let len = std::fs::metadata(&path).unwrap().len();
        assert!(len <= 16 << 10, "{}: {len} bytes", path.display());
    }
}

#[test]
fn the_generated_seeds_are_valid_cases() {
    let cases = seed_cases();
    assert_eq!(cases.len(), 3);
    for case in cases {
        // A file keeps logical contents, not a strided view's layout: the
        // case read back is the contiguous twin, and stable from then on.
        let parsed = kda_split::Case::from_bytes(&case.to_bytes().unwrap()).unwrap();
        assert_eq!(parsed.meta, case.meta);
        let again = kda_split::Case::from_bytes(&parsed.to_bytes().unwrap()).unwrap();
        assert_eq!(again, parsed);
    }
}

#[test]
fn a_seeded_run_finds_no_panic_and_no_hang() {
    let budget = Budget::from_env(10.0).unwrap();
    let crash_dir = std::env::temp_dir().join(format!("kda-fuzz-case-{}", std::process::id()));
    let stats = fuzz(&CaseTarget, &budget, &crash_dir).unwrap();
    println!("{}", stats.summary("case", budget.seed));
    assert!(stats.inputs > 3, "{stats:?}");
    assert!(
        stats.crashes.is_empty() && stats.slow.is_empty(),
        "{}\n{:#?} (reproducers in {})",
        stats.summary("case", budget.seed),
        stats.crashes.iter().chain(&stats.slow).collect::<Vec<_>>(),
        crash_dir.display()
    );
}
