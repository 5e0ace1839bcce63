//! Dumping a kernel without `cargo expand`: the generated builder function
//! returns the traced `Kernel`; `kda::ir::write::write_kernel` prints it and
//! `kda::ir::pipeline::compile` (or `KDA_DUMP=<dir>`) writes every stage and
//! the PTX.

use kda::cluster_kernel;
use kda::ir::pipeline::{Options, compile};

#[cluster_kernel(block = 32)]
fn tiny(#[produced] x: Tensor<f32, rows, 32>, y: Tensor<f32, rows, 32>) {
    let lane = lane_id();
    pdl_wait();
    y[[block_idx(0), lane]] = x[[block_idx(0), lane]] * 2.0;
}

#[test]
fn traced_ir_and_ptx_are_available() {
    let k = tiny();
    let ir = kda::ir::write::write_kernel(&k);
    assert!(ir.starts_with("kernel tiny block=32 cluster=1 {"), "{ir}");
    let dir = std::env::temp_dir().join(format!("kda-dump-{}", std::process::id()));
    let opts = Options {
        dump: Some(dir.clone()),
        ..Options::default()
    };
    let compiled = compile(&k, &opts).unwrap_or_else(|e| panic!("{e}"));
    assert!(compiled.ptx.contains(".entry tiny"), "{}", compiled.ptx);
    assert!(
        compiled.ptx.contains("macro_dump.rs:"),
        "PTX comments name the kernel's lines"
    );
    let files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(files.contains(&"tiny.0-input.ir".to_string()), "{files:?}");
    assert!(files.contains(&"tiny.ptx".to_string()), "{files:?}");
    std::fs::remove_dir_all(&dir).ok();
}

/// `cluster_policy = ..` is an expression of the comptime parameters, like
/// every `cluster_kernel` argument.
#[cluster_kernel(
    block = 32,
    cluster = 2,
    cluster_policy = if balance { ClusterPolicy::LoadBalancing } else { ClusterPolicy::Default }
)]
fn paired(
    #[comptime] balance: bool,
    #[produced] x: Tensor<f32, rows, 32>,
    y: Tensor<f32, rows, 32>,
) {
    let lane = lane_id();
    pdl_wait();
    y[[block_idx(0), lane]] = x[[block_idx(0), lane]] + 1.0;
}

#[test]
fn the_cluster_policy_reaches_the_ir_header_and_the_ptx() {
    use kda::ir::ClusterPolicy;
    for (balance, policy) in [
        (true, ClusterPolicy::LoadBalancing),
        (false, ClusterPolicy::Default),
    ] {
        let k = paired(balance);
        assert_eq!(k.launch.cluster_policy, policy);
        let ir = kda::ir::write::write_kernel(&k);
        let header = ir.lines().next().unwrap_or_default();
        assert_eq!(
            header.contains("cluster_policy=balance"),
            balance,
            "{header}"
        );
        let reparsed = kda::ir::parse::parse_kernel(&ir).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(reparsed.launch.cluster_policy, policy);
        let ptx = compile(&k, &Options::default())
            .unwrap_or_else(|e| panic!("{e}"))
            .ptx;
        assert_eq!(
            ptx.contains("// cluster scheduling policy: balance"),
            balance,
            "{ptx}"
        );
        if let Err(e) = kda::ir::ptxas::check_no_spills(&ptx) {
            panic!("{e}\n(run `bash scripts/provision-ptxas.sh` to install ptxas)");
        }
    }
}
