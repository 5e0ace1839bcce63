//! Launch checks compute tensor spans and view offsets checked (issue 13):
//! a span that overflows 64 bits is an error, not a wrap that fits a tiny
//! buffer; a view whose offsets overflow is an error, not element 0 again.

use kda_device::{Device, DeviceTensor, LaunchConfig, RuntimeError, TensorArg, check_launch};
use kda_ir::parse::parse_kernel;
use kda_sim::SimDevice;

fn strided() -> kda_ir::Kernel {
    let text = "kernel span block=32 cluster=1 {
  sym sym0 \"n\"
  sym sym1 \"stride\"
  tensor t0 \"x\": f32[sym0] strides[sym1] ready read align 4
}
";
    parse_kernel(text).unwrap_or_else(|e| panic!("{e}"))
}

fn cfg(syms: Vec<i64>) -> LaunchConfig {
    LaunchConfig {
        grid: [1, 1, 1],
        pdl: false,
        syms,
        scalars: Vec::new(),
    }
}

fn msg(r: Result<(), RuntimeError>) -> String {
    match r {
        Err(e) => e.to_string(),
        Ok(()) => panic!("the launch must be refused"),
    }
}

#[test]
fn a_span_past_64_bits_is_refused() {
    let k = strided();
    // (2 - 1) × 2^62 + 1 elements × 4 bytes = 2^64 + 4: wrapped to 4 bytes,
    // which a 4-byte buffer held.
    let m = msg(check_launch(&k, &cfg(vec![2, 1 << 62]), &[4]));
    assert!(m.contains("overflow"), "{m}");
    let m = msg(check_launch(&k, &cfg(vec![i64::MAX, i64::MAX]), &[4]));
    assert!(m.contains("overflow"), "{m}");
    // In range: still checked against the buffer.
    assert!(check_launch(&k, &cfg(vec![4, 1]), &[16]).is_ok());
    let m = msg(check_launch(&k, &cfg(vec![5, 1]), &[16]));
    assert!(m.contains("spans 20 bytes"), "{m}");
}

#[test]
fn a_constant_extent_past_i64_is_out_of_range_not_negative() {
    let text = "kernel span block=32 cluster=1 {
  tensor t0 \"x\": f32[18446744073709551615] strides[1] ready read align 4
}
";
    let k = parse_kernel(text).unwrap_or_else(|e| panic!("{e}"));
    let m = msg(check_launch(&k, &cfg(vec![]), &[4]));
    assert!(m.contains("overflow"), "{m}");
}

#[test]
fn a_grid_past_the_device_limits_is_refused() {
    let k = strided();
    let mut c = cfg(vec![1, 1]);
    c.grid = [1, 65536, 1];
    let m = msg(check_launch(&k, &c, &[4]));
    assert!(m.contains("exceeds the device limits"), "{m}");
    c.grid = [u32::MAX, 1, 1];
    assert!(check_launch(&k, &c, &[4]).is_err());
}

#[test]
fn a_view_whose_offsets_overflow_is_an_error() {
    let dev = SimDevice::new();
    let buf = dev.upload(&[0u8; 16]).expect("upload");
    // Element 1 is at 2^62 × 4 bytes = 2^64: wrapped to byte 0.
    let v: TensorArg<'_, SimDevice, f32, 1> =
        TensorArg::from_raw(&buf, kda_ir::Scalar::F32, [2], [1 << 62]).expect("view");
    let e = v.to_vec(&dev).expect_err("past the buffer");
    assert!(e.to_string().contains("past the buffer"), "{e}");
    // A legal view still reads.
    let t = DeviceTensor::<SimDevice, f32, 1>::upload(&dev, &[1.0, 2.0, 3.0, 4.0], [4])
        .expect("upload");
    let col = t.view([2], [2]).expect("view");
    assert_eq!(col.to_vec(&dev).expect("read"), [1.0, 3.0]);
}

#[test]
fn an_unverified_shared_layout_past_32_bits_is_refused_not_wrapped() {
    // Two buffers of 4 GiB: the simulator's layout used to wrap both to
    // offset 0. The verifier's budget refuses the kernel; loading it
    // unverified must refuse the layout too (the PTX backend's layout,
    // which the simulator uses, names the buffer that overflows).
    let text = "kernel big block=32 cluster=1 {
  shared buf0 \"big\": f32[1073741824] align 16
  shared buf1 \"more\": f32[1073741824] align 16
}
";
    let k = parse_kernel(text).unwrap_or_else(|e| panic!("{e}"));
    let dev = SimDevice::with_options(kda_sim::SimOptions {
        verify: false,
        ..Default::default()
    });
    let e = dev.load(&k).unwrap_err();
    assert!(e.to_string().contains("overflows 32 bits"), "{e}");
}
