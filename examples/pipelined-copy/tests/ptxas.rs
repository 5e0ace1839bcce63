//! Every stage count, with both output paths, and every configuration the
//! bench measures, assembles with ptxas for sm_90a with no spills: the
//! ring's phase bits live in registers.
//! `KDA_SKIP_PTXAS=1` skips ptxas.

use ::pipelined_copy::{Ring, pipelined_copy};
use kda_ir::pipeline::{Options, compile};

#[test]
fn every_stage_count_assembles_without_spills() {
    let mut rings: Vec<Ring> = (1..=4)
        .flat_map(|s| [Ring::new(s, false), Ring::new(s, true)])
        .collect();
    rings.extend(::pipelined_copy::bench::default_rings());
    rings.extend(
        ::pipelined_copy::bench::sweep_points()
            .into_iter()
            .map(|p| p.ring),
    );
    rings.dedup();
    for ring in &rings {
        let (stages, bulk_out) = (ring.stages, ring.bulk_out);
        let k = pipelined_copy(ring);
        let ptx = compile(&k, &Options::default())
            .unwrap_or_else(|e| panic!("{stages} stages: {e}"))
            .ptx;
        let stores = ptx
            .matches("cp.async.bulk.global.shared::cta.bulk_group")
            .count();
        assert_eq!(
            ptx.contains("L2::cache_hint"),
            ring.evict_first,
            "{ring:?}: the L2 policy\n{ptx}"
        );
        assert_eq!(
            stores, bulk_out as usize,
            "{stages} stages, bulk_out {bulk_out}"
        );
        if bulk_out {
            let barrier = format!("bar.sync 1, {}", ring.consumers);
            for want in [
                "fence.proxy.async.shared::cta",
                "cp.async.bulk.commit_group",
                "cp.async.bulk.wait_group.read",
                &barrier,
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
