//! The kernel on the CPU simulator against the float64 reference at small
//! shapes (T = 1 and T > 1, with and without the lower bound, K below,
//! at and above the block), under random warp interleavings, and every
//! kernel of the template through `ptxas -arch=sm_90a` without spills.

use hgrn2_decode::Config;
use hgrn2_decode::host::{LIMITS, Problem};
use hgrn2_decode::kernel::hgrn2_decode as build;
use kda::runtime::{SimDevice, SimOptions};
use kda_host::testing::assembles_without_spills;

/// `(K, V, T, lower bound, batch, heads)`.
const SHAPES: [(u32, u32, u32, bool, usize, usize); 4] = [
    (64, 64, 1, false, 2, 2),
    (128, 64, 2, true, 1, 3),
    (32, 96, 5, false, 2, 1),
    (256, 32, 3, true, 1, 2),
];

fn check(dev: &SimDevice, shape: (u32, u32, u32, bool, usize, usize), seed: u64) {
    let (k, v, t, lb, batch, heads) = shape;
    let p = Problem::new(Config::new(k, v, t, lb).unwrap(), batch, heads, seed);
    let (o_err, s_err) = p.check(dev).unwrap_or_else(|e| panic!("{shape:?}: {e}"));
    println!("{shape:?}: o {o_err:.1e}, state {s_err:.1e}");
    assert!(o_err < LIMITS.0, "{shape:?}: o error {o_err:e}");
    assert!(s_err < LIMITS.1, "{shape:?}: state error {s_err:e}");
}

#[test]
fn matches_the_reference() {
    let dev = SimDevice::new();
    for (n, &shape) in SHAPES.iter().enumerate() {
        check(&dev, shape, n as u64);
    }
}

#[test]
fn random_interleavings_match_the_reference() {
    for seed in 1..3 {
        let dev = SimDevice::with_options(SimOptions {
            seed: Some(seed),
            ..SimOptions::default()
        });
        check(&dev, SHAPES[1], 10 + seed);
    }
}

#[test]
fn one_launch_of_t_tokens_is_t_launches_of_one() {
    // Bit for bit: the state stays f32 between tokens in registers exactly as
    // it does in memory between launches. One request, so token t's rows of
    // q, f, v and o are one contiguous slice.
    let dev = SimDevice::new();
    let (t_n, heads) = (3, 2);
    let all = Problem::new(Config::new(64, 64, t_n, true).unwrap(), 1, heads, 5);
    let (o_all, state_all) = all.run(&dev).unwrap();
    let (mut state, mut o) = (all.state.clone(), Vec::new());
    let (kn, vn) = (heads * 64, heads * 64);
    for t in 0..t_n as usize {
        let one = Problem {
            cfg: Config::new(64, 64, 1, true).unwrap(),
            q: all.q[t * kn..][..kn].to_vec(),
            f: all.f[t * kn..][..kn].to_vec(),
            v: all.v[t * vn..][..vn].to_vec(),
            state,
            lower_bound: all.lower_bound.clone(),
            ..all
        };
        let (o_t, next) = one.run(&dev).unwrap();
        o.extend(o_t);
        state = next;
    }
    assert_eq!(o, o_all);
    assert_eq!(state, state_all);
}

#[test]
fn invalid_configurations_are_refused() {
    assert!(Config::new(48, 64, 1, false).is_err());
    assert!(Config::new(512, 64, 1, false).is_err());
    assert!(Config::new(64, 40, 1, false).is_err());
    assert!(Config::new(64, 64, 0, false).is_err());
}

#[test]
fn every_kernel_assembles_without_spills() {
    if kda::ir::ptxas::find().is_none() && std::env::var_os("KDA_SKIP_PTXAS").is_none() {
        // ci.sh points KDA_PTXAS at the kda checkout's `.tools` when it has one.
        println!("skipped: no ptxas ($KDA_PTXAS, <this crate>/.tools/ptxas/bin or PATH)");
        return;
    }
    // The tested shapes and the common model shapes (K = V = 128, T up to 4).
    let mut configs: Vec<Config> = SHAPES
        .iter()
        .map(|&(k, v, t, lb, ..)| Config::new(k, v, t, lb).unwrap())
        .collect();
    for t in 1..=4 {
        for lb in [false, true] {
            configs.push(Config::new(128, 128, t, lb).unwrap());
        }
    }
    let spilled: Vec<String> = configs
        .iter()
        .map(|c| format!("{c:?}"))
        .zip(&configs)
        .filter(|(label, c)| !assembles_without_spills(label, &build(c)))
        .map(|(label, _)| label)
        .collect();
    assert!(spilled.is_empty(), "spills: {spilled:#?}");
}
