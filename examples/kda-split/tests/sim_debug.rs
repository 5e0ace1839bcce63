use kda_runtime::SimDevice;
use kda_split::{Case, GenOptions, KdaConfig, RawGateOrder, Request, resolve, run::run};

#[test]
fn debug() {
    let opts = GenOptions::new(2, 1, 1)
        .seed(7)
        .padding(0.0)
        .lower_bound(0.0);
    let case = Case::generate(&opts, RawGateOrder::Exact).unwrap();
    let cfg = KdaConfig::new(2, 1, 0, false, &[0, 0, 0, 1], 1).unwrap();
    let dev = SimDevice::with_options(kda_runtime::SimOptions {
        verify: false,
        ..Default::default()
    });
    let actual = run(&dev, &cfg, &case.args).unwrap_or_else(|e| panic!("{e}"));
    let exp = case.expected.as_ref().unwrap();
    let init = case.args.state.to_contiguous().values();
    let Request::Active { read, .. } = resolve(1, &case.args, 0) else {
        panic!()
    };
    let page = 2 * 128 * 128;
    let base = read as usize * page;
    for v in [0usize, 1, 5, 64, 127] {
        let mut line = String::new();
        for k in [0usize, 1, 2, 64, 127] {
            let i = base + v * 128 + k;
            let da = actual.state[i] as f64 - init[i];
            let de = exp.state[i] as f64 - init[i];
            let i0 = base + k;
            let da0 = actual.state[i0] as f64 - init[i0];
            let de0 = exp.state[i0] as f64 - init[i0];
            line += &format!(" {:+.4}/{:+.4}", da / da0, de / de0);
        }
        println!("v{v}: {line}");
    }
    let n = 128;
    println!("out act {:?}", &actual.output[..8]);
    println!("out exp {:?}", &exp.output[..8]);
    let _ = n;
}
