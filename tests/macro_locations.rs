//! Every instruction the macro emits carries the kernel author's source line,
//! so dumps, PTX comments and verifier errors point at the kernel.

use kda::cluster_kernel;

#[cluster_kernel(block = 32)]
fn located(x: Tensor<f32, rows, 32>, n: u32) {
    let lane = lane_id(); // LINE lane
    let mut v = x[[block_idx(0), lane]]; // LINE load
    if lane < 16 {
        // LINE if
        v *= 2.0; // LINE mul
    }
    for _ in 0..n {
        // LINE for
        v += 1.0; // LINE add
    }
    x[[block_idx(0), lane]] = v; // LINE store
}

/// The line of this file carrying the marker `// LINE <what>`.
fn line_of(what: &str) -> u32 {
    let src = include_str!("macro_locations.rs");
    let marker = format!("// LINE {what}");
    let n = src
        .lines()
        .position(|l| l.trim_end().ends_with(&marker))
        .expect("marker");
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
        k.insts
            .values()
            .filter(|i| kda::ir::write::mnemonic(&i.op) == op)
            .map(|i| i.loc.line)
            .collect()
    };
    assert_eq!(at("ld.global"), [line_of("load")], "{text}");
    assert_eq!(at("st.global"), [line_of("store")], "{text}");
    assert_eq!(at("mul"), [line_of("mul")], "{text}");
    assert_eq!(at("add"), [line_of("add")], "{text}");
    assert_eq!(at("if"), [line_of("if")], "{text}");
    assert_eq!(at("for"), [line_of("for")], "{text}");
    assert_eq!(at("cmp.lt"), [line_of("if")], "{text}");
}
