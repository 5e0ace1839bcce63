//! The typed launch `#[cluster_kernel]` generates (`<kernel>::Args`): one
//! named, typed field per parameter, bound by name to the loaded kernel, and
//! every mismatch reported as a typed error naming the parameter and the
//! dimension before anything runs.

use kda::cluster_kernel;
use kda::dsl::Elem;
use kda::runtime::typed::Part;
use kda::runtime::{
    AnyElem, ArgIssue, Device, DeviceTensor, Launch, RuntimeError, SimDevice, TensorArg,
};

/// `y[r, c] = scale · x[r, c] (+ bias[c])`, one thread per channel; `bias`
/// exists only in the `with_bias` configuration, `x` has a generic element.
#[cluster_kernel(block = 32)]
fn scaled<X: Elem>(
    #[comptime] with_bias: bool,
    x: Tensor<X, rows, 32>,
    #[when(with_bias)] bias: Tensor<f32, 32>,
    #[align(16)] y: Tensor<f32, rows, 32>,
    scale: f32,
) {
    let (r, c) = (block_idx(0), thread_idx());
    let v = x[[r, c]].cast::<f32>() * scale;
    y[[r, c]] = match bias {
        Some(b) => v + b[c],
        None => v,
    };
}

struct Setup {
    dev: SimDevice,
    x: DeviceTensor<SimDevice, f32, 2>,
    bias: DeviceTensor<SimDevice, f32, 1>,
    y: DeviceTensor<SimDevice, f32, 2>,
}

fn setup(rows: usize) -> Setup {
    let dev = SimDevice::new();
    let xs: Vec<f32> = (0..rows * 32).map(|i| i as f32).collect();
    let bs: Vec<f32> = (0..32).map(|i| -(i as f32)).collect();
    Setup {
        x: DeviceTensor::upload(&dev, &xs, [rows, 32]).unwrap(),
        bias: DeviceTensor::upload(&dev, &bs, [32]).unwrap(),
        y: DeviceTensor::zeros(&dev, [rows, 32]).unwrap(),
        dev,
    }
}

fn issue(e: RuntimeError) -> (String, ArgIssue) {
    match e {
        RuntimeError::Arg(a) => (a.param.clone(), a.issue.clone()),
        other => panic!("expected an argument error, got {other}"),
    }
}

#[test]
fn launches_by_name_with_and_without_the_when_tensor() {
    let s = setup(3);
    for with_bias in [false, true] {
        let module = s.dev.load(&scaled::<f32>(with_bias)).unwrap();
        let args = scaled::Args::<SimDevice, f32> {
            x: s.x.arg(),
            bias: with_bias.then(|| s.bias.arg()),
            y: s.y.arg(),
            scale: 2.0,
        };
        args.launch(&s.dev, &module, Launch::grid([3, 1, 1]))
            .unwrap();
        let y = s.y.to_vec(&s.dev).unwrap();
        for (i, v) in y.iter().enumerate() {
            let c = (i % 32) as f32;
            let want = 2.0 * i as f32 - if with_bias { c } else { 0.0 };
            assert_eq!(*v, want, "with_bias {with_bias}, element {i}");
        }
    }
}

/// `offset` exists only in the `with_offset` configuration (a `#[when]`
/// scalar: `Option<Val<u32>>` in the body); `Args` always carries it and
/// binds it by name only where the kernel declares it.
#[cluster_kernel(block = 32)]
fn shifted(
    #[comptime] with_offset: bool,
    x: Tensor<f32, rows, 32>,
    y: Tensor<f32, rows, 32>,
    #[when(with_offset)] offset: u32,
) {
    let (r, c) = (block_idx(0), thread_idx());
    let v = x[[r, c]];
    y[[r, c]] = match offset {
        Some(o) => v + o.cast::<f32>(),
        None => v,
    };
}

#[test]
fn a_when_scalar_is_declared_only_where_its_condition_holds() {
    let s = setup(2);
    for with_offset in [false, true] {
        let kernel = shifted(with_offset);
        assert_eq!(kernel.scalars.len(), with_offset as usize);
        let module = s.dev.load(&kernel).unwrap();
        let args = shifted::Args::<SimDevice> {
            x: s.x.arg(),
            y: s.y.arg(),
            offset: 5,
        };
        args.launch(&s.dev, &module, Launch::grid([2, 1, 1]))
            .unwrap();
        let y = s.y.to_vec(&s.dev).unwrap();
        for (i, v) in y.iter().enumerate() {
            let want = i as f32 + if with_offset { 5.0 } else { 0.0 };
            assert_eq!(*v, want, "with_offset {with_offset}, element {i}");
        }
    }
}

#[test]
fn a_strided_view_launches_through_the_same_args() {
    // x is the transpose of a [32, rows] tensor: strides [1, rows].
    let dev = SimDevice::new();
    let rows = 4;
    let xt: Vec<f32> = (0..32 * rows).map(|i| i as f32).collect();
    let store = DeviceTensor::upload(&dev, &xt, [32, rows]).unwrap();
    let x = store.view([rows, 32], [1, rows]).unwrap();
    let y = DeviceTensor::<_, f32, 2>::zeros(&dev, [rows, 32]).unwrap();
    let module = dev.load(&scaled::<f32>(false)).unwrap();
    let args = scaled::Args::<SimDevice, f32> {
        x,
        bias: None,
        y: y.arg(),
        scale: 1.0,
    };
    // The kernel declares x's strides as default (row-major, inner 1): a
    // transposed view is refused, naming the parameter and the dimension.
    let (param, why) = issue(
        args.launch(&dev, &module, Launch::grid([4, 1, 1]))
            .unwrap_err(),
    );
    assert_eq!(param, "x");
    assert_eq!(
        why,
        ArgIssue::Fixed {
            what: Part::Stride,
            dim: 1,
            want: 1,
            got: 4
        }
    );
    // The same data as a contiguous view of the right shape is accepted.
    let flat = store.view([rows, 32], [32, 1]).unwrap();
    let args = scaled::Args::<SimDevice, f32> { x: flat, ..args };
    args.launch(&dev, &module, Launch::grid([4, 1, 1])).unwrap();
    assert_eq!(y.to_vec(&dev).unwrap(), xt);
}

#[test]
fn mismatches_name_the_parameter_and_dimension() {
    let s = setup(3);
    let module = s.dev.load(&scaled::<f32>(true)).unwrap();
    let grid = Launch::grid([3, 1, 1]);
    let ok = scaled::Args::<SimDevice, f32> {
        x: s.x.arg(),
        bias: Some(s.bias.arg()),
        y: s.y.arg(),
        scale: 1.0,
    };

    // `bias` is declared by this configuration but not given.
    let e = scaled::Args { bias: None, ..ok }.launch(&s.dev, &module, grid);
    assert_eq!(issue(e.unwrap_err()), ("bias".into(), ArgIssue::Missing));

    // `y` has 4 rows where `x` bound `rows` to 3.
    let y4 = DeviceTensor::<_, f32, 2>::zeros(&s.dev, [4, 32]).unwrap();
    let e = scaled::Args { y: y4.arg(), ..ok }.launch(&s.dev, &module, grid);
    let (param, why) = issue(e.unwrap_err());
    assert_eq!(param, "y");
    assert!(
        matches!(&why, ArgIssue::Symbol { dim: 0, got: 4, bound: 3, sym, by, .. } if sym == "rows" && by == "x"),
        "{why:?}"
    );

    // A fixed extent: the kernel was built for 32 channels.
    let b16 = DeviceTensor::<_, f32, 1>::zeros(&s.dev, [16]).unwrap();
    let e = scaled::Args {
        bias: Some(b16.arg()),
        ..ok
    }
    .launch(&s.dev, &module, grid);
    let (param, why) = issue(e.unwrap_err());
    assert_eq!(param, "bias");
    assert!(
        matches!(
            why,
            ArgIssue::Fixed {
                dim: 0,
                want: 32,
                got: 16,
                ..
            }
        ),
        "{why:?}"
    );
    assert_eq!(
        format!(
            "{}",
            scaled::Args {
                bias: Some(b16.arg()),
                ..ok
            }
            .launch(&s.dev, &module, grid)
            .unwrap_err()
        ),
        "launch of `scaled`: argument `bias` extent 0 is 16, the kernel was built for 32"
    );

    // `#[align(16)]` on y: rows of 33 floats are 132 bytes apart.
    let wide = DeviceTensor::<_, f32, 2>::zeros(&s.dev, [3, 33]).unwrap();
    let y_odd = wide.view([3, 32], [33, 1]).unwrap();
    let e = scaled::Args { y: y_odd, ..ok }.launch(&s.dev, &module, grid);
    let (param, why) = issue(e.unwrap_err());
    assert_eq!(param, "y");
    assert_eq!(
        why,
        ArgIssue::Unaligned {
            dim: 0,
            stride_bytes: 132,
            align: 16
        }
    );

    // The configuration without bias refuses one.
    let module_nb = s.dev.load(&scaled::<f32>(false)).unwrap();
    let e = ok.launch(&s.dev, &module_nb, grid);
    assert_eq!(
        issue(e.unwrap_err()),
        ("bias".into(), ArgIssue::NotDeclared)
    );

    // Nothing ran: y is still zero.
    assert!(s.y.to_vec(&s.dev).unwrap().iter().all(|&v| v == 0.0));
}

#[test]
fn a_generic_element_is_checked_at_launch() {
    // X = AnyElem: the dtype travels with the tensor and must match the
    // kernel the module was built for.
    let s = setup(2);
    let raw: Vec<u8> = (0..64u32)
        .flat_map(|i| half::bf16::from_f32(i as f32).to_le_bytes())
        .collect();
    let x_bf16 = DeviceTensor::<_, AnyElem, 2>::upload_bytes(
        &s.dev,
        kda::ir::Scalar::BF16,
        &raw,
        [2, 32],
        [32, 1],
    )
    .unwrap();
    let y = DeviceTensor::<_, f32, 2>::zeros(&s.dev, [2, 32]).unwrap();
    let args = scaled::Args::<SimDevice, AnyElem> {
        x: x_bf16.arg(),
        bias: None,
        y: y.arg(),
        scale: 1.0,
    };
    let f32_module = s.dev.load(&scaled::<f32>(false)).unwrap();
    let (param, why) = issue(
        args.launch(&s.dev, &f32_module, Launch::grid([2, 1, 1]))
            .unwrap_err(),
    );
    assert_eq!(param, "x");
    assert_eq!(
        why,
        ArgIssue::Dtype {
            want: kda::ir::Scalar::F32,
            got: kda::ir::Scalar::BF16
        }
    );
    let bf16_module = s.dev.load(&scaled::<kda::dsl::bf16>(false)).unwrap();
    args.launch(&s.dev, &bf16_module, Launch::grid([2, 1, 1]))
        .unwrap();
    let got = y.to_vec(&s.dev).unwrap();
    assert_eq!(got, (0..64).map(|i| i as f32).collect::<Vec<_>>());
}

#[test]
fn views_and_uploads_check_their_sizes() {
    let dev = SimDevice::new();
    let t = DeviceTensor::upload(&dev, &[1i32, 2, 3, 4], [2, 2]).unwrap();
    assert!(matches!(
        t.view([2, 3], [3, 1]),
        Err(RuntimeError::Tensor(_))
    ));
    assert!(matches!(
        DeviceTensor::upload(&dev, &[1i32, 2, 3], [2, 2]),
        Err(RuntimeError::Tensor(_))
    ));
    assert!(matches!(
        DeviceTensor::<_, f32, 2>::zeros(&dev, [usize::MAX, 2]),
        Err(RuntimeError::Tensor(_))
    ));
    let col: TensorArg<'_, SimDevice, i32, 1> = t.view([2], [2]).unwrap();
    assert_eq!(col.to_vec(&dev).unwrap(), [1, 3]);
}

#[test]
fn the_generated_tensors_struct_owns_and_lends() {
    // `scaled::Tensors` owns one DeviceTensor per tensor parameter; `args`
    // lends them all, and struct update syntax swaps one for a view.
    let s = setup(2);
    let t = scaled::Tensors::<SimDevice, f32> {
        x: s.x,
        bias: Some(s.bias),
        y: s.y,
    };
    let module = s.dev.load(&scaled::<f32>(true)).unwrap();
    t.args(0.5)
        .launch(&s.dev, &module, Launch::grid([2, 1, 1]))
        .unwrap();
    let y = t.y.to_vec(&s.dev).unwrap();
    assert_eq!(y[33], 0.5 * 33.0 - 1.0);
    // Row 1 of x as a one-row view: y's rows disagree with it.
    let row = t.x.view([1, 32], [32, 1]).unwrap();
    let e = scaled::Args {
        x: row,
        ..t.args(1.0)
    }
    .launch(&s.dev, &module, Launch::grid([2, 1, 1]));
    let (param, why) = issue(e.unwrap_err());
    assert_eq!(param, "y");
    assert!(
        matches!(
            why,
            ArgIssue::Symbol {
                got: 2,
                bound: 1,
                ..
            }
        ),
        "{why:?}"
    );
}

/// One argument in two `#[when]` forms of different rank (a slot per
/// request for one token, a slot table for several), both named `slots` in
/// the kernel's ABI by `#[name]`: the IR, the descriptor and the typed
/// launch's binding all say `slots`.
#[cluster_kernel(block = 32)]
fn pick(
    #[comptime] tokens: u32,
    #[when(tokens == 1)] slots: Tensor<i32, requests>,
    #[when(tokens > 1)]
    #[name = "slots"]
    slot_table: Tensor<i32, requests, width>,
    y: Tensor<i32, requests, 32>,
) {
    let (r, c) = (block_idx(0), thread_idx());
    let slot = match (slots, slot_table) {
        (Some(s), _) => s[[r]],
        (_, Some(t)) => t[[r, 1u32]],
        _ => unreachable!("one form is declared"),
    };
    y[[r, c]] = slot + c.cast::<i32>();
}

#[test]
fn two_when_forms_share_one_abi_name() {
    let dev = SimDevice::new();
    for tokens in [1u32, 3] {
        let kernel = pick(tokens);
        let names: Vec<&str> = kernel.tensors.values().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["slots", "y"]);
        let params = pick::params(tokens);
        let names: Vec<&str> = params.iter().map(|p| p.name).collect();
        assert_eq!(names, ["slots", "y"]);
        let rank = params[0].tensor().map(|t| t.rank());
        assert_eq!(rank, Some(if tokens == 1 { 1 } else { 2 }));
        let module = dev.load(&kernel).unwrap();
        let one = DeviceTensor::upload(&dev, &[7i32, 9], [2]).unwrap();
        let table = DeviceTensor::upload(&dev, &[0i32, 70, 0, 0, 90, 0], [2, 3]).unwrap();
        let y = DeviceTensor::<SimDevice, i32, 2>::zeros(&dev, [2, 32]).unwrap();
        let args = pick::Args::<SimDevice> {
            slots: (tokens == 1).then(|| one.arg()),
            slot_table: (tokens > 1).then(|| table.arg()),
            y: y.arg(),
        };
        args.launch(&dev, &module, Launch::grid([2, 1, 1])).unwrap();
        let got = y.to_vec(&dev).unwrap();
        let base = if tokens == 1 { [7, 9] } else { [70, 90] };
        for (i, v) in got.iter().enumerate() {
            assert_eq!(
                *v,
                base[i / 32] + (i % 32) as i32,
                "tokens {tokens}, element {i}"
            );
        }
    }
    assert_eq!(pick::PARAMS.len(), 3);
}
