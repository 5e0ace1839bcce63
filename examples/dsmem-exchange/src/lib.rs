//! The DSMEM exchange demo: a cluster of `C` CTAs of two warps each.
//!
//! * warp 0 (`sender`) waits for the preceding launch (PDL), reads its CTA's
//!   row of the produced `input`, computes `2·x + rank` and `st.async`s the 32
//!   values into the *next* CTA's `inbox`, completing that CTA's `inbox_full`
//!   mbarrier with exactly 128 transaction bytes;
//! * warp 1 (`receiver`) arms its own `inbox_full` (one arrival plus 128
//!   bytes), waits on it and writes what arrived to `output`.
//!
//! Every CTA initialises its barrier before the cluster barrier, and senders
//! pass that cluster barrier before their first DSMEM send, so a peer's
//! barrier always exists when bytes reach it. Dependents are released at entry.

pub mod macro_version;

use kda_ir::Kernel;

/// Lanes (and so values) per CTA.
pub use kda_ir::testkernels::LANES;

/// Build the demo for a cluster of `cluster` CTAs with the IR builder API.
///
/// The builder code lives in `kda-ir` (`kda-ir/src/testkernels.rs`,
/// `kda_ir::testkernels::dsmem_exchange`), where kda's own tests and benches
/// use the same kernel without depending on this example; read it there.
/// [`macro_version`] is the same kernel written with `#[cluster_kernel]`.
pub fn builder_api(cluster: u32) -> Kernel {
    kda_ir::testkernels::dsmem_exchange(cluster)
}

/// What the demo computes, on the host: `output[cta] = 2·input[prev] + rank(prev)`
/// where `prev` is the CTA of the same cluster that sends to `cta`.
pub fn reference(input: &[f32], cluster: u32) -> Vec<f32> {
    kda_ir::testkernels::dsmem_exchange_reference(input, cluster)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_and_prints() {
        let k = builder_api(2);
        let text = kda_ir::write::write_kernel(&k);
        assert!(text.contains("st.async"), "{text}");
        assert!(text.contains("mbarrier.wait bar0, phase 0"), "{text}");
    }

    #[test]
    fn reference_rotates_within_cluster() {
        let input: Vec<f32> = (0..4 * LANES).map(|i| i as f32).collect();
        let out = reference(&input, 2);
        // CTA 1 receives from CTA 0 (rank 0): 2·x
        assert_eq!(out[LANES as usize], 0.0);
        // CTA 0 receives from CTA 1 (rank 1): 2·x + 1
        assert_eq!(out[0], 2.0 * LANES as f32 + 1.0);
    }
}
