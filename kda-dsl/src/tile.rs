//! Tiles: blocks of rows of a global tensor that the CTA reads or stores,
//! where the data lands, or where it leaves from, being the scheduler's
//! choice ([`kda_ir::ScheduleHints::stage_through_shared`],
//! [`kda_ir::ScheduleHints::store_through_shared`]).
//!
//! **Reads.**
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
//!
//! **Stores.** A program that stores a block of rows once per step
//! (KdaSplit's new state rows of one CTA, per token) makes a
//! [`TileWriter`] with the CTA's shared declarations
//! ([`Tensor::tile_writer`]), then per step begins a tile
//! ([`TileWriter::tile`]: its origin and whether it is stored at all),
//! stores each row's parts in the row's code
//! ([`StoreTile::row`]`(r).store4(c, v, &mask)`, the mask made once per row
//! by [`StoreTile::mask`]), ends the tile after its rows
//! ([`StoreTile::finish`]) and drains the writer before the role ends
//! ([`TileWriter::drain`]). Without the hint the stores are global stores
//! from registers, each predicated by its row's mask, exactly as a program
//! would write them by hand; with `#[store_through_shared(..)]` on the
//! tensor they go into a ring of two shared stages and each tile leaves as
//! one bulk store after a named barrier among the role's threads (see
//! [`TileWriter`]). The trace applies this hint too. It checks the
//! sequence: tiles one after the other and each finished, no more than
//! declared, every one before the drain, a drain if any was begun, all in
//! the writer's role and outside runtime loops (tile `t` uses stage
//! `t % 2`, a trace-time choice); a row stored after its tile is finished
//! does not compile ([`StoreTile::finish`] takes the tile).

use std::cell::Cell;

use super::control::if_else;
use super::mem::{Ix, Shared, Tensor, TensorIndex};
use super::sync::{Barrier, Role};
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

/// The global index of column `c` of row `row` (a global row index) of a
/// tile at `origin`: the origin with its two innermost indices replaced.
fn element_index<const R: usize>(origin: [Ix; R], row: Val<u32>, c: Val<u32>) -> [Ix; R] {
    let c = match origin[R - 1] {
        Ix::Const(0) => c,
        o => Val::<u32>::from_value(o.value()) + c,
    };
    let mut index = origin;
    index[R - 2] = Ix::Val(row.value());
    index[R - 1] = Ix::Val(c.value());
    index
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
            let how = "staged through shared memory";
            let bytes = contiguous_bytes::<T, R>(&name, &strides, rows, cols, how);
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
        tile.tensor.load4(element_index(tile.origin, self.at, c))
    }
}

/// Writes a tensor's tiles one after the other, each a block of `rows`
/// rows of `cols` elements of its two innermost dimensions (made by
/// [`Tensor::tile_writer`]; KdaSplit's new state rows of one CTA, one tile
/// per token). The program states each tile's stores once:
///
/// ```text
/// let writer = state.tile_writer([rows, 128], tokens, &state_role, 1);
/// for tok in 0..tokens {
///     let out = writer.tile([slot, head, value_base, 0], || Some(slot > 0));
///     // ... in each row's code:
///     let mask = out.mask(valid);
///     out.row(r).store4(c, v, &mask);
///     // ... after the rows:
///     out.finish(|| tid == 0);
/// }
/// writer.drain(|| tid == 0);
/// ```
///
/// Without `#[store_through_shared]` on the tensor each `store4` is a
/// global store from registers, predicated by the row's mask (its validity
/// and the tile's `live` condition), and `finish` and `drain` emit nothing.
/// With it the writer declares a ring of two 128-byte aligned shared stages
/// (one with a single tile) for `role`: tile `t`'s rows go into stage
/// `t % 2` (only where the row's mask holds), and `finish` makes the
/// stage's writes visible to the async proxy (`fence.proxy.async`), syncs
/// the role's threads on named barrier `barrier` and has the leader
/// bulk-store the stage to the tile's origin (`cp.async.bulk`, `rows · cols`
/// elements in one piece, nothing where `live` fails) and commit it, while
/// the threads go on to the next tile. Before a stage is written again its
/// store must have read it: the leader waits for that
/// (`cp.async.bulk.wait_group.read 0`) before the barrier of the tile in
/// between, which passes it on. `drain` has the leader wait for the last
/// stores' reads, so the stages stay allocated until then; call it before
/// the role ends.
pub struct TileWriter<T: Elem, const R: usize> {
    tensor: Tensor<T, R>,
    /// How many tiles the program stores.
    tiles: u32,
    role: Role,
    /// The stages, the named barrier and the role's thread count, when the
    /// schedule stores the tiles through shared memory.
    staged: Option<Staging<T>>,
    /// Tiles begun ([`TileWriter::tile`]).
    begun: Cell<u32>,
    /// Whether the last tile begun is finished.
    finished: Cell<bool>,
    drained: Cell<bool>,
    name: String,
}

struct Staging<T: Elem> {
    stages: Vec<Shared<T>>,
    barrier: u8,
    threads: u32,
    bytes: u32,
}

/// One tile of a [`TileWriter`] (from [`TileWriter::tile`]): its rows are
/// stored with [`StoreTile::row`], then [`StoreTile::finish`] ends it.
pub struct StoreTile<'a, T: Elem, const R: usize, L: Fn() -> Option<Val<bool>>> {
    writer: &'a TileWriter<T, R>,
    origin: [Ix; R],
    live: L,
    /// Its place in the writer's sequence (0, 1, ...).
    index: u32,
}

/// Where a row of a [`StoreTile`] is stored (from [`StoreTile::mask`]).
pub struct StoreMask<'t> {
    /// The tile it was made for (checked by [`StoreRow::store4`]).
    tile: *const (),
    pred: Option<Val<bool>>,
    _tile: std::marker::PhantomData<&'t ()>,
}

/// One row of a [`StoreTile`] (from [`StoreTile::row`]), to store into.
pub struct StoreRow<'t, 'a, T: Elem, const R: usize, L: Fn() -> Option<Val<bool>>> {
    tile: &'t StoreTile<'a, T, R, L>,
    /// The row's global index (direct) or its index in the tile (staged).
    at: Val<u32>,
}

/// A tile's rows must be contiguous to move in one bulk copy (staged loads
/// and stores alike): a single row needs innermost stride 1, more rows also
/// the next stride `cols`. Returns the tile's bytes.
#[track_caller]
fn contiguous_bytes<T: Elem, const R: usize>(
    name: &str,
    strides: &[kda_ir::Dim],
    rows: u32,
    cols: u32,
    how: &str,
) -> u32 {
    let contiguous = [kda_ir::Dim::Const(cols as u64), kda_ir::Dim::Const(1)];
    let adjacent = if rows == 1 {
        strides[R - 1] == kda_ir::Dim::Const(1)
    } else {
        strides[R - 2..] == contiguous
    };
    assert!(
        adjacent,
        "kda: `{name}` is {how} in tiles of {rows} rows of {cols}, copied in one piece: its \
         innermost strides must be {cols} and 1 (`#[strides(.., {cols}, 1)]`), not {:?}",
        &strides[R - 2..]
    );
    rows.checked_mul(cols)
        .and_then(|n| n.checked_mul(T::SCALAR.bytes()))
        .unwrap_or_else(|| {
            panic!(
                "kda: a tile of {rows} rows of {cols} `{name}` elements has more than \
                 u32::MAX bytes; a tile {how} moves in one bulk copy"
            )
        })
}

impl<T: Elem, const R: usize> Tensor<T, R> {
    /// A writer of `tiles` tiles of `shape = [rows, cols]` elements of the
    /// two innermost dimensions, stored by the threads of `role` one tile
    /// after the other (see [`TileWriter`]). Declare it with the CTA's
    /// shared buffers: with the tensor's `#[store_through_shared]` hint this
    /// declares the staging ring (two `[rows, cols]` stages, or one for a
    /// single tile), which `role` alone uses, and `finish` syncs the role's
    /// threads on named barrier `barrier` (`bar.sync barrier, threads`);
    /// without, nothing.
    ///
    /// Staging needs the tile's rows contiguous in memory (innermost stride
    /// 1, the next one `cols`: `#[strides(.., {cols}, 1)]`) and a whole
    /// number of 16-byte units.
    #[track_caller]
    pub fn tile_writer(
        self,
        shape: [u32; 2],
        tiles: u32,
        role: &Role,
        barrier: u8,
    ) -> TileWriter<T, R> {
        assert!(
            R >= 2,
            "kda: a tile spans two dimensions of a tensor of rank 2 or more"
        );
        let [rows, cols] = shape;
        let t = self.id;
        let (staged_hint, name, strides, threads) = emit(|b| {
            let k = b.kernel();
            let d = &k.tensors[t];
            (
                k.schedule.store_through_shared.contains(&t),
                d.name.clone(),
                d.strides.clone(),
                k.roles[role.id].threads,
            )
        });
        assert!(
            tiles > 0,
            "kda: a writer of `{name}` stores at least one tile (`tiles` is 0)"
        );
        let staged = staged_hint.then(|| {
            let how = "stored through shared memory";
            let bytes = contiguous_bytes::<T, R>(&name, &strides, rows, cols, how);
            assert!(
                bytes.is_multiple_of(16),
                "kda: a tile of {rows} rows of {cols} `{name}` elements is {bytes} bytes; a bulk \
                 store moves a multiple of 16"
            );
            assert!(
                barrier < 16,
                "kda: named barrier {barrier}: a CTA has 16 (0..=15)"
            );
            let stages = (0..tiles.min(2))
                .map(|s| {
                    super::__rt::shared::<T>(
                        &format!("{name}_tile_out[{s}]"),
                        &[rows, cols],
                        128,
                        &[role],
                        None,
                    )
                })
                .collect();
            Staging {
                stages,
                barrier,
                threads,
                bytes,
            }
        });
        TileWriter {
            tensor: self,
            tiles,
            role: *role,
            staged,
            begun: Cell::new(0),
            finished: Cell::new(true),
            drained: Cell::new(false),
            name,
        }
    }
}

impl<T: Elem, const R: usize> TileWriter<T, R> {
    /// The writer's calls run in its role's code, outside runtime loops
    /// (each tile is one of a comptime sequence).
    #[track_caller]
    fn check_place(&self, what: &str) {
        let (role, in_loop) = emit(|b| (b.current_role(), b.in_runtime_loop()));
        assert!(
            role == Some(self.role.id),
            "kda: `{what}` of the tile writer of `{}` runs outside the role it was made for",
            self.name
        );
        assert!(
            !in_loop,
            "kda: `{what}` of the tile writer of `{}` runs inside a runtime loop; its tiles are a \
             comptime sequence (tile t uses stage t % 2), so write them in a comptime loop",
            self.name
        );
    }

    /// Begin the next tile, whose element `[0, 0]` is `origin`. `live`: the
    /// condition for storing it at all (`None`: always), e.g. a write slot
    /// that is not a hole; it is called where a store needs it (per row mask
    /// without staging, by the leader before the bulk store when staged), so
    /// each place computes it. The previous tile must be finished.
    #[track_caller]
    pub fn tile<L: Fn() -> Option<Val<bool>>>(
        &self,
        origin: impl TensorIndex<R>,
        live: L,
    ) -> StoreTile<'_, T, R, L> {
        self.check_place("tile");
        let index = self.begun.get();
        assert!(
            self.finished.get(),
            "kda: tile {index} of `{}` begun before tile {} is finished (`finish(..)`)",
            self.name,
            index.wrapping_sub(1)
        );
        assert!(
            index < self.tiles && !self.drained.get(),
            "kda: tile {index} of `{}`: the writer was made for {} tiles{}",
            self.name,
            self.tiles,
            if self.drained.get() {
                " and is drained"
            } else {
                ""
            }
        );
        self.begun.set(index + 1);
        self.finished.set(false);
        StoreTile {
            writer: self,
            origin: origin.indices(),
            live,
            index,
        }
    }

    /// Where the role's stores must be complete enough for the CTA to exit
    /// (after the last tile): staged, the thread for which `leader()` holds
    /// waits until the bulk stores have read their stages; without staging
    /// nothing. Every tile must be finished.
    #[track_caller]
    pub fn drain(&self, leader: impl FnOnce() -> Val<bool>) {
        self.check_place("drain");
        assert!(
            self.finished.get() && self.begun.get() == self.tiles && !self.drained.get(),
            "kda: `drain` of the tile writer of `{}` after {} of its {} tiles{}{}",
            self.name,
            self.begun.get(),
            self.tiles,
            if self.finished.get() {
                ""
            } else {
                " (the last one not finished)"
            },
            if self.drained.get() {
                ", drained already"
            } else {
                ""
            }
        );
        self.drained.set(true);
        if self.staged.is_some() {
            if_else(leader(), &mut (), &[], |branch, _| {
                if branch {
                    super::sync::bulk_wait_read(0);
                }
            });
        }
    }
}

impl<T: Elem, const R: usize> Drop for TileWriter<T, R> {
    fn drop(&mut self) {
        if self.begun.get() > 0 && !self.drained.get() && !std::thread::panicking() {
            panic!(
                "kda: the tile writer of `{}` stored {} tiles but was never drained \
                 (`drain(..)` after the last tile, before its role ends)",
                self.name,
                self.begun.get()
            );
        }
    }
}

impl<'a, T: Elem, const R: usize, L: Fn() -> Option<Val<bool>>> StoreTile<'a, T, R, L> {
    /// The mask of a row: `valid` (`None`: every row is; a masked pass's
    /// clamped row is not) and, without staging, the tile's `live`
    /// condition, computed here. Make it once per row, before its stores.
    #[track_caller]
    pub fn mask(&self, valid: Option<Val<bool>>) -> StoreMask<'_> {
        let pred = match self.writer.staged {
            Some(_) => valid,
            None => [valid, (self.live)()]
                .into_iter()
                .flatten()
                .reduce(|a, b| a & b),
        };
        StoreMask {
            tile: self as *const Self as *const (),
            pred,
            _tile: std::marker::PhantomData,
        }
    }

    /// Row `r` of the tile (0 ≤ `r` < rows), to store into.
    #[track_caller]
    pub fn row(&self, r: Val<u32>) -> StoreRow<'_, 'a, T, R, L> {
        let at = match (&self.writer.staged, self.origin[R - 2]) {
            (Some(_), _) | (None, Ix::Const(0)) => r,
            (None, o) => Val::<u32>::from_value(o.value()) + r,
        };
        StoreRow { tile: self, at }
    }

    /// The tile's rows are stored (after every row's stores): staged, fence
    /// the stage's writes for the async proxy, sync the role on the named
    /// barrier (the leader first waits for the previous stage's store to
    /// have read it, when a later tile reuses that stage) and have the
    /// thread for which `leader()` holds bulk-store the stage where `live`
    /// holds, and commit it; without staging nothing.
    #[track_caller]
    pub fn finish(self, leader: impl Fn() -> Val<bool>) {
        let w = self.writer;
        w.check_place("finish");
        w.finished.set(true);
        let Some(st) = &w.staged else {
            return;
        };
        let stage = st.stages[(self.index % 2) as usize];
        super::sync::fence_proxy_async();
        if self.index >= 1 && self.index + 1 < w.tiles {
            // Tile index + 1 writes the stage of tile index - 1 again: its
            // store (if any; the newest group) has read it once this wait
            // passes, and the barrier below tells the other threads.
            if_else(leader(), &mut (), &[], |branch, _| {
                if branch {
                    super::sync::bulk_wait_read(0);
                }
            });
        }
        super::sync::bar_sync(st.barrier, st.threads);
        let store = || {
            super::sync::bulk_store(&w.tensor, self.origin, &stage, 0u32, st.bytes, false);
            super::sync::bulk_commit();
        };
        if_else(leader(), &mut (), &[], |branch, _| {
            if branch {
                match (self.live)() {
                    Some(live) => if_else(live, &mut (), &[], |live, _| {
                        if live {
                            store()
                        }
                    }),
                    None => store(),
                }
            }
        });
    }
}

impl<T: Elem, const R: usize, L: Fn() -> Option<Val<bool>>> StoreRow<'_, '_, T, R, L> {
    /// Store 4 consecutive elements `v` at column `c` of the row where
    /// `mask` (the row's, from [`StoreTile::mask`]) holds: a global store
    /// from registers (without staging) or a shared store into the tile's
    /// stage (staged).
    #[track_caller]
    pub fn store4(&self, c: Val<u32>, v: Val<[T; 4]>, mask: &StoreMask<'_>)
    where
        [T; 4]: Ty,
    {
        let tile = self.tile;
        assert!(
            std::ptr::eq(
                mask.tile,
                tile as *const StoreTile<'_, T, R, L> as *const ()
            ),
            "kda: a row of tile {} of `{}` stored with another tile's mask",
            tile.index,
            tile.writer.name
        );
        if let Some(st) = &tile.writer.staged {
            let stage = st.stages[(tile.index % 2) as usize];
            let at = self.at;
            let put = || stage.store([at, c], v);
            match mask.pred {
                Some(ok) => if_else(ok, &mut (), &[], |branch, _| {
                    if branch {
                        put()
                    }
                }),
                None => put(),
            }
            return;
        }
        let index = element_index(tile.origin, self.at, c);
        match mask.pred {
            Some(ok) => tile.writer.tensor.store_if(index, v, ok),
            None => tile.writer.tensor.store(index, v),
        }
    }
}
