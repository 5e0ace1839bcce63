//! Declarations: the launch shape, tensors, scalars, shared buffers and
//! mbarriers, and the shared-memory budget they add up to.

use super::Ctx;
use super::signature::MAX_TX;
use crate::kernel::{Access, ClusterPolicy};
use crate::loc::Loc;
use crate::types::Scalar;

/// The largest cluster the verifier accepts (CTAs; 16 is Hopper's
/// non-portable limit). Checks that walk the cluster's ranks assume it.
pub(crate) const MAX_CLUSTER: u32 = 16;

/// Shared memory one CTA may use on sm_90 (227 KiB).
pub(crate) const SMEM_LIMIT: u64 = 227 * 1024;

/// Bytes (and alignment) of one mbarrier.
const MBARRIER_BYTES: u64 = 8;

pub(super) fn check(cx: &mut Ctx) {
    launch(cx);
    tensors(cx);
    buffers(cx);
    barriers(cx);
    budget(cx);
    hints(cx);
}

fn launch(cx: &mut Ctx) {
    let l = &cx.k.launch;
    let here = Loc::synthetic();
    if l.block == 0 || !l.block.is_multiple_of(32) || l.block > 1024 {
        cx.decl_error(
            &here,
            format!(
                "block of {} threads; allowed: a positive multiple of 32 up to 1024",
                l.block
            ),
        );
    }
    if !(1..=MAX_CLUSTER).contains(&l.cluster) {
        cx.decl_error(
            &here,
            format!("cluster of {} CTAs; allowed: 1 to {MAX_CLUSTER}", l.cluster),
        );
    }
    if l.cluster == 1 && l.cluster_policy != ClusterPolicy::Default {
        cx.decl_error(
            &here,
            format!(
                "cluster_policy={} without clusters: a scheduling policy places clusters of more than one CTA; allowed with cluster=1: default",
                l.cluster_policy.name()
            ),
        );
    }
    if l.min_blocks_per_sm == Some(0) {
        cx.decl_error(
            &here,
            "min_blocks 0; allowed: a positive count of CTAs per SM",
        );
    }
}

fn tensors(cx: &mut Ctx) {
    let k = cx.k;
    for (t, d) in k.tensors.iter() {
        let name = format!("tensor {t} {:?}", d.name);
        if d.shape.len() != d.strides.len() {
            cx.decl_error(
                &d.loc,
                format!(
                    "{name} has {} dimensions but {} strides; give one stride per dimension",
                    d.shape.len(),
                    d.strides.len()
                ),
            );
        }
        if d.dtype == Scalar::Bool {
            cx.decl_error(
                &d.loc,
                format!("{name} has dtype bool, which has no memory form; use a numeric dtype"),
            );
        } else if !d.align.is_power_of_two() || d.align < d.dtype.bytes() {
            cx.decl_error(
                &d.loc,
                format!("{name} declares align {}; allowed: a power of two of at least {} (its dtype's size)", d.align, d.dtype.bytes()),
            );
        }
    }
    for (s, d) in k.scalars.iter() {
        if d.ty == Scalar::Bool {
            cx.decl_error(
                &d.loc,
                format!(
                    "scalar {s} {:?} is bool, which cannot be passed at launch; pass an integer",
                    d.name
                ),
            );
        }
    }
}

/// The schedule hints name declared tensors, each once, a wave holds at
/// least one row chain, staging through shared memory names a tensor the
/// kernel reads and storing through it one the kernel writes.
fn hints(cx: &mut Ctx) {
    let k = cx.k;
    let here = Loc::synthetic();
    if k.schedule.wave == Some(0) {
        cx.decl_error(
            &here,
            "the wave hint is 0; a wave issues at least one row chain",
        );
    }
    for (name, hinted) in k.schedule.tensor_hints() {
        for (n, &t) in hinted.iter().enumerate() {
            if k.tensors.get(t).is_none() {
                cx.decl_error(
                    &here,
                    format!(
                        "the {name} hint names {t}, which is not a declared tensor (the kernel declares {})",
                        k.tensors.len()
                    ),
                );
            } else if hinted[..n].contains(&t) {
                cx.decl_error(
                    &here,
                    format!("the {name} hint names {t} twice; name each tensor once"),
                );
            }
        }
    }
    // Staging moves a tensor's reads; on a tensor the kernel only writes it
    // would change nothing, which is not what naming it asks for.
    for &t in &k.schedule.stage_through_shared {
        if let Some(d) = k.tensors.get(t)
            && d.access == Access::Write
        {
            cx.decl_error(
                &d.loc,
                format!(
                    "the stage_through_shared hint names tensor {t} {:?}, which the kernel only writes; \
                     the hint stages a tensor's reads (its tiles and early 16-byte loads) through shared memory",
                    d.name
                ),
            );
        }
    }
    // Likewise storing through shared memory moves a tensor's stored tiles.
    for &t in &k.schedule.store_through_shared {
        if let Some(d) = k.tensors.get(t)
            && d.access == Access::Read
        {
            cx.decl_error(
                &d.loc,
                format!(
                    "the store_through_shared hint names tensor {t} {:?}, which the kernel only reads; \
                     the hint stores a tensor's tiles through shared memory, one bulk store each",
                    d.name
                ),
            );
        }
    }
}

fn buffers(cx: &mut Ctx) {
    let k = cx.k;
    for (b, d) in k.buffers.iter() {
        let name = format!("shared buffer {b} {:?}", d.name);
        if d.elem == Scalar::Bool {
            cx.decl_error(
                &d.loc,
                format!("{name} has bool elements, which have no memory form; use a numeric type"),
            );
        } else if !d.align.is_power_of_two() || d.align < d.elem.bytes() {
            cx.decl_error(
                &d.loc,
                format!("{name} declares align {}; allowed: a power of two of at least {} (its element's size)", d.align, d.elem.bytes()),
            );
        }
        if d.len == 0 {
            cx.decl_error(
                &d.loc,
                format!("{name} has no elements; allowed: a positive length"),
            );
        }
    }
}

fn barriers(cx: &mut Ctx) {
    let k = cx.k;
    for (b, d) in k.barriers.iter() {
        let name = format!("mbarrier {b} {:?}", d.name);
        if d.arrivals == 0 || d.arrivals > MAX_TX {
            cx.decl_error(
                &d.loc,
                format!(
                    "{name} counts {} arrivals per phase; allowed: 1..={MAX_TX}",
                    d.arrivals
                ),
            );
        }
        if d.tx_bytes > MAX_TX {
            cx.decl_error(
                &d.loc,
                format!(
                    "{name} expects {} transaction bytes per phase; allowed: at most {MAX_TX}",
                    d.tx_bytes
                ),
            );
        }
    }
}

/// Buffers and mbarriers laid out largest alignment first (the least padding
/// any layout can have) must fit in [`SMEM_LIMIT`].
///
/// Sizes and alignments are taken in `u64` and summed saturating: a declared
/// `u32` length or alignment cannot overflow them, and a sum past `u64::MAX`
/// is over the limit either way. An alignment that is not a power of two
/// (reported by `buffers`) counts as the next one, which in `u64` always
/// exists for a `u32`.
fn budget(cx: &mut Ctx) {
    let k = cx.k;
    let mut items: Vec<(u64, u64)> = k
        .buffers
        .values()
        .map(|d| (d.size(), u64::from(d.align.max(1)).next_power_of_two()))
        .collect();
    items.extend(
        k.barriers
            .values()
            .map(|_| (MBARRIER_BYTES, MBARRIER_BYTES)),
    );
    items.sort_by_key(|&(_, align)| std::cmp::Reverse(align));
    let total = items.iter().fold(0u64, |at, &(bytes, align)| {
        at.checked_next_multiple_of(align)
            .unwrap_or(u64::MAX)
            .saturating_add(bytes)
    });
    if total <= SMEM_LIMIT {
        return;
    }
    let buffers = k
        .buffers
        .values()
        .fold(0u64, |sum, d| sum.saturating_add(d.size()));
    let nbar = k.barriers.len() as u64;
    let largest = k.buffers.iter().max_by_key(|(_, d)| d.size());
    let (loc, which) = match largest {
        Some((b, d)) => (
            d.loc.clone(),
            format!(
                "; the largest buffer is {b} {:?} ({} bytes)",
                d.name,
                d.size()
            ),
        ),
        None => (Loc::synthetic(), String::new()),
    };
    cx.decl_error(
        &loc,
        format!(
            "shared memory needs {total} bytes (buffers {buffers} + {nbar} mbarriers × 8, with alignment); the limit is {SMEM_LIMIT} bytes (227 KiB) per CTA{which}"
        ),
    );
}
