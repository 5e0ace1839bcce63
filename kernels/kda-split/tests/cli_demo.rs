//! `kda-split` with no subcommand: build, run a generated case on the GPU or
//! (here) the simulator, check, time.

mod cli_support;

use cli_support::kda_split;
use kda_runtime::{CudaDevice, RuntimeError};

#[test]
fn no_arguments_runs_the_default_configuration_and_names_the_device() {
    let out = kda_split(&[]).expect_ok();
    let s = &out.stdout;
    match CudaDevice::new(0) {
        Ok(_) => assert!(s.contains("device: GPU 0"), "{out}"),
        Err(RuntimeError::NoDriver(_)) => {
            assert!(
                s.contains("device: CPU simulator (no GPU here:"),
                "must say it fell back to the simulator\n{out}"
            );
            assert!(s.contains("warp-instructions in"), "{out}");
        }
        Err(e) => panic!("cannot open GPU 0: {e}"),
    }
    assert!(
        s.contains("KdaSplit: heads 12, batch 64, tokens 1, gate mode 0, bias on"),
        "{out}"
    );
    for phase in [
        "build (trace the kernel IR)",
        "compile (schedule + PTX)",
        "first launch",
    ] {
        assert!(s.contains(phase), "timing of `{phase}` missing\n{out}");
    }
    for check in ["ok   output ", "ok   state (written)", "ok   conv_state"] {
        assert!(s.contains(check), "{out}");
    }
    assert!(s.contains("all 5 checks passed"), "{out}");
}

#[test]
fn demo_options_pick_the_configuration() {
    let out = kda_split(&[
        "--device",
        "sim",
        "--heads",
        "2",
        "--batch",
        "3",
        "--tokens",
        "3",
        "--gate-mode",
        "1",
        "--no-bias",
        "--schedule",
        "1,8,0,2",
        "--gate-inputs",
        "gaussian",
        "--seed",
        "5",
    ])
    .expect_ok();
    assert!(
        out.stdout.contains(
            "heads 2, batch 3, tokens 3, gate mode 1, bias off; schedule [1,8,0,2,0]: cluster 2, lanes 8, early 1"
        ),
        "{out}"
    );
    assert!(out.stdout.contains("(--device sim)"), "{out}");
    assert!(out.stdout.contains("all 5 checks passed"), "{out}");
}

#[test]
fn invalid_configurations_print_the_typed_error_and_exit_2() {
    for (args, message) in [
        (
            &["--heads", "2", "--schedule", "0,0,0,16"][..],
            "invalid configuration: cluster must be 1, 2, 4 or 8",
        ),
        (
            &["--tokens", "9"],
            "invalid configuration: tokens must be in 1..=8",
        ),
        (
            &["--gate-mode", "2", "--schedule", "1,0,0"],
            "invalid configuration: gate mode 2 needs early = 0",
        ),
        (
            &["--tokens", "2", "--schedule", "2,0,0"],
            "invalid configuration: tokens > 1 rules out early >= 2",
        ),
        (&["--schedule", "0,0"], "schedule needs 3 to 7 entries"),
    ] {
        let out = kda_split(args).expect_code(2);
        assert!(out.stderr.contains(message), "{args:?}\n{out}");
        assert!(!out.stderr.contains("panicked"), "{out}");
    }
    // Unparsable flags are usage errors too (clap's exit code 2).
    let out = kda_split(&["--schedule", "0,x,0"]).expect_code(2);
    assert!(out.stderr.contains("not a non-negative integer"), "{out}");
}

#[test]
fn cuda_without_a_gpu_is_an_error_not_a_fallback() {
    if CudaDevice::new(0).is_ok() {
        return; // there is a GPU: nothing to check
    }
    let out = kda_split(&["--device", "cuda", "--heads", "2", "--batch", "2"]).expect_code(4);
    assert!(
        out.stderr.contains("--device cuda: no CUDA driver"),
        "{out}"
    );
}

#[test]
fn the_schedule_is_the_tuned_one_unless_seed_or_numbers_are_given() {
    // Heads 2, batch 3 on the simulator, with `extra` flags.
    let demo = |extra: &[&str]| {
        let mut args = vec!["--device", "sim", "--heads", "2", "--batch", "3"];
        args.extend(extra);
        let out = kda_split(&args).expect_ok();
        assert!(out.stdout.contains("all 5 checks passed"), "{out}");
        out
    };
    let table = kda_split::TunedTable::builtin();
    let tuned = kda_split::KdaConfig::tuned(2, 3, 0, true, 1).unwrap();
    let raw = tuned.schedule.raw().flag();
    let out = demo(&[]);
    assert!(
        out.stdout.contains(&format!(
            "heads 2, batch 3, tokens 1, gate mode 0, bias on; schedule [{raw}]"
        )),
        "{out}"
    );
    let point = table.nearest_point(2, 3, 1).unwrap().name();
    assert!(
        out.stdout
            .contains(&format!("schedule auto: tuned at {point} on ")),
        "{out}"
    );
    // `seed`: the seed's defaults, no note.
    let out = demo(&["--schedule", "seed"]);
    assert!(out.stdout.contains("schedule [0,0,0,0,0]"), "{out}");
    assert!(!out.stdout.contains("schedule auto"), "{out}");
    // Gate mode 2 takes only what its constraints allow (early 0, the
    // default cluster): still a valid configuration, and it runs.
    let out = demo(&["--gate-mode", "2"]);
    assert!(out.stdout.contains("gate mode 2"), "{out}");
}
