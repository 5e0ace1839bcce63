//! The CTA timeline probes (`pipeline::Options::probes`, what `kda-split
//! trace` launches) on the tuned defaults the trace is for: one site per
//! waiting instruction of the scheduled kernel, PTX that `ptxas -arch=sm_90a`
//! assembles without spills, and the registers the probes add printed
//! beside the plain build's (the trace reports both).

use kda_ir::pipeline::{Options, compile};
use kda_ir::ptxas::check_no_spills;
use kda_split::KdaConfig;
use kda_split::run::contiguous_kernel;

fn waits(k: &kda_ir::Kernel) -> usize {
    let mut n = 0;
    k.walk(|i, _| n += usize::from(kda_ir::ptx::waits(&k.insts[i].op)));
    n
}

#[test]
fn probed_tuned_defaults_assemble_with_one_site_per_wait() {
    for (heads, batch, tokens) in [(12, 128, 1), (12, 64, 4), (12, 8, 4), (12, 1, 1)] {
        let cfg = KdaConfig::tuned(heads, batch, 0, true, tokens).unwrap();
        let kernel = contiguous_kernel(&cfg, false).unwrap();
        let label = format!("H{heads} B{batch} T{tokens} {:?}", cfg.schedule.raw());
        let plain = compile(
            &kernel,
            &Options {
                probes: false,
                ..Options::default()
            },
        )
        .unwrap();
        let probed = compile(
            &kernel,
            &Options {
                probes: true,
                ..Options::default()
            },
        )
        .unwrap();
        assert!(plain.probes.is_none());
        let sites = probed.probes.as_ref().expect("probes were asked for");
        assert_eq!(sites.len(), waits(&probed.scheduled), "{label}");
        assert!(
            sites.len() >= 2,
            "{label}: a cluster kernel waits at least twice"
        );
        assert!(probed.ptx.contains(".global .align 8 .u64 kda_probes = 0;"));
        assert!(probed.ptx.contains("%globaltimer") && probed.ptx.contains("%clock64"));
        assert!(
            !plain.ptx.contains("kda_probes"),
            "{label}: plain PTX has no probes"
        );
        let p = check_no_spills(&plain.ptx).unwrap_or_else(|e| panic!("{label}: {e}"));
        let q = check_no_spills(&probed.ptx).unwrap_or_else(|e| panic!("{label} probed: {e}"));
        if let (Some(p), Some(q)) = (p, q) {
            // What `kda-split trace` launches: the probed build held to the
            // plain build's registers, so both have the same CTAs per SM.
            let mut held = kernel.clone();
            held.max_regs = Some(p.registers.div_ceil(8) * 8);
            let held = compile(
                &held,
                &Options {
                    probes: true,
                    ..Options::default()
                },
            )
            .unwrap();
            let h = kda_ir::ptxas::assemble(&held.ptx).unwrap();
            println!(
                "{label}: {} sites; {} registers plain, {} probed, held: {} registers, {} B spill stores",
                sites.len(),
                p.registers,
                q.registers,
                h.registers,
                h.spill_stores
            );
        }
    }
}
