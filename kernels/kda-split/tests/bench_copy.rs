//! The benchmark's helper kernels and workload on the simulator and through
//! ptxas: the DSL copy kernel copies exactly with 16-byte accesses, the
//! same-bytes copy's step writes its `T` copies over rotating groups with
//! its loads before the PDL wait and its stores after, the fill
//! kernel fills with bounded, seeded values, the empty kernel launches, and
//! the rotating-slot workload runs chains of steps that match the reference.
//! `KDA_SKIP_PTXAS=1` skips the ptxas checks.

use kda_ir::Scalar;
use kda_ir::pipeline::{Options, compile, schedule};
use kda_runtime::{Device, LaunchConfig, SimDevice};
use kda_split::bench::kernels::{
    COPY_VARIANTS, copy_kernel, copy_launch, copy_step_kernel, copy_tile, empty_kernel, fill,
    fill_kernel,
};
use kda_split::bench::report::Candidate;
use kda_split::bench::same_copy::{CopyMismatch, check_copy_step, compare_copies, step_launch};
use kda_split::bench::sim::{check_copy, check_same_copy, check_workload};
use kda_split::bench::workload::Point;

fn assemble(kernel: &kda_ir::Kernel) -> String {
    let ptx = compile(kernel, &Options::default())
        .unwrap_or_else(|e| panic!("{}: {e}", kernel.name))
        .ptx;
    match kda_ir::ptxas::check_no_spills(&ptx) {
        Ok(Some(report)) => println!("{}: {} registers", kernel.name, report.registers),
        Ok(None) => {}
        Err(e) => panic!(
            "{}: {e}\n(run `bash scripts/provision-ptxas.sh` to install ptxas)",
            kernel.name
        ),
    }
    ptx
}

#[test]
fn copy_kernel_copies_exactly_on_the_simulator() {
    let dev = SimDevice::new();
    for (block, unroll, tiles) in [(32, 1, 3), (64, 2, 2), (256, 4, 2), (128, 3, 1)] {
        check_copy(&dev, block, unroll, tiles).unwrap_or_else(|e| panic!("{e}"));
    }
}

#[test]
fn copy_kernel_touches_only_its_tiles() {
    // Two tiles launched over a buffer of three: the third stays as it was.
    let dev = SimDevice::new();
    let (block, unroll) = (64, 2);
    let tile = copy_tile(block, unroll) as usize;
    let fill_f32 = dev.load(&fill_kernel(Scalar::F32)).unwrap();
    let src = dev.upload(&vec![0; 3 * tile * 4]).unwrap();
    let dst = dev.upload(&vec![0; 3 * tile * 4]).unwrap();
    fill(&dev, &fill_f32, &src, 3 * tile, 5, 1.0).unwrap();
    let copy = dev.load(&copy_kernel(block, unroll)).unwrap();
    dev.launch(&copy, &copy_launch(block, unroll, 2 * tile), &[&src, &dst])
        .unwrap();
    let (s, d) = (dev.download(&src).unwrap(), dev.download(&dst).unwrap());
    assert_eq!(&d[..2 * tile * 4], &s[..2 * tile * 4]);
    assert!(d[2 * tile * 4..].iter().all(|&b| b == 0));
}

#[test]
fn copy_kernel_uses_16_byte_accesses_and_assembles() {
    for (block, unroll) in [(256, 1), (256, 4), (1024, 1)] {
        let ptx = assemble(&copy_kernel(block, unroll));
        assert_eq!(
            ptx.matches("ld.global.v4.f32").count(),
            unroll as usize,
            "{ptx}"
        );
        assert_eq!(
            ptx.matches("st.global.v4.f32").count(),
            unroll as usize,
            "{ptx}"
        );
    }
}

#[test]
fn copy_step_writes_its_copies_over_the_rotation_on_the_simulator() {
    let dev = SimDevice::new();
    for tokens in [1, 3] {
        let point = Point::new(1, 2, tokens);
        let lines =
            check_same_copy(&dev, point, &[(32, 4), (128, 2)], 4).unwrap_or_else(|e| panic!("{e}"));
        println!("{}", lines.join("\n"));
        assert_eq!(lines.len(), 2);
        assert!(
            lines
                .iter()
                .all(|l| l.contains(&format!("write {tokens} exact copies")))
        );
    }
}

#[test]
fn copy_step_check_catches_a_missing_copy() {
    // The T = 2 kernel launched on a destination of three copies leaves the
    // third poisoned: the check names it.
    let dev = SimDevice::new();
    let (block, unroll) = (64, 1);
    let floats = copy_tile(block, unroll) as usize;
    let module = dev.load(&copy_step_kernel(block, unroll, 2)).unwrap();
    let fill_f32 = dev.load(&fill_kernel(Scalar::F32)).unwrap();
    let src = dev.upload(&vec![0; floats * 4]).unwrap();
    let dst = dev.upload(&vec![0; 3 * floats * 4]).unwrap();
    fill(&dev, &fill_f32, &src, floats, 1, 1.0).unwrap();
    let launch = step_launch(block, unroll, floats).unwrap();
    dev.launch(&module, &launch, &[&src, &dst]).unwrap();
    let e = compare_copies(
        "t2",
        &dev.download(&src).unwrap(),
        &dev.download(&dst).unwrap(),
    )
    .unwrap_err();
    assert!(
        matches!(e, CopyMismatch { copy: 2, index: 0, got, .. } if got == 0.0),
        "{e}"
    );
    check_copy_step(&dev, &module, block, unroll, 2, floats).unwrap();
}

/// Positions of `needle` in `text`.
fn positions(text: &str, needle: &str) -> Vec<usize> {
    text.match_indices(needle).map(|(i, _)| i).collect()
}

#[test]
fn copy_step_is_pdl_chained_like_a_kdasplit_step_and_assembles() {
    // Trigger at the entry, every load before the wait, every store after,
    // in the scheduled IR and in the PTX ptxas assembles.
    for (block, unroll) in COPY_VARIANTS {
        for copies in [1, 4] {
            let kernel = copy_step_kernel(block, unroll, copies);
            let scheduled = schedule(&kernel, &Options::default()).unwrap();
            let ir = kda_ir::write::write_kernel(&scheduled);
            let ptx = assemble(&kernel);
            for (text, trigger, wait, load, store) in [
                (
                    &ir,
                    "pdl.launch_dependents",
                    "pdl.wait",
                    "ld.global",
                    "st.global",
                ),
                (
                    &ptx,
                    "griddepcontrol.launch_dependents",
                    "griddepcontrol.wait",
                    "ld.global.v4.f32",
                    "st.global.v4.f32",
                ),
            ] {
                let (trigger, wait) = (positions(text, trigger), positions(text, wait));
                let (loads, stores) = (positions(text, load), positions(text, store));
                assert_eq!((trigger.len(), wait.len()), (1, 1), "{text}");
                assert_eq!(loads.len(), unroll as usize, "{text}");
                assert_eq!(stores.len(), (unroll * copies) as usize, "{text}");
                assert!(trigger[0] < loads[0], "trigger first:\n{text}");
                assert!(
                    loads.last() < Some(&wait[0]),
                    "loads before the wait:\n{text}"
                );
                assert!(wait[0] < stores[0], "stores after the wait:\n{text}");
            }
        }
    }
    // The copy ceiling's kernel stays without PDL.
    let ptx = assemble(&copy_kernel(256, 4));
    assert!(!ptx.contains("griddepcontrol"), "{ptx}");
}

#[test]
fn fill_kernel_fills_bounded_seeded_values() {
    let dev = SimDevice::new();
    let n = 1000; // not a multiple of the block: the tail is guarded
    let fill_f32 = dev.load(&fill_kernel(Scalar::F32)).unwrap();
    let read = |seed: u32, amp: f32| {
        let buf = dev.upload(&vec![0xff; (n + 3) * 4]).unwrap();
        fill(&dev, &fill_f32, &buf, n, seed, amp).unwrap();
        let bytes = dev.download(&buf).unwrap();
        bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect::<Vec<_>>()
    };
    let a = read(1, 0.5);
    assert!(a[..n].iter().all(|v| (-0.5..0.5).contains(v)), "{a:?}");
    assert!(
        a[n..].iter().all(|v| v.is_nan()),
        "elements past the count stay untouched"
    );
    let mean = a[..n].iter().map(|&v| v as f64).sum::<f64>() / n as f64;
    let var = a[..n]
        .iter()
        .map(|&v| (v as f64 - mean).powi(2))
        .sum::<f64>()
        / n as f64;
    assert!(mean.abs() < 0.05 && (var.sqrt() - 0.5 / 3f64.sqrt()).abs() < 0.03);
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&a), bits(&read(1, 0.5)), "same seed, same values");
    assert_ne!(bits(&a), bits(&read(2, 0.5)), "another seed, other values");

    let fill_bf16 = dev.load(&fill_kernel(Scalar::BF16)).unwrap();
    let buf = dev.upload(&vec![0; n * 2]).unwrap();
    fill(&dev, &fill_bf16, &buf, n, 3, 2.0).unwrap();
    let v: Vec<f32> = dev
        .download(&buf)
        .unwrap()
        .chunks_exact(2)
        .map(|c| half::bf16::from_le_bytes([c[0], c[1]]).to_f32())
        .collect();
    assert!(v.iter().all(|x| (-2.0..=2.0).contains(x)));
    assert!(v.iter().filter(|&&x| x != 0.0).count() > n * 9 / 10);
    assemble(&fill_kernel(Scalar::F32));
    assemble(&fill_kernel(Scalar::BF16));
}

#[test]
fn empty_kernel_launches_and_assembles() {
    let dev = SimDevice::new();
    for (block, cluster) in [(32, 1), (160, 8)] {
        let kernel = empty_kernel(block, cluster);
        let module = dev.load(&kernel).unwrap();
        let cfg = LaunchConfig {
            grid: [cluster * 2, 3, 1],
            pdl: true,
            syms: vec![],
            scalars: vec![],
        };
        dev.launch(&module, &cfg, &[]).unwrap();
        assemble(&kernel);
    }
}

#[test]
fn rotating_workload_matches_the_reference_step_by_step() {
    let dev = SimDevice::new();
    let schedules = [
        Candidate::new("default", &[0, 0, 0]),
        Candidate::new("e2-c2", &[2, 0, 0, 2]),
    ];
    for tokens in [1, 2] {
        let point = Point::new(2, 3, tokens);
        let lines = check_workload(&dev, point, &schedules, 3).unwrap_or_else(|e| panic!("{e}"));
        for line in &lines {
            println!("{line}");
        }
        // T > 1 rules out early 2: skipped, not failed.
        assert_eq!(
            lines.iter().filter(|l| l.contains("match")).count(),
            3 - tokens as usize
        );
    }
}

#[test]
fn batches_beyond_the_generated_requests_repeat_them_and_still_match() {
    // The workload generates 16 requests and repeats them for larger batches.
    let dev = SimDevice::new();
    for tokens in [1, 2] {
        let point = Point::new(1, 18, tokens);
        let lines = check_workload(&dev, point, &[Candidate::new("e1", &[1, 0, 0])], 2)
            .unwrap_or_else(|e| panic!("{e}"));
        println!("{}", lines.join("\n"));
        assert!(lines[0].contains("match"), "{lines:?}");
    }
}

#[test]
fn a_workload_too_large_for_the_fill_is_refused_before_anything_is_allocated() {
    use kda_split::bench::workload::{Plan, Workload};
    let dev = SimDevice::new();
    let plan = Plan {
        rotate_bytes: 1,
        min_groups: 1,
        min_steps: 1,
        seed: 1,
    };
    for (heads, batch) in [(4_000_000_000, 4_000_000_000), (12, 1 << 20)] {
        let point = Point::new(heads, batch, 8);
        let e = Workload::new(&dev, point, &plan).err().expect("refused");
        assert!(
            e.to_string().contains("one slot group's state"),
            "{point}: {e}"
        );
    }
}
