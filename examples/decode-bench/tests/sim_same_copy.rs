//! The same-bytes copy the bench times per point, on the simulator (the
//! bench has no `--sim` mode; KdaSplit's `bench --sim` runs the same
//! check): for small GDN and Mamba-2 points, the copy of exactly the
//! point's state traffic ([`Family::same_bytes`]), over the point's
//! rotation ([`rotation`], the workload's groups and steps), writes its `T`
//! exact copies at every chained step, each variant into poisoned
//! destinations.

mod common;

use common::{PLAN, small_mamba2};
use decode_bench::family::{Family, Gdn};
use decode_bench::workload::{Workload, rotation};
use kda_host::bench::same_copy::{CopyRotation, check_rotation};
use kda_runtime::SimDevice;

/// The copy of `family` at `batch` checked with `variants` on the
/// simulator; returns its lines.
fn check<F: Family>(family: &F, batch: usize, variants: &[(u32, u32)]) -> Vec<String> {
    let dev = SimDevice::new();
    let same = family.same_bytes(batch).unwrap();
    // The bytes of the row's "of copy" column, and the workload's rotation.
    assert_eq!(same.bytes_per_step(), family.state_bytes(batch));
    let shape = rotation(&PLAN, family, batch);
    let w = Workload::new(&dev, family, batch, &PLAN).unwrap();
    assert_eq!(shape, (w.groups, w.steps));
    assert_eq!(shape, (3, 4));
    drop(w);
    let copies = CopyRotation::new(&dev, same, shape, PLAN.seed as u32).unwrap();
    let lines = check_rotation(&dev, &copies, variants).unwrap_or_else(|e| panic!("{e}"));
    println!("{}", lines.join("\n"));
    lines
}

#[test]
fn gdn_verify_points_same_bytes_copy_writes_its_copies() {
    // HV 2, T = 2, batch 2: 2 slots of 2 pages of 128 × 128 f32 read, 2
    // copies written.
    let family = Gdn::new(1, 2, 2);
    let lines = check(&family, 2, &[(32, 4), (128, 2)]);
    assert_eq!(lines.len(), 2);
    assert!(
        lines[1].contains(
            "bench_copy_step_b128_u2_t2: 4 chained steps over 3 groups write 2 exact copies"
        ),
        "{lines:?}"
    );
}

#[test]
fn mamba2_points_same_bytes_copy_writes_its_copy() {
    // 2 heads of 16 × 16 f32, batch 3: 6 KiB read, one copy written.
    let family = small_mamba2();
    assert_eq!(
        family.same_bytes(3).unwrap().read_bytes(),
        3 * 2 * 16 * 16 * 4
    );
    let lines = check(&family, 3, &[(32, 1), (128, 1)]);
    assert_eq!(lines.len(), 2);
    assert!(
        lines
            .iter()
            .all(|l| l.contains("4 chained steps over 3 groups write 1 exact copies")),
        "{lines:?}"
    );
}
