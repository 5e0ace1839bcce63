//! Global memory of the simulator.
//!
//! A [`SimBuffer`] holds its bytes as little-endian 32-bit words in
//! `AtomicU32`s. Clusters run in parallel on several host threads and may
//! write disjoint parts of one tensor (or, in a racy kernel, the same part):
//! relaxed atomic loads and stores compile to plain moves, so this costs
//! nothing over a `Vec<u8>` while keeping concurrent writes sound. A 2-byte
//! store clears and sets only its own half of the word (`fetch_and` then
//! `fetch_or`), so neighbouring bf16 elements written by different clusters
//! never clobber each other.
//!
//! A [`TensorView`] is one kernel tensor bound to its buffer for a launch:
//! shape and strides resolved with the launch's symbol values, so that every
//! access can be bounds-checked per dimension.

use std::sync::atomic::{AtomicU32, Ordering::Relaxed};

use kda_ir::{Dim, Kernel, Tensor};

/// Device memory of the simulator: the bytes of one tensor.
#[derive(Debug)]
pub struct SimBuffer {
    words: Box<[AtomicU32]>,
    len: usize,
}

impl SimBuffer {
    /// A buffer holding a copy of `bytes`.
    pub fn from_bytes(bytes: &[u8]) -> SimBuffer {
        let words = bytes
            .chunks(4)
            .map(|c| {
                let mut w = [0u8; 4];
                w[..c.len()].copy_from_slice(c);
                AtomicU32::new(u32::from_le_bytes(w))
            })
            .collect();
        SimBuffer {
            words,
            len: bytes.len(),
        }
    }

    /// A buffer of `len` zero bytes.
    pub fn zeroed(len: usize) -> SimBuffer {
        SimBuffer {
            words: (0..len.div_ceil(4)).map(|_| AtomicU32::new(0)).collect(),
            len,
        }
    }

    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// A copy of the bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.words.len() * 4);
        for w in self.words.iter() {
            out.extend_from_slice(&w.load(Relaxed).to_le_bytes());
        }
        out.truncate(self.len);
        out
    }

    /// Overwrite the bytes from `bytes` (same length).
    pub fn write_bytes(&self, bytes: &[u8]) {
        assert_eq!(
            bytes.len(),
            self.len,
            "SimBuffer::write_bytes: length mismatch"
        );
        for (w, c) in self.words.iter().zip(bytes.chunks(4)) {
            let mut b = [0u8; 4];
            b[..c.len()].copy_from_slice(c);
            w.store(u32::from_le_bytes(b), Relaxed);
        }
    }

    pub(crate) fn words(&self) -> &[AtomicU32] {
        &self.words
    }
}

/// Read `out.len()` words (or, for `bytes == 2`, one half word into `out[0]`)
/// at a byte offset aligned to the access size.
#[inline]
pub(crate) fn read_words(mem: &[AtomicU32], byte_off: usize, bytes: u32, out: &mut [u32]) {
    if bytes == 2 {
        let w = mem[byte_off / 4].load(Relaxed);
        out[0] = if byte_off & 2 == 0 {
            w & 0xffff
        } else {
            w >> 16
        };
    } else {
        let base = byte_off / 4;
        for (i, o) in out.iter_mut().enumerate() {
            *o = mem[base + i].load(Relaxed);
        }
    }
}

/// `atom.add` on the aligned word at `byte_off`: adds `v` (wrapping) in one
/// host atomic, so CTAs simulated on different host threads never see the
/// same old value; returns the old value.
#[inline]
pub(crate) fn fetch_add_word(mem: &[AtomicU32], byte_off: usize, v: u32) -> u32 {
    mem[byte_off / 4].fetch_add(v, Relaxed)
}

/// Write words (or, for `bytes == 2`, the low half of `src[0]`) at a byte offset
/// aligned to the access size.
#[inline]
pub(crate) fn write_words(mem: &[AtomicU32], byte_off: usize, bytes: u32, src: &[u32]) {
    if bytes == 2 {
        let w = &mem[byte_off / 4];
        let shift = if byte_off & 2 == 0 { 0 } else { 16 };
        w.fetch_and(!(0xffff << shift), Relaxed);
        w.fetch_or((src[0] & 0xffff) << shift, Relaxed);
    } else {
        let base = byte_off / 4;
        for (i, &s) in src.iter().enumerate() {
            mem[base + i].store(s, Relaxed);
        }
    }
}

/// A kernel tensor bound to its buffer for one launch.
pub(crate) struct TensorView<'a> {
    pub mem: &'a [AtomicU32],
    pub dtype_bytes: u32,
    pub shape: Vec<i64>,
    pub strides: Vec<i64>,
    /// Bytes from the base to the end of the last reachable element.
    pub span_bytes: u64,
}

impl<'a> TensorView<'a> {
    pub fn new(k: &Kernel, t: Tensor, buf: &'a SimBuffer, syms: &[i64]) -> TensorView<'a> {
        let d = &k.tensors[t];
        let value = |d: &Dim| match *d {
            Dim::Const(c) => c as i64,
            Dim::Sym(s) => syms[s.as_u32() as usize],
        };
        let shape: Vec<i64> = d.shape.iter().map(value).collect();
        let strides: Vec<i64> = d.strides.iter().map(value).collect();
        let mut last = 0i64;
        let mut empty = false;
        for (&n, &s) in shape.iter().zip(&strides) {
            if n == 0 {
                empty = true;
            }
            last += (n - 1).max(0) * s;
        }
        let span_bytes = if empty {
            0
        } else {
            (last as u64 + 1) * d.dtype.bytes() as u64
        };
        TensorView {
            mem: buf.words(),
            dtype_bytes: d.dtype.bytes(),
            shape,
            strides,
            span_bytes,
        }
    }

    /// The element offset of `idx` for an access covering `elems` elements
    /// along the innermost dimension, or `None` when any part is out of bounds.
    /// Accesses of several elements need a unit innermost stride.
    #[inline]
    pub fn offset(&self, idx: &[i64], elems: u64) -> Option<u64> {
        let r = self.shape.len();
        let mut off = 0i64;
        for d in 0..r {
            let i = idx[d];
            let n = if d + 1 == r { elems as i64 } else { 1 };
            if i < 0 || i + n > self.shape[d] {
                return None;
            }
            off += i * self.strides[d];
        }
        if elems > 1 && r > 0 && self.strides[r - 1] != 1 {
            return None;
        }
        Some(off as u64)
    }

    /// The element offset of the start of a bulk copy of `bytes` contiguous
    /// bytes: the start index must be in bounds and the bytes within the
    /// tensor's span.
    #[inline]
    pub fn bulk_offset(&self, idx: &[i64], bytes: u64) -> Option<u64> {
        let off = self.offset(idx, 1)?;
        (off * self.dtype_bytes as u64 + bytes <= self.span_bytes).then_some(off)
    }
}

/// Shared memory a CTA can have on sm_90 (227 KiB, the verifier's budget).
pub(crate) const MAX_SHARED_BYTES: u32 = 227 * 1024;

/// Where each shared buffer and mbarrier lives in a CTA's shared memory.
#[derive(Clone, Debug)]
pub(crate) struct SharedLayout {
    /// Byte offset of each buffer.
    pub buffers: Vec<u32>,
    /// Byte size of each buffer.
    pub sizes: Vec<u32>,
    /// Element size of each buffer.
    pub elem_bytes: Vec<u32>,
    /// Byte offset of each mbarrier (8 bytes each; their state lives apart).
    pub barriers: Vec<u32>,
    /// Total bytes of shared memory per CTA.
    pub bytes: u32,
}

impl SharedLayout {
    /// The PTX backend's layout (`kda_ir::ptx::Layout`: buffers by
    /// descending alignment, bulk-copied ones 128-byte aligned, then the
    /// mbarriers), so the simulator's offsets and size are the GPU's. `Err`
    /// says why there is none: past 32-bit offsets, or past the shared
    /// memory a CTA can have ([`MAX_SHARED_BYTES`]; the verifier refuses
    /// such kernels, unverified ones must not make the simulator allocate
    /// gigabytes).
    pub fn new(k: &Kernel) -> Result<SharedLayout, String> {
        let l = kda_ir::ptx::Layout::try_of(k).map_err(|e| e.to_string())?;
        if l.bytes > MAX_SHARED_BYTES {
            return Err(format!(
                "a shared-memory layout of {} bytes, past the {MAX_SHARED_BYTES} a CTA can have",
                l.bytes
            ));
        }
        let mut out = SharedLayout {
            buffers: vec![],
            sizes: vec![],
            elem_bytes: vec![],
            barriers: vec![],
            bytes: l.bytes,
        };
        for (b, d) in k.buffers.iter() {
            out.buffers.push(l.buffers[b]);
            out.sizes
                .push(u32::try_from(d.size()).map_err(|_| "a buffer past 4 GiB")?);
            out.elem_bytes.push(d.elem.bytes());
        }
        for (m, _) in k.barriers.iter() {
            out.barriers.push(l.barriers[m]);
        }
        Ok(out)
    }
}
