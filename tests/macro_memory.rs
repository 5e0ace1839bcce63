//! Memory in `#[cluster_kernel]`: tensor parameters (shapes, strides,
//! provenance, alignment, access inferred from use), scalar parameters,
//! shared buffers with comptime shapes, register arrays, async copies.

use kda::cluster_kernel;
use kda::ir::write::write_kernel;
use kda::ir::{Access, Dim, Kernel, Provenance, Scalar};

#[cluster_kernel(block = 128, cluster = 2, min_blocks = 2, name = "memory_demo")]
fn memory(
    #[comptime] rows_per_cta: u32,
    #[produced]
    #[align(16)]
    x: Tensor<f32, rows, 128>,
    #[strides(page, 128, 1)] state: Tensor<f32, slots, { rows_per_cta }, 128>,
    slots_of: Tensor<i32, batch>,
    out: Tensor<bf16, rows, 128>,
    scale: f32,
) {
    let t = thread_idx();
    let row = block_idx(0);
    let slot = slots_of[row];
    let tile = shared!([f32; rows_per_cta, 128], align = 128);
    let mut acc = regs!([f32; 2, 4], fill = 0.0);
    pdl_wait();
    let v4 = x.load4([row, 4 * (t % 32)]);
    for e in 0..4 {
        acc[[0, e]] = v4.lane(e);
        acc[[1, e]] = acc[[0, e]] * scale;
    }
    tile[[t / 32, t % 32]] = acc[[1, 3]];
    bar_sync(0, 128);
    let s = state.evict_first()[[slot, t / 32, t]];
    state[[slot, 0, t]] = s + tile[[0, t % 32]];
    out[[row, t]] = (s * 2.0).cast::<bf16>();
}

fn build() -> Kernel {
    memory(4)
}

#[test]
fn declarations_follow_the_signature() {
    let k = build();
    assert_eq!(k.name, "memory_demo");
    assert_eq!(
        (k.launch.block, k.launch.cluster, k.launch.min_blocks_per_sm),
        (128, 2, Some(2))
    );
    let names: Vec<&str> = k.syms.values().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        ["rows", "x.stride0", "slots", "page", "batch", "out.stride0"]
    );
    let t: Vec<_> = k.tensors.values().collect();
    assert_eq!(t[0].provenance, Provenance::Produced);
    assert_eq!(t[0].align, 16);
    assert!(matches!(t[0].strides[..], [Dim::Sym(_), Dim::Const(1)]));
    assert_eq!(t[1].shape[1..], [Dim::Const(4), Dim::Const(128)]);
    assert!(matches!(t[1].strides[0], Dim::Sym(_)));
    assert_eq!(t[2].dtype, Scalar::I32);
    assert_eq!(t[3].dtype, Scalar::BF16);
    assert_eq!(k.scalars.values().next().map(|s| s.ty), Some(Scalar::F32));
}

#[test]
fn access_is_inferred_from_use() {
    let k = build();
    let access: Vec<Access> = k.tensors.values().map(|t| t.access).collect();
    assert_eq!(
        access,
        [Access::Read, Access::ReadWrite, Access::Read, Access::Write]
    );
}

#[test]
fn shared_shapes_and_registers() {
    let k = build();
    let text = write_kernel(&k);
    assert!(
        text.contains("shared buf0 \"tile\": f32[512] align 128"),
        "{text}"
    );
    assert!(text.contains("ld.global.evict_first"), "{text}");
    // one vector load, four extracts; registers never touch memory
    assert_eq!(text.matches("= ld.global t0").count(), 1, "{text}");
    assert!(text.contains(":f32x4 = ld.global t0"), "{text}");
    assert_eq!(text.matches(" = extract.").count(), 4, "{text}");
    // acc[[1, 3]] = acc[[0, 3]] * scale: one mul per element, param read once
    assert_eq!(text.matches(" = param ").count(), 1, "{text}");
    kda::ir::verifier::verify(&k).unwrap_or_else(|e| panic!("{e}"));
}

#[cluster_kernel(block = 32)]
fn uninitialised() {
    let r = regs!([f32; 4]);
    let _ = r[2];
}

#[test]
#[should_panic(expected = "read before it was written")]
fn reading_an_unset_register_panics_at_trace_time() {
    let _ = uninitialised();
}

#[cluster_kernel(block = 64)]
fn copies(
    #[align(16)] w: Tensor<f32, rows, 128>,
    #[align(16)] s: Tensor<f32, rows, 128>,
    y: Tensor<f32, rows, 128>,
) {
    let loader = role!(0..32);
    let user = role!(32..64);
    let staged = mbarrier!(arrivals = 1, tx = 512, roles = [loader, user]);
    let rows = shared!(
        [f32; 128],
        align = 128,
        guard = staged,
        roles = [loader, user]
    );
    let words = shared!([f32; 32, 4], roles = [loader]);
    let lane = thread_idx() % 32;
    let row = block_idx(0);
    in_role!(loader, {
        cp_async!(words[[lane, 0]] = w[[row, 4 * lane]]);
        cp_async_commit();
        if lane == 0 {
            staged.init();
            fence_mbarrier_init();
            staged.arm();
            bulk_copy!(
                rows[0] = s[[row, 0]],
                bytes = 512,
                completes = staged,
                evict_first
            );
        }
        cp_async_wait(0);
        y[[row, lane]] = words[[lane, 1]];
    });
    bar_sync(1, 64);
    in_role!(user, {
        staged.wait();
        y[[row, 32 + lane]] = rows[lane];
    });
}

#[test]
fn async_copies() {
    let k = copies();
    let text = write_kernel(&k);
    assert!(text.contains("cp.async buf1["), "{text}");
    assert!(text.contains("cp.async.bulk.evict_first buf0["), "{text}");
    assert!(text.contains(", 512, bar0"), "{text}");
    kda::ir::verifier::verify(&k).unwrap_or_else(|e| panic!("{e}"));
}

/// Element types a caller chooses: a type parameter of the kernel (the seed
/// takes weights in bf16 or f32 and converts at first use).
#[cluster_kernel(block = 32)]
fn widen<W: kda::dsl::Elem>(w: Tensor<W, 32>, y: Tensor<f32, 32>) {
    let lane = lane_id();
    y[lane] = w[lane].cast::<f32>();
}

#[test]
fn generic_element_types() {
    let k = widen::<kda::dsl::bf16>();
    assert_eq!(
        k.tensors.values().next().map(|t| t.dtype),
        Some(Scalar::BF16)
    );
    assert!(write_kernel(&k).contains("cvt"));
    let k = widen::<f32>();
    assert_eq!(
        k.tensors.values().next().map(|t| t.dtype),
        Some(Scalar::F32)
    );
}
