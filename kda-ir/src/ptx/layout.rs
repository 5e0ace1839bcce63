//! The CTA's shared-memory layout: one dynamic window holding every buffer
//! and mbarrier at a fixed byte offset.
//!
//! Buffers come first, most-aligned first (so padding is only what the
//! alignments force), then the 8-byte mbarriers. A buffer is aligned to the
//! largest of its declared alignment, 16 bytes (vector and `cp.async` access
//! need it) and, when a bulk copy fills it, 128 bytes.

use cranelift_entity::SecondaryMap;

use crate::entities::{Barrier, Buffer};
use crate::kernel::Kernel;
use crate::op::Op;

/// Byte offsets of the CTA's buffers and mbarriers in dynamic shared memory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Each buffer's offset, a multiple of its alignment (see the module docs).
    pub buffers: SecondaryMap<Buffer, u32>,
    /// Each mbarrier's offset, 8-byte aligned, after every buffer.
    pub barriers: SecondaryMap<Barrier, u32>,
    /// Dynamic shared memory to request at launch.
    pub bytes: u32,
}

/// Every mbarrier is one 8-byte word.
pub const MBARRIER_BYTES: u32 = 8;

/// The buffers and mbarriers do not fit the 32-bit shared window (a kernel
/// the verifier would reject for its shared-memory budget).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "the shared-memory layout overflows 32 bits at {what} ({bytes} bytes before it); the budget is 227 KiB per CTA"
)]
pub struct LayoutError {
    /// The buffer or mbarrier that no longer fits, as `buf0 "name"`.
    pub what: String,
    /// Bytes laid out before it (saturated).
    pub bytes: u64,
}

impl Layout {
    /// The layout of a verified kernel (its buffers fit the 227 KiB budget,
    /// so nothing overflows). For a kernel that may not verify use
    /// [`Layout::try_of`]; here offsets past 32 bits saturate at `u32::MAX`
    /// (outside any shared window) rather than wrapping onto another buffer.
    pub fn of(k: &Kernel) -> Layout {
        Layout::compute(k).0
    }

    /// The layout, or which buffer or mbarrier first overflows 32 bits.
    pub fn try_of(k: &Kernel) -> Result<Layout, LayoutError> {
        match Layout::compute(k) {
            (l, None) => Ok(l),
            (_, Some(e)) => Err(e),
        }
    }

    /// The saturated layout and the first overflow, if any.
    fn compute(k: &Kernel) -> (Layout, Option<LayoutError>) {
        let mut bulk = SecondaryMap::<Buffer, bool>::new();
        k.walk(|i, _| {
            if let Op::BulkCopy { buffer, .. } | Op::BulkStore { buffer, .. } = k.insts[i].op {
                bulk[buffer] = true;
            }
        });
        let align = |b: Buffer| {
            let d = &k.buffers[b];
            let min = if bulk[b] { 128 } else { 16 };
            d.align.max(d.elem.bytes()).max(min)
        };
        let mut order: Vec<Buffer> = k.buffers.keys().collect();
        order.sort_by_key(|&b| std::cmp::Reverse(align(b)));

        // Offsets in u64, where a u32 size or alignment cannot overflow.
        let mut first: Option<LayoutError> = None;
        let mut fit = |at: u64, what: &dyn Fn() -> String| -> u32 {
            u32::try_from(at).unwrap_or_else(|_| {
                first.get_or_insert_with(|| LayoutError {
                    what: what(),
                    bytes: at,
                });
                u32::MAX
            })
        };
        let up = |x: u64, a: u32| x.next_multiple_of(u64::from(a.max(1)));
        let mut at: u64 = 0;
        let mut buffers = SecondaryMap::new();
        for b in order {
            let d = &k.buffers[b];
            at = up(at, align(b));
            buffers[b] = fit(at, &|| format!("{b} {:?}", d.name));
            at = at.saturating_add(d.size());
        }
        let mut barriers = SecondaryMap::new();
        at = up(at, MBARRIER_BYTES);
        for (b, d) in k.barriers.iter() {
            barriers[b] = fit(at, &|| format!("{b} {:?}", d.name));
            at = at.saturating_add(u64::from(MBARRIER_BYTES));
        }
        let bytes = fit(up(at, 16), &|| "the end of the window".into());
        (
            Layout {
                buffers,
                barriers,
                bytes,
            },
            first,
        )
    }
}
