//! The bench's rotating workload on the simulator: every step of a graph's
//! rotation, launched as the bench launches it, equals the float64
//! reference of the launch it stands for (that step's slot table over the
//! state the previous steps left), and touches only its own group's slots.

mod common;

use common::{PLAN, small_mamba2};
use decode_bench::family::{Family, Gdn, Mamba2};
use decode_bench::workload::Workload;
use kda_host::{Actual, HostData, KernelArgs};
use kda_runtime::{Device, SimDevice};

fn written<A: KernelArgs>(args: &A) -> Actual {
    let [output, state, conv] = args.written();
    let t = args.tensors();
    let bf = |i: usize| match t[i].to_contiguous().data() {
        HostData::Bf16(v) => v.clone(),
        _ => panic!("bf16"),
    };
    let state = match t[state].to_contiguous().data() {
        HostData::F32(v) => v.clone(),
        _ => panic!("f32 state"),
    };
    Actual {
        output: bf(output),
        output_f32: None,
        state,
        conv_state: bf(conv),
    }
}

/// Runs `steps` steps of `schedule` and checks each with `check(before,
/// after)`; returns the workload's groups.
fn rotate<F: Family>(
    family: &F,
    batch: usize,
    schedule: &F::Schedule,
    check: impl Fn(&F::Args, &Actual),
) -> usize {
    let dev = SimDevice::new();
    let mut w = Workload::new(&dev, family, batch, &PLAN).unwrap();
    assert_eq!((w.groups, w.steps), (3, 4));
    assert_eq!(w.num_slots, 3 * batch * family.tokens() + 1);
    let (kernel, launch) = w.kernel(family, schedule).unwrap();
    let module = dev.load(&kernel).unwrap();
    for step in 0..w.steps {
        w.poison_output(&dev).unwrap();
        let before = w.host_args(&dev, family, step).unwrap();
        w.rotation.launch(&dev, &module, &launch, step).unwrap();
        assert_eq!(
            w.bad_outputs(&dev).unwrap(),
            0,
            "step {step} left output unwritten"
        );
        let after = w.host_args(&dev, family, step).unwrap();
        check(&before, &written(&after));
    }
    w.groups
}

#[test]
fn gdn_verify_steps_rotate_over_slot_groups_and_match_the_reference() {
    // T = 2 (slot table and accepted), grouped heads.
    let family = Gdn::new(1, 2, 2);
    let schedule = gdn_decode::kernel::Schedule::default();
    rotate(&family, 3, &schedule, |before, actual| {
        let expected = gdn_decode::reference(&family.cfg, before).unwrap();
        let report = gdn_decode::compare(&family.cfg, before, actual, &expected);
        assert!(report.passed(), "{report}");
    });
}

#[test]
fn mamba2_steps_past_the_generated_requests_match_the_reference() {
    // 20 requests: the inputs of 16 generated ones, repeated.
    let family = small_mamba2();
    let schedule = mamba2_decode::kernel::Schedule {
        early: true,
        evict: true,
        ..Default::default()
    };
    rotate(&family, 20, &schedule, |before, actual| {
        let expected = mamba2_decode::reference(&family.cfg, before).unwrap();
        let report = mamba2_decode::compare(&family.cfg, before, actual, &expected);
        assert!(report.passed(), "{report}");
    });
}

#[test]
fn slot_groups_are_disjoint_and_cover_the_cache() {
    let family = Gdn::new(1, 1, 3);
    let dev = SimDevice::new();
    let w = Workload::new(&dev, &family, 5, &PLAN).unwrap();
    let mut seen: Vec<i32> = w
        .host_tables
        .iter()
        .flat_map(|t| match t.data() {
            HostData::I32(v) => v.clone(),
            _ => panic!("i32 slots"),
        })
        .collect();
    assert_eq!(w.host_tables[0].shape(), &[5, 3]);
    seen.sort();
    assert_eq!(seen, (1..w.num_slots as i32).collect::<Vec<_>>());
}

/// Every schedule the sweep measures, at the sweep's shapes, passes the
/// check the bench runs before timing it (here on the simulator, 2
/// requests drawn with the generator's padding and write holes, at least
/// one active).
#[test]
fn every_swept_schedule_passes_the_bench_check_on_the_simulator() {
    let dev = SimDevice::new();
    let mut failed = Vec::new();
    for tokens in [1, 4] {
        let family = Gdn::new(4, 8, tokens);
        // The drawn launch has active requests (and so runs the schedule).
        let args = gdn_decode::generate(&family.cfg, &gdn_decode::GenOptions::new(2).seed(7));
        assert!((0..2).any(|b| matches!(
            gdn_decode::resolve(&family.cfg, &args, b),
            gdn_decode::Request::Active { .. }
        )));
        for s in gdn_decode::kernel::sweep_schedules(tokens) {
            if let Err(e) = family.check(&dev, &s, 2, 7) {
                failed.push(format!("{} {}: {e}", family.label(), s.label()));
            }
        }
    }
    let family = Mamba2::new(24, 1);
    let args = mamba2_decode::generate(&family.cfg, &mamba2_decode::GenOptions::new(2).seed(7));
    assert!((0..2).any(|b| mamba2_decode::resolve(&args, b).is_some()));
    for s in mamba2_decode::kernel::sweep_schedules() {
        if let Err(e) = family.check(&dev, &s, 2, 7) {
            failed.push(format!("{} {}: {e}", family.label(), s.label()));
        }
    }
    assert!(failed.is_empty(), "{failed:#?}");
}
