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

fn align_up(x: u32, a: u32) -> u32 {
    x.div_ceil(a) * a
}

impl Layout {
    /// Lay out `k`'s buffers and mbarriers: the layout the PTX of `k` assumes.
    pub fn of(k: &Kernel) -> Layout {
        let mut bulk = SecondaryMap::<Buffer, bool>::new();
        k.walk(|i, _| {
            if let Op::BulkCopy { buffer, .. } = k.insts[i].op {
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

        let mut at = 0;
        let mut buffers = SecondaryMap::new();
        for b in order {
            at = align_up(at, align(b));
            buffers[b] = at;
            at += k.buffers[b].bytes();
        }
        let mut barriers = SecondaryMap::new();
        at = align_up(at, MBARRIER_BYTES);
        for b in k.barriers.keys() {
            barriers[b] = at;
            at += MBARRIER_BYTES;
        }
        Layout {
            buffers,
            barriers,
            bytes: align_up(at, 16),
        }
    }
}
