//! Every stage count, with both output paths, assembles with ptxas for
//! sm_90a with no spills: the ring's phase bits live in registers.
//! `KDA_SKIP_PTXAS=1` skips ptxas.

use kda_ir::pipeline::{Options, compile};
use pipelined_copy::pipelined_copy;

#[test]
fn every_stage_count_assembles_without_spills() {
    for (stages, bulk_out) in (1..=4).flat_map(|s| [(s, false), (s, true)]) {
        let k = pipelined_copy(stages, bulk_out);
        let ptx = compile(&k, &Options::default())
            .unwrap_or_else(|e| panic!("{stages} stages: {e}"))
            .ptx;
        let stores = ptx
            .matches("cp.async.bulk.global.shared::cta.bulk_group.L2::cache_hint")
            .count();
        assert_eq!(
            stores, bulk_out as usize,
            "{stages} stages, bulk_out {bulk_out}"
        );
        if bulk_out {
            for want in [
                "fence.proxy.async.shared::cta",
                "cp.async.bulk.commit_group",
                "cp.async.bulk.wait_group.read",
                "bar.sync 1, 128",
            ] {
                assert!(ptx.contains(want), "{stages} stages: no `{want}`\n{ptx}");
            }
            assert!(
                !ptx.contains("st.global"),
                "{stages} stages: st.global\n{ptx}"
            );
        }
        assert!(
            ptx.contains("mbarrier.try_wait.parity.shared::cta.b64"),
            "{ptx}"
        );
        assert!(
            !ptx.contains(".local"),
            "{stages} stages: local memory\n{ptx}"
        );
        match kda_ir::ptxas::check_no_spills(&ptx) {
            Ok(Some(r)) => println!(
                "{stages} stages, bulk_out {bulk_out}: {} registers",
                r.registers
            ),
            Ok(None) => {}
            Err(e) => panic!(
                "{stages} stages: {e}\n(run `bash scripts/provision-ptxas.sh` to install ptxas)"
            ),
        }
    }
}
