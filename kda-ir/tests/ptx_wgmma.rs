//! wgmma in PTX: each variant of the one-warpgroup GEMM
//! ([`kda_ir::testkernels::wgmma_gemm`]) verifies, lowers to
//! `wgmma.mma_async.sync.aligned.m64nNk16.f32.bf16.bf16` with its
//! descriptors, and assembles with ptxas for sm_90a with no spills and none
//! of ptxas's wgmma serialisation warnings (C7510, C7511, C7515), which are
//! errors here. Without ptxas the assembly is skipped with a message.

use kda_ir::testkernels::{wgmma_gemm, wgmma_gemm_pipelined};
use kda_ir::wgmma::Swizzle;

#[test]
fn wgmma_variants_lower_and_assemble() {
    let ptxas = kda_ir::ptxas::find().is_some() && std::env::var_os("KDA_SKIP_PTXAS").is_none();
    if !ptxas {
        eprintln!("ptxas not found (set KDA_PTXAS): checking the PTX text only");
    }
    let mut cases = vec![];
    // The sizes the GEMMs use, and two other multiples of 8.
    for n in [8, 16, 24, 32, 64, 128, 136, 256] {
        cases.push((n, 64, Swizzle::B128));
    }
    for s in Swizzle::ALL {
        cases.push((64, 64, s));
    }
    cases.push((128, 32, Swizzle::B32));
    let mut kernels: Vec<_> = cases
        .into_iter()
        .map(|(n, kdim, s)| (n, s, wgmma_gemm(n, kdim, s)))
        .collect();
    kernels.push((
        128,
        Swizzle::B128,
        wgmma_gemm_pipelined(128, 128, Swizzle::B128),
    ));
    for (n, s, k) in kernels {
        kda_ir::verifier::verify(&k).unwrap_or_else(|e| panic!("{}: {e}", k.name));
        let ptx = kda_ir::ptx::emit(&k).unwrap_or_else(|e| panic!("{}: {e}", k.name));
        let shape = format!("wgmma.mma_async.sync.aligned.m64n{n}k16.f32.bf16.bf16 {{");
        assert!(ptx.contains(&shape), "{}:\n{ptx}", k.name);
        for op in [
            "wgmma.fence.sync.aligned",
            "wgmma.commit_group.sync.aligned",
            "wgmma.wait_group.sync.aligned 0",
            "fence.proxy.async.shared::cta",
        ] {
            assert!(ptx.contains(op), "{}: no {op}", k.name);
        }
        let align = s.align().max(128);
        assert!(
            ptx.contains(&format!(".extern .shared .align {align} ")),
            "{}",
            k.name
        );
        if !ptxas {
            continue;
        }
        let report =
            kda_ir::ptxas::assemble(&ptx).unwrap_or_else(|e| panic!("{}: {e}\n{ptx}", k.name));
        for w in ["C7510", "C7511", "C7515"] {
            assert!(
                !report.log.contains(w),
                "{}: ptxas serialised wgmma ({w}):\n{}",
                k.name,
                report.log
            );
        }
        assert_eq!(report.spills(), 0, "{}: {}", k.name, report.log);
    }
}
