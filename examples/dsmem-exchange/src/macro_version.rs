//! The DSMEM exchange demo written with `#[cluster_kernel]`: the same kernel
//! as [`builder_api`](crate::builder_api), instruction for instruction.

use kda::cluster_kernel;

use crate::LANES;

/// Build the demo for a cluster of `cluster` CTAs.
#[cluster_kernel(block = 64, cluster = cluster)]
pub fn dsmem_exchange(
    #[comptime] cluster: u32,
    #[produced]
    #[strides({ LANES }, 1)]
    input: Tensor<f32, rows, { LANES }>,
    #[strides({ LANES }, 1)] output: Tensor<f32, rows, { LANES }>,
) {
    let sender = role!(0..32);
    let receiver = role!(32..64);
    let inbox_full = mbarrier!(arrivals = 1, tx = 4 * LANES, roles = [sender, receiver]);
    let inbox = shared!([f32; LANES], guard = inbox_full, roles = [sender, receiver]);

    pdl_trigger();
    let lane = thread_idx() & 31;
    let cta = block_idx(0);
    let rank = cluster_rank();

    in_role!(receiver, {
        if lane == 0 {
            inbox_full.init();
            inbox_full.arm();
        }
        fence_mbarrier_init();
    });
    cluster_arrive_relaxed();
    cluster_wait();

    in_role!(sender, {
        pdl_wait();
        let x = input[[cta, lane]];
        let y = fma(x, 2.0, rank.cast::<f32>());
        send!(
            inbox[lane] = y,
            to = rank.add_mod(1, cluster),
            completes = inbox_full
        );
    });

    in_role!(receiver, {
        inbox_full.wait();
        output[[cta, lane]] = inbox[lane];
    });
}

#[cfg(test)]
mod tests {
    use kda_ir::pipeline::{Options, compile};

    /// The IR text without source locations (`; @file:line:col`).
    fn strip_ir(text: &str) -> String {
        let lines = text.lines().map(|l| l.split("  ; @").next().unwrap_or(l));
        lines.collect::<Vec<_>>().join("\n")
    }

    /// The PTX without its source-location comments (`// file.rs:line:col  <ir>`).
    fn strip_ptx(text: &str) -> String {
        let lines = text.lines().filter(|l| !l.trim_start().starts_with("//"));
        lines.collect::<Vec<_>>().join("\n")
    }

    #[test]
    fn same_ir_as_the_builder_version() {
        for cluster in [1, 2, 4, 8] {
            let a = kda_ir::write::write_kernel(&crate::builder_api(cluster));
            let b = kda_ir::write::write_kernel(&super::dsmem_exchange(cluster));
            assert_eq!(
                strip_ir(&a),
                strip_ir(&b),
                "cluster {cluster}\n--- builder\n{a}\n--- macro\n{b}"
            );
        }
    }

    #[test]
    fn same_ptx_as_the_builder_version() {
        let opts = Options {
            dump: None,
            ..Options::default()
        };
        for cluster in [2, 4] {
            let a = compile(&crate::builder_api(cluster), &opts).expect("builder version compiles");
            let b =
                compile(&super::dsmem_exchange(cluster), &opts).expect("macro version compiles");
            assert_eq!(strip_ptx(&a.ptx), strip_ptx(&b.ptx), "cluster {cluster}");
        }
    }

    #[test]
    fn instructions_carry_the_kernel_source_lines() {
        let k = super::dsmem_exchange(2);
        for (_, inst) in k.insts.iter() {
            assert!(
                inst.loc.file.ends_with("macro_version.rs"),
                "{} at {}",
                inst.op.name(),
                inst.loc
            );
        }
    }
}
