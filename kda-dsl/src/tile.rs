//! Tiles: rows of a global tensor that the CTA reads, where the data lands
//! being the scheduler's choice ([`kda_ir::ScheduleHints::stage_through_shared`]).
//!
//! A program that reads a block of rows (KdaSplit's state rows of one CTA)
//! states the read once, as [`Tile::row`]`(r).load4(c)`, and says when the
//! tile's data is wanted: [`Tile::issue`] where it may be fetched (with the
//! ready loads), [`Tile::read`] where each part is used. Without the hint the
//! reads are global loads, all issued at [`Tile::issue`] (straight into
//! registers); with `#[stage_through_shared(..)]` on the tensor, one thread
//! bulk-copies the whole tile into an aligned shared buffer there, completing
//! the tile's mbarrier, and the reads are shared loads at [`Tile::read`],
//! after one wait on that barrier. The trace applies the hint (no pass reads
//! it for tiles); the buffer is guarded by the barrier, so the verifier
//! rejects a read that is not ordered after the wait.

use std::cell::Cell;

use super::control::if_else;
use super::mem::{Ix, Shared, Tensor, TensorIndex};
use super::sync::Barrier;
use super::trace::emit;
use super::val::{Elem, Ty, Val};

/// `rows` × `cols` elements of a tensor's two innermost dimensions from an
/// origin (made by [`Tensor::tile`]).
pub struct Tile<T: Elem, const R: usize> {
    tensor: Tensor<T, R>,
    origin: [Ix; R],
    cols: u32,
    /// The shared buffer and its barrier, when the schedule stages the tile.
    staged: Option<(Shared<T>, Barrier)>,
    waited: Cell<bool>,
}

/// One row of a [`Tile`] (from [`Tile::row`]).
pub struct TileRow<'a, T: Elem, const R: usize> {
    tile: &'a Tile<T, R>,
    /// The row's global index (direct) or its first element in the buffer
    /// (staged).
    at: Val<u32>,
}

impl<T: Elem, const R: usize> Tensor<T, R> {
    /// The tile of `shape = [rows, cols]` elements of the two innermost
    /// dimensions starting at `origin`, which this CTA reads. Declare it with
    /// the CTA's shared buffers: with the tensor's `#[stage_through_shared]`
    /// hint this declares the tile's mbarrier (arrivals 1, the tile's bytes)
    /// and its 128-byte aligned shared buffer; without, nothing.
    ///
    /// Staging needs the tile's rows contiguous in memory (innermost stride
    /// 1, the next one `cols`: `#[strides(.., {cols}, 1)]`).
    #[track_caller]
    pub fn tile(self, origin: impl TensorIndex<R>, shape: [u32; 2]) -> Tile<T, R> {
        assert!(
            R >= 2,
            "kda: a tile spans two dimensions of a tensor of rank 2 or more"
        );
        let [rows, cols] = shape;
        let t = self.id;
        let (staged_hint, name, strides) = emit(|b| {
            let k = b.kernel();
            let d = &k.tensors[t];
            (
                k.schedule.stage_through_shared.contains(&t),
                d.name.clone(),
                d.strides.clone(),
            )
        });
        let staged = staged_hint.then(|| {
            // One row needs its elements adjacent (innermost stride 1);
            // more rows also need each row right after the previous one.
            let contiguous = [kda_ir::Dim::Const(cols as u64), kda_ir::Dim::Const(1)];
            let adjacent = if rows == 1 {
                strides[R - 1] == kda_ir::Dim::Const(1)
            } else {
                strides[R - 2..] == contiguous
            };
            assert!(
                adjacent,
                "kda: `{name}` is staged through shared memory in tiles of {rows} rows of {cols}, \
                 copied in one piece: its innermost strides must be {cols} and 1 \
                 (`#[strides(.., {cols}, 1)]`), not {:?}",
                &strides[R - 2..]
            );
            let bytes = rows
                .checked_mul(cols)
                .and_then(|n| n.checked_mul(T::SCALAR.bytes()))
                .unwrap_or_else(|| {
                    panic!(
                        "kda: a tile of {rows} rows of {cols} `{name}` elements has more than \
                         u32::MAX bytes; a staged tile is one bulk copy into shared memory"
                    )
                });
            let bar = super::__rt::mbarrier(&format!("{name}_tile_full"), 1, bytes, &[]);
            let guard = Some(Some(bar.id()));
            let buf =
                super::__rt::shared::<T>(&format!("{name}_tile"), &[rows, cols], 128, &[], guard);
            (buf, bar)
        });
        Tile {
            tensor: self,
            origin: origin.indices(),
            cols,
            staged,
            waited: Cell::new(false),
        }
    }
}

impl<T: Elem, const R: usize> Tile<T, R> {
    /// Initialise the tile's mbarrier when it has one (staged); call it
    /// where one thread initialises the CTA's other barriers.
    #[track_caller]
    pub fn init(&self) {
        if let Some((_, bar)) = self.staged {
            bar.init();
        }
    }

    /// Where the tile may be fetched: without staging, run `load_all` now
    /// (it reads every part of the tile, into registers); staged, the thread
    /// for which `leader()` holds arms the barrier and bulk-copies the tile
    /// into its buffer, and `load_all` does not run (each part is read at
    /// [`Tile::read`]).
    #[track_caller]
    pub fn issue(&self, leader: impl FnOnce() -> Val<bool>, load_all: impl FnOnce()) {
        let Some((buf, bar)) = self.staged else {
            return load_all();
        };
        let bytes = bar.tx_bytes();
        if_else(leader(), &mut (), &[], |branch, _| {
            if branch {
                bar.arm();
                super::sync::bulk_copy(&buf, 0, &self.tensor, self.origin, bytes, &bar, false);
            }
        });
    }

    /// Where part of the tile is used: staged, run `load` now (it reads that
    /// part from the buffer), after waiting for the copy the first time;
    /// without staging nothing (the part was read at [`Tile::issue`]).
    #[track_caller]
    pub fn read(&self, load: impl FnOnce()) {
        let Some((_, bar)) = self.staged else {
            return;
        };
        if !self.waited.replace(true) {
            bar.wait();
        }
        load();
    }

    /// Row `r` of the tile (0 ≤ `r` < rows), to load from.
    #[track_caller]
    pub fn row(&self, r: Val<u32>) -> TileRow<'_, T, R> {
        let at = match (self.staged, self.origin[R - 2]) {
            (Some(_), _) => r * self.cols,
            (None, Ix::Const(0)) => r,
            (None, o) => Val::<u32>::from_value(o.value()) + r,
        };
        TileRow { tile: self, at }
    }
}

impl<T: Elem, const R: usize> TileRow<'_, T, R> {
    /// Load 4 consecutive elements from column `c` of the row: a global load
    /// (without staging) or a shared one (staged).
    #[track_caller]
    pub fn load4(&self, c: Val<u32>) -> Val<[T; 4]>
    where
        [T; 4]: Ty,
    {
        let tile = self.tile;
        if let Some((buf, _)) = tile.staged {
            return buf.load4(self.at + c);
        }
        let c = match tile.origin[R - 1] {
            Ix::Const(0) => c,
            o => Val::<u32>::from_value(o.value()) + c,
        };
        let mut index = tile.origin;
        index[R - 2] = Ix::Val(self.at.value());
        index[R - 1] = Ix::Val(c.value());
        tile.tensor.load4(index)
    }
}
