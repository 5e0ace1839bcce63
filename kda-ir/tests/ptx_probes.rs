//! CTA timeline probes (`ptx::emit_with`, `EmitOptions::probes`): one site
//! per waiting instruction in lowering order, each storing `%clock64` at
//! byte `8 · (5 + site)` of the warp's record, the entry timestamps read
//! before the prologue's loads, the exit words before `ret`, and nothing of
//! it without the option; ptxas assembles the result.

use kda_ir::parse::parse_kernel;
use kda_ir::pipeline::{Options, compile};
use kda_ir::ptx::{EmitOptions, HEADER_WORDS, PROBE_SYMBOL, emit_with, record_words};

fn kernel(name: &str) -> kda_ir::Kernel {
    let text = std::fs::read_to_string(format!(
        "{}/filetests/ptx/{name}.kir",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    parse_kernel(&text).unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[test]
fn every_wait_gets_a_site_storing_at_its_word() {
    for name in ["bulk-store", "dsmem-exchange", "ring-pipeline"] {
        let k = compile(&kernel(name), &Options::default())
            .unwrap()
            .scheduled;
        let plain = emit_with(&k, &EmitOptions::default()).unwrap();
        assert!(plain.probes.is_none() && !plain.ptx.contains(PROBE_SYMBOL));
        let probed = emit_with(&k, &EmitOptions { probes: true }).unwrap();
        let sites = probed.probes.unwrap();
        assert!(!sites.is_empty(), "{name} waits");
        let ptx = probed.ptx;
        assert!(ptx.contains(&format!(".global .align 8 .u64 {PROBE_SYMBOL} = 0;")));
        // Each site: a comment naming the wait, then its clock's store.
        let mut at = 0;
        for (n, site) in sites.iter().enumerate() {
            let mark = format!("// probe {n}: passed `{}`", site.what);
            let i = ptx[at..]
                .find(&mark)
                .unwrap_or_else(|| panic!("{name}: {mark}"))
                + at;
            let store = format!("+{}], ", 8 * (HEADER_WORDS + n));
            let next = ptx[i..].find("st.global.u64").unwrap() + i;
            assert!(
                ptx[next..].lines().next().unwrap().contains(&store),
                "{name} site {n}"
            );
            at = next;
        }
        // The entry clocks come before the first parameter load, the exit
        // words (bytes 24 and 32) right before `ret`.
        let clock = ptx.find("%clock64").unwrap();
        assert!(
            clock < ptx.find("ld.param").unwrap(),
            "{name}: entry clock first"
        );
        let ret = ptx.rfind("ret;").unwrap();
        let exit = ptx.rfind("probes: exit").unwrap();
        assert!(exit < ret && ptx[exit..ret].contains("+32], "), "{name}");
        assert_eq!(record_words(sites.len()), Some(5 + sites.len()));
        let report = kda_ir::ptxas::assemble(&ptx).unwrap_or_else(|e| {
            panic!("{name}: {e}\n(run `bash scripts/provision-ptxas.sh` to install ptxas)")
        });
        println!(
            "{name}: {} sites, {} registers",
            sites.len(),
            report.registers
        );
    }
}
