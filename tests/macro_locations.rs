//! Every instruction the macro emits carries the kernel author's source line,
//! so dumps, PTX comments and verifier errors point at the kernel.

use kda::cluster_kernel;

#[cluster_kernel(block = 32)]
fn located(x: Tensor<f32, rows, 32>, n: u32) {
    let lane = lane_id();
    let mut v = x[[block_idx(0), lane]];
    if lane < 16 {
        v *= 2.0;
    }
    for _ in 0..n {
        v += 1.0;
    }
    x[[block_idx(0), lane]] = v;
}

/// The line of this file that starts (after indentation) with `code`.
fn line_of(code: &str) -> u32 {
    let src = include_str!("macro_locations.rs");
    let n = src
        .lines()
        .position(|l| l.trim_start().starts_with(code))
        .expect("line");
    n as u32 + 1
}

#[test]
fn instructions_point_at_the_kernel_lines() {
    let k = located();
    let text = kda::ir::write::write_kernel(&k);
    for (_, inst) in k.insts.iter() {
        assert!(
            inst.loc.file.ends_with("macro_locations.rs"),
            "{} at {}",
            inst.op.name(),
            inst.loc
        );
    }
    let at = |op: &str| -> Vec<u32> {
        let insts = k.insts.values();
        let here = insts.filter(|i| kda::ir::write::mnemonic(&i.op) == op);
        here.map(|i| i.loc.line).collect()
    };
    assert_eq!(at("ld.global"), [line_of("let mut v = x")], "{text}");
    assert_eq!(
        at("st.global"),
        [line_of("x[[block_idx(0), lane]] = v")],
        "{text}"
    );
    assert_eq!(at("mul"), [line_of("v *= 2.0")], "{text}");
    assert_eq!(at("add"), [line_of("v += 1.0")], "{text}");
    assert_eq!(at("if"), [line_of("if lane < 16")], "{text}");
    assert_eq!(at("cmp.lt"), [line_of("if lane < 16")], "{text}");
    assert_eq!(at("for"), [line_of("for _ in 0..n")], "{text}");
}
