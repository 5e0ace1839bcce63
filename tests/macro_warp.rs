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

#[cluster_kernel(block = 32)]
fn logs(x: Tensor<f32, 32>, y: Tensor<f32, 32>) {
    let lane = lane_id();
    y[lane] = x[lane].fast_log2();
}

/// `fast_log2` is `lg2.approx.ftz.f32`; the simulator flushes subnormal
/// inputs (log2 → -inf) and is otherwise exact `log2`.
#[test]
fn fast_log2_is_the_approximate_instruction() {
    use kda::runtime::{Device, LaunchConfig, SimDevice};
    let k = logs();
    assert!(write_kernel(&k).contains("lg2.approx"));
    let ptx = kda::ir::pipeline::compile(&k, &Default::default())
        .unwrap_or_else(|e| panic!("{e}"))
        .ptx;
    assert!(ptx.contains("lg2.approx.ftz.f32"), "{ptx}");
    let xs: Vec<f32> = (0..32)
        .map(|i| match i {
            0 => 1.0e-40, // subnormal: flushed
            1 => 0.0,
            2 => -1.0,
            _ => 0.37 * i as f32,
        })
        .collect();
    let dev = SimDevice::new();
    let m = dev.load(&k).unwrap();
    let bytes: Vec<u8> = xs.iter().flat_map(|v| v.to_le_bytes()).collect();
    let (bx, by) = (dev.upload(&bytes).unwrap(), dev.upload(&bytes).unwrap());
    let cfg = LaunchConfig {
        grid: [1, 1, 1],
        pdl: false,
        syms: vec![],
        scalars: vec![],
    };
    dev.launch(&m, &cfg, &[&bx, &by]).unwrap();
    let ys: Vec<f32> = dev
        .download(&by)
        .unwrap()
        .chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(ys[0], f32::NEG_INFINITY);
    assert_eq!(ys[1], f32::NEG_INFINITY);
    assert!(ys[2].is_nan());
    for i in 3..32 {
        assert_eq!(ys[i], xs[i].log2(), "{}", xs[i]);
    }
}
