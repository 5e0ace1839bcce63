//! Shared by the `ptx_*` tests: assemble with ptxas, or explain how to get it.

use kda_ir::ptxas::{self, PtxasReport};

/// Assemble `ptx` with `ptxas -arch=sm_90a -v`; `None` when `KDA_SKIP_PTXAS=1`.
/// Panics with ptxas's errors, or with how to provision ptxas when it is missing.
pub fn assemble(ptx: &str) -> Option<PtxasReport> {
    if std::env::var("KDA_SKIP_PTXAS").is_ok_and(|v| v == "1") {
        eprintln!("KDA_SKIP_PTXAS=1: not assembling");
        return None;
    }
    match ptxas::assemble(ptx) {
        Ok(r) => Some(r),
        Err(e @ ptxas::PtxasError::NotFound) => {
            panic!("{e}\n(run scripts/provision-ptxas.sh, or set KDA_SKIP_PTXAS=1 to skip)")
        }
        Err(e) => panic!("{e}\n--- PTX ---\n{}", numbered(ptx)),
    }
}

pub fn numbered(ptx: &str) -> String {
    ptx.lines()
        .enumerate()
        .map(|(n, l)| format!("{:4} {l}\n", n + 1))
        .collect()
}
