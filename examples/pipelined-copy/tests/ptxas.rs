//! Every stage count assembles with ptxas for sm_90a with no spills: the
//! ring's phase bits live in registers. `KDA_SKIP_PTXAS=1` skips ptxas.

use kda_ir::pipeline::{Options, compile};
use pipelined_copy::pipelined_copy;

#[test]
fn every_stage_count_assembles_without_spills() {
    for stages in 1..=4 {
        let k = pipelined_copy(stages);
        let ptx = compile(&k, &Options::default())
            .unwrap_or_else(|e| panic!("{stages} stages: {e}"))
            .ptx;
        assert!(
            ptx.contains("mbarrier.try_wait.parity.shared::cta.b64"),
            "{ptx}"
        );
        assert!(
            !ptx.contains(".local"),
            "{stages} stages: local memory\n{ptx}"
        );
        match kda_ir::ptxas::check_no_spills(&ptx) {
            Ok(Some(r)) => println!("{stages} stages: {} registers", r.registers),
            Ok(None) => {}
            Err(e) => panic!(
                "{stages} stages: {e}\n(run `bash scripts/provision-ptxas.sh` to install ptxas)"
            ),
        }
    }
}
