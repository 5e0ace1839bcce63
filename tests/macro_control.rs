//! Control flow in `#[cluster_kernel]`: comptime `if`/`for`/`match` unroll at
//! trace time, runtime ones become IR regions whose results are the locals
//! the body assigns.

use kda::cluster_kernel;
use kda::ir::write::write_kernel;

pub struct Cfg {
    pub unroll: usize,
    pub bias: bool,
    pub mode: Mode,
}

#[derive(PartialEq, Clone, Copy)]
pub enum Mode {
    Sum,
    Max,
}

#[cluster_kernel(block = 128)]
fn control(#[comptime] cfg: &Cfg, x: Tensor<f32, rows, 128>, y: Tensor<f32, rows, 128>, n: u32) {
    let t = thread_idx();
    let row = block_idx(0);
    let mut acc = x[[row, t]];
    // comptime: unrolled
    for i in 0..cfg.unroll {
        acc = acc * 2.0 + i as f32;
    }
    if cfg.bias {
        acc += 1.0;
    }
    match cfg.mode {
        Mode::Sum => acc += acc,
        Mode::Max => acc = acc.max(0.0),
    }
    // runtime: an IR `if` whose result is `acc`
    if t < 64 {
        acc *= 3.0;
    } else {
        acc = -acc;
    }
    // runtime loop carrying `acc` and `count`
    let mut count = val::<u32>(0);
    for j in 0..n {
        acc = fma(acc, 0.5, j.cast::<f32>());
        count += 1;
    }
    // an `if` as an expression
    let z = if count > 3 { acc } else { acc * 0.0 };
    y[[row, t]] = z;
}

fn count(text: &str, what: &str) -> usize {
    text.matches(what).count()
}

#[test]
fn comptime_unrolls_runtime_becomes_regions() {
    let k = control(&Cfg {
        unroll: 3,
        bias: true,
        mode: Mode::Max,
    });
    let text = write_kernel(&k);
    // 3 unrolled iterations of `acc * 2.0 + i`
    assert_eq!(count(&text, " = mul "), 3 + 1 + 1, "{text}");
    assert_eq!(count(&text, "max "), 1, "{text}");
    // two runtime ifs (`t < 64`, `count > 3`) and one loop
    assert_eq!(count(&text, "= if "), 2, "{text}");
    assert_eq!(count(&text, "for "), 1, "{text}");
    assert!(text.contains("iter("), "the loop carries values: {text}");
    kda::ir::verifier::verify(&k).unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn comptime_branches_pick_one_side() {
    let a = write_kernel(&control(&Cfg {
        unroll: 0,
        bias: false,
        mode: Mode::Sum,
    }));
    assert_eq!(count(&a, "max "), 0, "{a}");
    assert_eq!(count(&a, "fconst 1.0"), 0, "{a}");
}

/// One row's chain stated once; `wave` (a comptime value here) groups the
/// rows: per wave, every row's load, then every row's store.
#[cluster_kernel(block = 32, wave = wave)]
fn waves(#[comptime] wave: u32, x: Tensor<f32, rows, 32>, y: Tensor<f32, rows, 32>) {
    let t = thread_idx();
    let mut loaded = regs!([f32; 3]);
    chains(3, 2, |r, phase| match phase {
        0 => loaded[r] = x[[r as u32, t]],
        _ => y[[r as u32, t]] = loaded[r],
    });
}

#[test]
fn chains_issue_their_phases_wave_by_wave() {
    for (wave, order) in [(1, "lslsls"), (2, "llssls"), (3, "lllsss"), (8, "lllsss")] {
        let text = write_kernel(&waves(wave));
        let issued: String = text
            .lines()
            .filter_map(|l| match () {
                _ if l.contains("= ld.global t0") => Some('l'),
                _ if l.contains("st.global t1") => Some('s'),
                _ => None,
            })
            .collect();
        assert_eq!(issued, order, "wave {wave}:\n{text}");
        assert!(text.contains(&format!(" wave={wave} {{")), "{text}");
    }
}

#[test]
#[should_panic(expected = "`wave = 0`: a wave issues at least one row chain")]
fn a_wave_of_no_chains_is_a_trace_error() {
    let _ = waves(0);
}
