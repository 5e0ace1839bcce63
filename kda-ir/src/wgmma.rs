//! Warpgroup MMA (`wgmma.mma_async`): the shared-memory tile layouts its
//! operands are read through, the 64-bit matrix descriptors the compiler
//! builds from them, and the accumulator fragment's element → (row, column)
//! map. One place for the bit-level facts the PTX emitter, the verifier and
//! the simulator share.
//!
//! # Operand tiles
//!
//! A shared buffer declared with a [`MmaTile`] holds a `rows × cols` matrix of
//! bf16 (2 bytes), **K-major**: `cols` is the K extent and K is the
//! contiguous dimension (A is `64 × K`, B is `N × K`, as `mma.sync`'s
//! "row.col"). The byte offset of element `(r, k)` is [`MmaTile::offset`]:
//!
//! - [`Swizzle::None`] (the "interleave" layout): 8 × 16-byte core matrices,
//!   8 rows of 8 elements, each 128 contiguous bytes; core matrices run along K
//!   first (`LBO` = 128 bytes), then along the rows (`SBO` = `cols / 8 · 128`).
//!   `offset(r, k) = (r/8)·SBO + (k/8)·128 + (r%8)·16 + (k%8)·2`.
//! - [`Swizzle::B32`], [`Swizzle::B64`], [`Swizzle::B128`] with span `W` = 32,
//!   64, 128 bytes: K splits into panels of `W/2` elements; a panel is `rows`
//!   rows of `W` bytes (`SBO` = `8·W`, 8 rows); the panels follow each other.
//!   The logical offset `p·rows·W + r·W + (k%(W/2))·2` (`p = k/(W/2)`) is then
//!   swizzled as the hardware does, on the address bits: the 16-byte chunk
//!   bits `[4, 4+b)` are XORed with bits `[7, 7+b)`, `b` = 1, 2, 3 (CuTe's
//!   `Swizzle<b,4,3>`). The pattern repeats every 256, 512, 1024 bytes, so
//!   the buffer must be aligned to that ([`Swizzle::align`]: a 128-byte
//!   swizzled tile is 1024-byte aligned), and the same XOR applies whether the
//!   address is taken from the buffer's start or the shared window's.
//!
//! # Descriptors
//!
//! [`descriptor`] encodes the PTX ISA's "matrix descriptor" (wgmma section,
//! "Matrix Descriptor Format") for the 64×16 (A) or N×16 (B) slice of a tile
//! that starts at K column `k` (a multiple of 16):
//!
//! | bits  | field                                                          |
//! |-------|----------------------------------------------------------------|
//! | 0–13  | start address `(addr & 0x3FFFF) >> 4`                          |
//! | 16–29 | leading-dimension byte offset `>> 4` (K step between core matrices; 1, unused, when swizzled) |
//! | 32–45 | stride-dimension byte offset `>> 4` (8-row step)               |
//! | 49–51 | base offset (0: every tile is aligned to its swizzle pattern)  |
//! | 62–63 | swizzle: 0 none, 1 128-byte, 2 64-byte, 3 32-byte              |
//!
//! [`Desc::element`] reads a descriptor back the way the hardware walks it:
//! the address of element `(r, k)` of the slice; the simulator reads through it.
//!
//! # Accumulator fragment
//!
//! `wgmma.mma_async.m64nNk16` with f32 accumulators gives each of the 128
//! threads of the warpgroup `N/2` f32 registers `d0 .. d(N/2-1)`. Thread
//! `t`, warp `w = t/32`, lane `l = t%32`, register `i`
//! ([`acc_coord`], the PTX ISA's "WGMMA 64xNx16 D matrix fragment"):
//!
//! ```text
//! row = 16·w + l/4 + 8·((i/2) % 2)
//! col = 8·(i/4) + 2·(l%4) + i%2
//! ```
//!
//! That is the `mma.sync` m16n8 C fragment (`c0..c3` of lane `l`) tiled along
//! N (`j = i/4` picks the 8-column block) with the four warps stacked along M.

use std::fmt;

/// The swizzle of a K-major operand tile (see the module docs).
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub enum Swizzle {
    /// The interleaved core-matrix layout, no swizzle.
    None,
    /// 32-byte swizzle.
    B32,
    /// 64-byte swizzle.
    B64,
    /// 128-byte swizzle.
    B128,
}

impl Swizzle {
    /// Every mode.
    pub const ALL: [Swizzle; 4] = [Swizzle::None, Swizzle::B32, Swizzle::B64, Swizzle::B128];

    /// The swizzle span in bytes (the row length of a swizzled panel); 16
    /// (one core-matrix row) without swizzle.
    pub fn span(self) -> u32 {
        match self {
            Swizzle::None => 16,
            Swizzle::B32 => 32,
            Swizzle::B64 => 64,
            Swizzle::B128 => 128,
        }
    }

    /// The address bits XORed (`b` of `Swizzle<b,4,3>`).
    fn bits(self) -> u32 {
        match self {
            Swizzle::None => 0,
            Swizzle::B32 => 1,
            Swizzle::B64 => 2,
            Swizzle::B128 => 3,
        }
    }

    /// The alignment a tile with this swizzle needs: the bytes after which
    /// the pattern repeats (256, 512, 1024), 128 without swizzle.
    pub fn align(self) -> u32 {
        match self {
            Swizzle::None => 128,
            s => 128 << s.bits(),
        }
    }

    /// The descriptor's 2-bit layout field.
    pub fn mode_bits(self) -> u64 {
        match self {
            Swizzle::None => 0,
            Swizzle::B128 => 1,
            Swizzle::B64 => 2,
            Swizzle::B32 => 3,
        }
    }

    /// The mode a descriptor's layout field names.
    pub fn from_mode_bits(bits: u64) -> Swizzle {
        match bits & 3 {
            0 => Swizzle::None,
            1 => Swizzle::B128,
            2 => Swizzle::B64,
            _ => Swizzle::B32,
        }
    }

    /// The physical byte address of logical address `addr`: chunk bits
    /// `[4, 4+b)` XOR bits `[7, 7+b)`.
    pub fn apply(self, addr: u32) -> u32 {
        let mask = (1u32 << self.bits()) - 1;
        addr ^ (((addr >> 7) & mask) << 4)
    }

    /// The text form: `none`, `sw32`, `sw64`, `sw128`.
    pub fn name(self) -> &'static str {
        match self {
            Swizzle::None => "none",
            Swizzle::B32 => "sw32",
            Swizzle::B64 => "sw64",
            Swizzle::B128 => "sw128",
        }
    }

    /// The mode the text form names.
    pub fn from_name(s: &str) -> Option<Swizzle> {
        Swizzle::ALL.into_iter().find(|m| m.name() == s)
    }
}

/// A K-major bf16 operand tile in a shared buffer: `rows` (M or N) × `cols`
/// (K), with its swizzle (see the module docs).
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub struct MmaTile {
    /// Rows: 64 for an A operand, N for a B operand; a multiple of 8.
    pub rows: u32,
    /// The K extent: a multiple of 16.
    pub cols: u32,
    /// The layout.
    pub swizzle: Swizzle,
}

/// Bytes of one element (bf16 or f16).
pub const ELEM_BYTES: u32 = 2;

impl MmaTile {
    /// Elements in K of one swizzle panel (8 without swizzle: a core matrix).
    fn panel(self) -> u32 {
        self.swizzle.span() / ELEM_BYTES
    }

    /// Leading-dimension byte offset: between core matrices along K (no
    /// swizzle); 16 (field value 1, unused by the hardware) when swizzled.
    pub fn lbo(self) -> u32 {
        match self.swizzle {
            Swizzle::None => 128,
            _ => 16,
        }
    }

    /// Stride-dimension byte offset: between groups of 8 rows.
    pub fn sbo(self) -> u32 {
        match self.swizzle {
            Swizzle::None => self.cols / 8 * 128,
            s => 8 * s.span(),
        }
    }

    /// The logical (unswizzled) byte offset of `(r, k)` from the tile's start.
    pub fn logical(self, r: u32, k: u32) -> u32 {
        match self.swizzle {
            Swizzle::None => (r / 8) * self.sbo() + (k / 8) * 128 + (r % 8) * 16 + (k % 8) * 2,
            s => {
                let p = self.panel();
                (k / p) * self.rows * s.span() + r * s.span() + (k % p) * ELEM_BYTES
            }
        }
    }

    /// The byte offset of element `(r, k)` in the buffer, swizzle applied
    /// (the buffer aligned to [`Swizzle::align`]).
    pub fn offset(self, r: u32, k: u32) -> u32 {
        self.swizzle.apply(self.logical(r, k))
    }

    /// The bytes the tile takes.
    pub fn bytes(self) -> u32 {
        self.rows * self.cols * ELEM_BYTES
    }

    /// Where a wgmma slice starting at K column `k` (a multiple of 16)
    /// starts: the logical offset of `(0, k)`.
    pub fn slice_start(self, k: u32) -> u32 {
        self.logical(0, k)
    }

    /// What is wrong with the tile's shape, if anything.
    pub fn check(self) -> Result<(), String> {
        if self.rows == 0 || !self.rows.is_multiple_of(8) {
            return Err(format!(
                "{} rows; allowed: a positive multiple of 8",
                self.rows
            ));
        }
        if self.cols == 0 || !self.cols.is_multiple_of(16) {
            return Err(format!(
                "{} columns (K); allowed: a positive multiple of 16",
                self.cols
            ));
        }
        if self.swizzle != Swizzle::None && !self.cols.is_multiple_of(self.panel()) {
            return Err(format!(
                "{} columns (K) with {}: a whole number of {}-element swizzle panels",
                self.cols,
                self.swizzle.name(),
                self.panel()
            ));
        }
        Ok(())
    }
}

impl fmt::Display for MmaTile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}x{} {}", self.rows, self.cols, self.swizzle.name())
    }
}

/// The fields of a wgmma matrix descriptor (see the module docs).
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub struct Desc {
    /// Byte address in the shared window (a multiple of 16, below 2^18).
    pub start: u32,
    /// Leading-dimension byte offset (a multiple of 16).
    pub lbo: u32,
    /// Stride-dimension byte offset (a multiple of 16).
    pub sbo: u32,
    /// Matrix base offset (3 bits).
    pub base_offset: u32,
    /// The swizzle mode.
    pub swizzle: Swizzle,
}

impl Desc {
    /// The 64-bit descriptor.
    pub fn encode(self) -> u64 {
        let f = |x: u32| u64::from((x & 0x3FFFF) >> 4);
        f(self.start)
            | f(self.lbo) << 16
            | f(self.sbo) << 32
            | u64::from(self.base_offset & 7) << 49
            | self.swizzle.mode_bits() << 62
    }

    /// The fields of a 64-bit descriptor.
    pub fn decode(d: u64) -> Desc {
        let f = |at: u32| (((d >> at) & 0x3FFF) as u32) << 4;
        Desc {
            start: f(0),
            lbo: f(16),
            sbo: f(32),
            base_offset: ((d >> 49) & 7) as u32,
            swizzle: Swizzle::from_mode_bits(d >> 62),
        }
    }

    /// The shared address the hardware reads element `(r, k)` of the
    /// K-major slice at (`k` < 16 for one wgmma). With a swizzle, `k`'s bytes
    /// stay within the span-wide row, and the XOR runs on the whole address.
    pub fn element(self, r: u32, k: u32) -> u32 {
        let logical = match self.swizzle {
            Swizzle::None => {
                self.start + (r / 8) * self.sbo + (k / 8) * self.lbo + (r % 8) * 16 + (k % 8) * 2
            }
            s => self.start + (r / 8) * self.sbo + (r % 8) * s.span() + k * ELEM_BYTES,
        };
        self.swizzle.apply(logical)
    }
}

/// The descriptor of the slice of `tile` that starts at K column `k` (a
/// multiple of 16), the tile at shared byte address `base` (aligned to its
/// swizzle's [`Swizzle::align`]).
pub fn descriptor(tile: MmaTile, base: u32, k: u32) -> Desc {
    Desc {
        start: base + tile.slice_start(k),
        lbo: tile.lbo(),
        sbo: tile.sbo(),
        base_offset: 0,
        swizzle: tile.swizzle,
    }
}

/// The N of `m64nNk16` that wgmma allows: a multiple of 8 in 8..=256.
pub fn legal_n(n: u32) -> bool {
    (8..=256).contains(&n) && n.is_multiple_of(8)
}

/// The accumulator element thread `t` (0..128 of the warpgroup) holds in
/// register `i` (0..N/2): `(row, column)` of the 64×N matrix.
pub fn acc_coord(t: u32, i: u32) -> (u32, u32) {
    let (w, l) = (t / 32, t % 32);
    (
        16 * w + l / 4 + 8 * ((i / 2) % 2),
        8 * (i / 4) + 2 * (l % 4) + i % 2,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hand-computed from the PTX ISA's descriptor format: start address
    /// bits 0–13 (>>4), LBO 16–29, SBO 32–45, base offset 49–51, layout 62–63.
    #[test]
    fn descriptor_bits_by_hand() {
        // 128-byte swizzle, tile at 0x400, k = 0: start 0x400>>4 = 0x40,
        // LBO 16>>4 = 1, SBO 1024>>4 = 0x40, mode 1.
        let t = MmaTile {
            rows: 64,
            cols: 64,
            swizzle: Swizzle::B128,
        };
        let d = descriptor(t, 0x400, 0);
        assert_eq!(d.encode(), 0x4000_0040_0001_0040);
        // k = 16: 32 bytes further along the row: start 0x420>>4 = 0x42.
        assert_eq!(descriptor(t, 0x400, 16).encode(), 0x4000_0040_0001_0042);
        // k = 64 with cols 128: the next panel, 64 rows × 128 bytes on.
        let t2 = MmaTile { cols: 128, ..t };
        assert_eq!(descriptor(t2, 0, 64).start, 8192);
        assert_eq!(descriptor(t2, 0, 64).encode(), 0x4000_0040_0001_0200);
        // 64-byte swizzle: SBO 512 (0x20), mode 2.
        let t = MmaTile {
            rows: 128,
            cols: 32,
            swizzle: Swizzle::B64,
        };
        assert_eq!(descriptor(t, 0x800, 16).encode(), 0x8000_0020_0001_0082);
        // 32-byte swizzle: SBO 256 (0x10), mode 3; k = 16 is the next panel
        // (rows × 32 bytes = 2048 bytes on).
        let t = MmaTile {
            rows: 64,
            cols: 32,
            swizzle: Swizzle::B32,
        };
        assert_eq!(descriptor(t, 0, 16).encode(), 0xC000_0010_0001_0080);
        // No swizzle: LBO 128 (8), SBO cols/8·128 = 512 (0x20), mode 0; k = 16
        // is two core matrices (256 bytes) on.
        let t = MmaTile {
            rows: 64,
            cols: 32,
            swizzle: Swizzle::None,
        };
        assert_eq!(descriptor(t, 0x100, 16).encode(), 0x0000_0020_0008_0020);
        // Addresses keep 18 bits.
        let d = Desc {
            start: 0x3_FFF0,
            lbo: 16,
            sbo: 16,
            base_offset: 5,
            swizzle: Swizzle::B128,
        };
        assert_eq!(d.encode(), 0x400A_0001_0001_3FFF);
        assert_eq!(Desc::decode(d.encode()), d);
    }

    /// Reading through the descriptor finds each element where the tile's
    /// layout put it, for every swizzle and K slice.
    #[test]
    fn descriptor_walk_matches_layout() {
        for s in Swizzle::ALL {
            for rows in [8, 64, 128] {
                let t = MmaTile {
                    rows,
                    cols: 128,
                    swizzle: s,
                };
                t.check().unwrap();
                let base = 3 * 1024;
                let mut seen = std::collections::HashSet::new();
                for r in 0..rows {
                    for k in 0..128 {
                        let o = t.offset(r, k);
                        assert!(o < t.bytes() && o.is_multiple_of(2));
                        assert!(seen.insert(o), "{t}: ({r}, {k}) overlaps");
                    }
                }
                for k0 in (0..128).step_by(16) {
                    let d = Desc::decode(descriptor(t, base, k0).encode());
                    for r in 0..rows {
                        for k in 0..16 {
                            assert_eq!(
                                d.element(r, k),
                                base + t.offset(r, k0 + k),
                                "{t} ({r},{k0}+{k})"
                            );
                        }
                    }
                }
            }
        }
    }

    /// 128-byte swizzle: row r's chunk c lands at chunk c ^ (r % 8).
    #[test]
    fn swizzle_128_by_hand() {
        let t = MmaTile {
            rows: 8,
            cols: 64,
            swizzle: Swizzle::B128,
        };
        assert_eq!(t.offset(0, 8), 16);
        assert_eq!(t.offset(1, 0), 128 + 16);
        assert_eq!(t.offset(3, 8), 3 * 128 + (1 ^ 3) * 16);
        // chunk 7 ^ 7 = 0
        assert_eq!(t.offset(7, 63), 7 * 128 + 14);
        assert_eq!(Swizzle::B128.align(), 1024);
        // 64-byte: rows of 64 bytes; the XOR takes address bits 7–8 = r/2.
        let t = MmaTile {
            rows: 8,
            cols: 32,
            swizzle: Swizzle::B64,
        };
        assert_eq!(t.offset(2, 0), 2 * 64 + 16);
        assert_eq!(t.offset(6, 8), 6 * 64 + (1 ^ 3) * 16);
    }

    /// The fragment map covers the 64×N matrix once, and each warp's part is
    /// the mma.sync m16n8 C fragment tiled along N.
    #[test]
    fn accumulator_fragment() {
        for n in [8, 16, 64, 256] {
            let mut seen = vec![false; 64 * n as usize];
            for t in 0..128 {
                for i in 0..n / 2 {
                    let (r, c) = acc_coord(t, i);
                    assert!(r < 64 && c < n);
                    assert!(!std::mem::replace(&mut seen[(r * n + c) as usize], true));
                }
            }
            assert!(seen.iter().all(|&s| s));
        }
        // Lane 5 of warp 1: group 1, thread-in-group 1.
        assert_eq!(acc_coord(37, 0), (17, 2));
        assert_eq!(acc_coord(37, 3), (25, 3));
        assert_eq!(acc_coord(37, 5), (17, 11));
        assert!(legal_n(8) && legal_n(256) && legal_n(136) && !legal_n(4) && !legal_n(264));
    }
}
