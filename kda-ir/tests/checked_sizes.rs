//! Sizes and offsets the compiler computes never wrap or panic (issue 13):
//! a buffer's byte size, the shared-memory budget and layout, alignments and
//! a global access's byte stride. Each case once verified, compiled with
//! buffers on top of each other, printed a wrapped size, or panicked.

use kda_ir::parse::parse_kernel;
use kda_ir::pipeline::{Options, compile};
use kda_ir::ptx::{Layout, emit};
use kda_ir::verifier::verify;

fn kernel(text: &str) -> kda_ir::Kernel {
    parse_kernel(text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

/// Two buffers, the first `f32[len]`, each read once.
fn two_buffers(len: u64, align: u64) -> String {
    format!(
        "kernel big block=32 cluster=1 {{
  shared buf0 \"big\": f32[{len}] align {align}
  shared buf1 \"small\": f32[32] align 16
  v0:u32 = special tid
  v1:f32 = ld.shared buf0[v0]
  v2:f32 = ld.shared buf1[v0]
}}
"
    )
}

fn opts() -> Options {
    Options {
        verify_each_pass: true,
        dump: None,
        skip: Vec::new(),
        probes: false,
    }
}

#[test]
fn a_four_gib_buffer_is_over_budget_not_zero_bytes() {
    // 2^30 f32 = 2^32 bytes: wrapped to 0 in u32, so it verified and both
    // buffers were laid out at offset 0.
    let k = kernel(&two_buffers(1 << 30, 16));
    let e = verify(&k).expect_err("4 GiB of shared memory must not verify");
    let msg = e.errors[0].msg.as_str();
    assert!(
        msg.contains("shared memory needs 4294967424 bytes")
            && msg.contains("buf0 \"big\" (4294967296 bytes)"),
        "{msg}"
    );
    let err = compile(&k, &opts()).expect_err("must not compile");
    assert!(err.to_string().contains("4294967296 bytes"), "{err}");
}

#[test]
fn the_budget_error_prints_the_true_size() {
    let k = kernel(&two_buffers(u32::MAX as u64, 16));
    let e = verify(&k).expect_err("must not verify");
    let msg = e.errors[0].msg.as_str();
    // 4 × (2^32 - 1), not the wrapped 2^32 - 4.
    assert!(msg.contains("(17179869180 bytes)"), "{msg}");
}

#[test]
fn the_layout_of_an_unverified_kernel_never_overlaps() {
    let k = kernel(&two_buffers(1 << 30, 16));
    let err = Layout::try_of(&k).expect_err("the layout overflows 32 bits");
    assert!(err.to_string().contains("buf1 \"small\""), "{err}");
    let l = Layout::of(&k);
    let (b0, b1) = (l.buffers.values().next(), l.buffers.values().nth(1));
    assert_ne!(b0, b1, "{l:?}");
    let ptx = emit(&k).expect_err("the backend refuses an overflowing layout");
    assert!(ptx.msg.contains("overflows 32 bits"), "{ptx}");
}

#[test]
fn a_huge_alignment_is_an_error_not_a_panic() {
    for align in [2147483649u64, 3 << 30, u32::MAX as u64] {
        let k = kernel(&two_buffers(32, align));
        let e = verify(&k).expect_err("not a power of two");
        assert!(
            e.errors
                .iter()
                .any(|e| e.msg.contains(&format!("declares align {align}"))),
            "{e}"
        );
    }
    // The largest power of two is a legal alignment: no panic anywhere.
    let k = kernel(&two_buffers(32, 1 << 31));
    assert!(verify(&k).is_ok());
    let l = Layout::try_of(&k).expect("fits");
    assert_eq!(l.buffers.values().copied().collect::<Vec<_>>(), [0, 128]);
}

#[test]
fn a_byte_stride_past_64_bits_is_a_ptx_error() {
    // 2^62 elements × 4 bytes wrapped to a stride of 0 bytes.
    let k = kernel(
        "kernel wide block=32 cluster=1 {
  tensor t0 \"x\": f32[2] strides[4611686018427387904] ready read align 4
  v0:u32 = special tid
  v1:f32 = ld.global t0[v0]
}
",
    );
    let e = emit(&k).expect_err("the byte stride overflows");
    assert!(e.msg.contains("overflows a 64-bit byte offset"), "{e}");
}
