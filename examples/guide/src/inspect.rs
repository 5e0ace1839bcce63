//! What a kernel became: the IR as traced, the IR after the scheduling
//! passes, the PTX, and ptxas's resource report.

use std::error::Error;

use kda::ir::Kernel;
use kda::ir::pipeline::{Options, compile};
use kda::ir::write::write_kernel;

/// One view of `kernel`: `ir`, `scheduled`, `ptx` or `ptxas`.
pub fn show(kernel: &Kernel, view: &str) -> Result<String, Box<dyn Error>> {
    Ok(match view {
        "ir" => write_kernel(kernel),
        "scheduled" => write_kernel(&compile(kernel, &Options::default())?.scheduled),
        "ptx" => compile(kernel, &Options::default())?.ptx,
        "ptxas" => {
            let ptx = compile(kernel, &Options::default())?.ptx;
            let report = kda::ir::ptxas::assemble(&ptx)?; // ptxas -arch=sm_90a -v
            format!(
                "{} registers, {} B spilled, {} B stack, {} B static shared memory\n{}",
                report.registers,
                report.spills(),
                report.stack_frame,
                report.shared_bytes,
                report.log
            )
        }
        other => return Err(format!("unknown view `{other}`: ir, scheduled, ptx or ptxas").into()),
    })
}
