//! Warp collectives and numerics: shuffles, `warp_sum`, `elect`, `mma`, fast
//! math, fma with comptime flush-to-zero, conversions.

use kda::cluster_kernel;
use kda::ir::write::write_kernel;

#[cluster_kernel(block = 32)]
fn numerics(
    #[comptime] fast: bool,
    #[align(16)] a: Tensor<u32, rows, 128>,
    x: Tensor<f32, rows, 32>,
    y: Tensor<f32, rows, 128>,
) {
    let lane = lane_id();
    let row = block_idx(0);
    let v = x[[row, lane]];
    let g = if fast { v.fast_sigmoid() } else { v.sigmoid() };
    let d = (g * -0.5).fast_exp();
    let total = warp_sum(d, 32);
    let quad = warp_sum(d, 8);
    let first = shfl_idx(total, 0);
    let acc = fma_with(quad, first, 1.0, fast);
    let frag_a = a.load4([row, 4 * lane]);
    let frag_b = pack([a[[row, lane]], a[[row, 32 + lane]]]);
    let c = pack([acc, acc, acc, acc]);
    let dd = mma(frag_a, frag_b, c);
    for e in 0..4 {
        y[[row, 4 * lane + e]] = dd.lane(e);
    }
    if elect() {
        y[[row, 0]] = acc.rsqrt();
    }
    let bits = acc.bitcast::<u32>();
    a[[row, lane]] = bits ^ 0x8000_0000;
}

#[test]
fn collectives_and_math() {
    let k = numerics(true);
    let text = write_kernel(&k);
    assert!(text.contains("sigmoid.fast"), "{text}");
    assert!(text.contains("fma.ftz"), "{text}");
    // warp_sum(32): 5 butterfly steps, warp_sum(8): 3
    assert_eq!(text.matches("shfl.bfly").count(), 8, "{text}");
    assert_eq!(text.matches("shfl.idx").count(), 1, "{text}");
    assert!(text.contains("mma.m16n8k16"), "{text}");
    assert!(text.contains("= elect"), "{text}");
    kda::ir::verifier::verify(&k).unwrap_or_else(|e| panic!("{e}"));
    let ieee = write_kernel(&numerics(false));
    assert!(
        !ieee.contains("sigmoid.fast") && !ieee.contains("fma.ftz"),
        "{ieee}"
    );
}
