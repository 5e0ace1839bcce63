//! Every kernel the runtime's GPU tests and the launch-overhead bench launch
//! (`common::kernels`) assembles for sm_90a with zero spills, so a broken
//! test kernel shows here, in CI, rather than on the GPU machine.
//! `KDA_SKIP_PTXAS=1` skips the check.

mod common;

use common::kernels::{bulk_stage, cluster_ids, count_launches, pdl_scale};
use kda_ir::pipeline::{Options, compile};

#[test]
fn runtime_test_kernels_assemble_without_spills() {
    let mut kernels = vec![
        pdl_scale(),
        cluster_ids(2, 8),
        cluster_ids(16, 32),
        count_launches(1, 64),
        count_launches(2, 64),
    ];
    for bytes in [2048, 8192, 32768, 65536] {
        kernels.push(bulk_stage(bytes, false));
        kernels.push(bulk_stage(bytes, true));
    }
    for k in &kernels {
        let ptx = compile(k, &Options::default())
            .unwrap_or_else(|e| panic!("{}: {e}", k.name))
            .ptx;
        match kda_ir::ptxas::check_no_spills(&ptx) {
            Ok(Some(r)) => println!("{}: {} registers", k.name, r.registers),
            Ok(None) => println!("{}: not assembled (KDA_SKIP_PTXAS is set)", k.name),
            Err(e) => panic!("{}: {e}", k.name),
        }
    }
}
