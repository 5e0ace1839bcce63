use kda_runtime::SimDevice;
use kda_split::{Case, GenOptions, KdaConfig, RawGateOrder, compare, run::run};

#[test]
fn t1_default_schedule_matches_reference() {
    let opts = GenOptions::new(2, 2, 1).seed(7);
    let case = Case::generate(&opts, RawGateOrder::Exact).unwrap();
    let cfg = KdaConfig::new(2, 2, 0, false, &[0, 0, 0], 1).unwrap();
    let dev = SimDevice::new();
    let actual = run(&dev, &cfg, &case.args).unwrap_or_else(|e| panic!("{e}"));
    let report = compare(&cfg, &case.args, &actual, case.expected.as_ref().unwrap());
    println!("{report}");
    assert!(report.passed(), "{report}");
}
