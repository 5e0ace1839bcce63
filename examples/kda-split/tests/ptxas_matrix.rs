//! Every configuration of the matrix, plus the default configurations of
//! heads 6 / 12 / 32 at batch 1 / 64, compiles to PTX that
//! `ptxas -arch=sm_90a` assembles with zero spills.

mod common;

use common::MATRIX;
use kda_ir::pipeline::{Options, compile};
use kda_split::KdaConfig;
use kda_split::kernel::{Dtypes, build};

fn assemble(label: &str, cfg: &KdaConfig) -> bool {
    let kernel = build(cfg, &Dtypes::default()).expect("bf16 arguments are supported");
    let compiled = compile(&kernel, &Options::default()).unwrap_or_else(|e| panic!("{label}: {e}"));
    if std::env::var_os("KDA_SKIP_PTXAS").is_some() {
        return true;
    }
    let report = kda_ir::ptxas::assemble(&compiled.ptx).unwrap_or_else(|e| {
        panic!("{label}: {e}\n(run `bash scripts/provision-ptxas.sh` to install ptxas)")
    });
    println!(
        "{label}: {} registers, {} B spill stores, {} B spill loads, {} B stack, {} B dynamic smem",
        report.registers,
        report.spill_stores,
        report.spill_loads,
        report.stack_frame,
        compiled.layout.bytes
    );
    let clean = (report.spill_stores, report.spill_loads) == (0, 0);
    if !clean {
        println!("{label} SPILLS:\n{}", report.log);
    }
    clean
}

#[test]
fn matrix_assembles_without_spills() {
    let spilled: Vec<String> = MATRIX
        .iter()
        .filter(|p| !assemble(&p.label(), &p.config()))
        .map(|p| p.label())
        .collect();
    assert!(
        spilled.is_empty(),
        "configurations that spill: {spilled:#?}"
    );
}

#[test]
fn defaults_assemble_without_spills() {
    for heads in [6, 12, 32] {
        for batch in [1, 64] {
            let cfg = KdaConfig::new(heads, batch, 0, true, &[0, 0, 0], 1).unwrap();
            assert!(assemble(&format!("defaults H{heads} B{batch}"), &cfg));
        }
    }
}
