//! The DSMEM exchange demo compiles through the whole pipeline and ptxas
//! assembles it for sm_90a without spills.

mod ptx_common;

use kda_ir::pipeline::{Options, compile};
use kda_ir::testkernels::dsmem_exchange;

#[test]
fn demo_assembles_without_spills() {
    for cluster in [2, 4, 8] {
        let k = dsmem_exchange(cluster);
        let c = compile(&k, &Options::default()).unwrap_or_else(|e| panic!("{e}"));
        if cluster == 2 {
            println!("{}", c.ptx);
        }
        assert!(
            c.ptx
                .contains(&format!(".reqnctapercluster {cluster}, 1, 1"))
        );
        assert!(
            c.ptx
                .contains("st.async.shared::cluster.mbarrier::complete_tx::bytes.f32")
        );
        // Every instruction group names its DSL line.
        assert!(c.ptx.contains("// kda-ir/src/testkernels.rs:"), "{}", c.ptx);
        // inbox (128 bytes) then the mbarrier.
        assert_eq!(c.layout.bytes, 144);
        if let Some(r) = ptx_common::assemble(&c.ptx) {
            println!("{}", r.log);
            assert_eq!(r.spills(), 0, "{}", r.log);
            assert_eq!(r.stack_frame, 0, "{}", r.log);
        }
    }
}

#[test]
fn kda_dump_writes_every_stage() {
    let dir = std::env::temp_dir().join(format!("kda-dump-{}", std::process::id()));
    let opts = Options {
        dump: Some(dir.clone()),
        ..Options::default()
    };
    compile(&dsmem_exchange(2), &opts).unwrap();
    let mut files = vec!["dsmem_exchange.0-input.ir".to_string()];
    for (n, p) in kda_ir::pipeline::PASSES.iter().enumerate() {
        files.push(format!("dsmem_exchange.{}-{}.ir", n + 1, p.name));
    }
    files.push("dsmem_exchange.ptx".into());
    assert!(files.contains(&"dsmem_exchange.2-place_pdl_wait.ir".to_string()));
    for f in &files {
        let text = std::fs::read_to_string(dir.join(f)).unwrap_or_else(|e| panic!("{f}: {e}"));
        assert!(!text.is_empty());
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn unknown_passes_are_refused() {
    let opts = Options {
        skip: vec!["hoist".into()],
        ..Options::default()
    };
    let e = compile(&dsmem_exchange(2), &opts).unwrap_err();
    assert!(e.to_string().contains("unknown pass `hoist`"), "{e}");
}
