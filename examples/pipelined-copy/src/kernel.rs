//! The kernel: `y = a * x + b` over `tiles` rows of `tile` floats, streamed
//! through a ring of `stages` shared buffers ([`Ring`] holds the comptime
//! choices).
//!
//! Warp 0 produces: for each of its tiles it waits until the consumers have
//! released the ring stage (`empty[s]`), arms `full[s]` and bulk-copies the
//! tile into stage `s` (in `split` copies). Warps 1..=4 consume: they wait
//! for `full[s]`, read the stage, store the result and release it
//! (`empty[s]`, one arrival per consumer thread).
//!
//! With `bulk_out` the consumers write `a * x + b` back into the stage
//! (`st.shared`), fence it for the async proxy and meet at a named barrier;
//! then one consumer thread bulk-stores the whole stage to `y` and commits
//! it as a bulk group. A stage may be refilled only once its store has read
//! it, so its release waits for that: in the next iteration the storing
//! thread waits for the read (`bulk_wait_read(0)`, while the others
//! compute), the named barrier passes that on, and every consumer thread
//! releases the previous iteration's stage (one arrival per consumer thread
//! on `empty`, as on the register path, so each thread's own writes of the
//! stage reach the producer's refill through its own arrival). With one
//! stage there is no previous stage to release: the storing thread waits
//! for the read of the store it just issued, a second named barrier passes
//! that on, and every thread releases the stage. The stores still in
//! flight at exit complete on their own.
//!
//! The grid is persistent: fewer CTAs than tiles (clusters of two, each
//! CTA with its own ring), each looping over its tiles. The producer decides
//! which tile each stage gets and writes it into `tile_of[s]` before it
//! arms `full[s]`; the consumers read it there after their wait. When the
//! producer has no tile left it sends one more phase of the next stage with
//! no bytes and `tile_of[s] = tiles`, which stops the consumers. How the
//! tiles are shared out is the [`Order`]: by default a work queue (each
//! producer takes the next tile from a global counter with `atomic_add`
//! whenever a stage is free, so faster CTAs take more tiles and all finish
//! together; measured on the H200 this is what takes the kernel from 93 % to
//! 97 % of the copy ceiling), or a fixed stride (`c, c + g, ..`) or one
//! contiguous run per CTA. Iteration `i` uses stage `i % stages`; the
//! phases of both rings are loop-carried bits the compiler keeps; `empty`
//! is declared `released`, so the producer's first lap over the ring passes
//! its waits at once. Input and output are touched once, so by default both
//! go through L2 with the evict-first policy.
use kda::cluster_kernel;

/// Floats per tile by default (one bulk copy, 16 KiB).
pub const TILE: u32 = 4096;
/// Consumer threads by default (warps 1..=4).
pub const CONSUMERS: u32 = 128;

// Clusters of two independent CTAs by default, the shape first measured on
// the H200 (one-CTA clusters measure the same). The persistent grid comes
// from `cuOccupancyMaxActiveClusters`, which answers 0 for one-CTA kernels
// probed without a cluster shape; the runtime probes those with a shape of 1
// (on the H200: grids of 264 to 1056 one-CTA clusters, 2026-12-02).
/// The comptime choices of one [`pipelined_copy()`] kernel.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Ring {
    /// Stages of the ring (each one tile of shared memory).
    pub stages: u32,
    /// Write the results back into the stage and bulk-store it, instead of
    /// storing them from registers (`st.global`).
    pub bulk_out: bool,
    /// Floats per tile, one bulk copy: a multiple of `4 * consumers`.
    pub tile: u32,
    /// Consumer threads (whole warps after the producer warp).
    pub consumers: u32,
    /// CTAs per cluster (each CTA has its own ring; the cluster only shapes
    /// how the hardware places them).
    pub cluster: u32,
    /// L2 evict-first policy on the input's bulk loads and the output's stores.
    pub evict_first: bool,
    /// Bulk copies that fill one stage (each `tile / split` floats, all
    /// completing the stage's `full` barrier): a divisor of `tile / 4`.
    pub split: u32,
    /// Which tiles each CTA takes.
    pub order: Order,
}

/// How a persistent grid shares out the tiles.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Order {
    /// CTA `c` of `g` takes tiles `c, c + g, ..` (fixed in advance).
    Strided,
    /// CTA `c` takes one contiguous run of `ceil(tiles / g)` tiles.
    Contiguous,
    /// A work queue: each CTA's producer takes the next tile from a global
    /// counter (`atomic_add`) whenever a stage is free, so a CTA that runs
    /// faster takes more tiles and all finish together. The counter starts
    /// at 0; the launch that hands out its last ticket puts it back to 0.
    Queue,
}

impl Ring {
    /// `stages` stages of [`TILE`]-float tiles, [`CONSUMERS`] consumer
    /// threads, clusters of two, evict-first, one bulk copy per stage, tiles
    /// from the work queue.
    pub const fn new(stages: u32, bulk_out: bool) -> Ring {
        Ring {
            stages,
            bulk_out,
            tile: TILE,
            consumers: CONSUMERS,
            cluster: 2,
            evict_first: true,
            split: 1,
            order: Order::Queue,
        }
    }
}

#[cluster_kernel(block = 32 + cfg.consumers, cluster = cfg.cluster)]
pub fn pipelined_copy(
    #[comptime] cfg: &Ring,
    #[align(16)] x: Tensor<f32, rows, { cfg.tile }>,
    #[align(16)] y: Tensor<f32, rows, { cfg.tile }>,
    tiles: u32,
    a: f32,
    b: f32,
    #[when(cfg.order == Order::Queue)] queue: Tensor<u32, 1>,
) {
    let Ring {
        stages,
        bulk_out,
        tile,
        consumers,
        evict_first: evict,
        split,
        order,
        ..
    } = *cfg;
    let piece = tile / split;
    let producer = role!(0..32);
    let consumer = role!(32..32 + consumers);
    let full = mbarrier!(
        arrivals = 1,
        tx = tile * 4,
        roles = [producer, consumer],
        count = stages
    );
    // One release per stage by every consumer thread.
    let empty = mbarrier!(
        arrivals = consumers,
        roles = [producer, consumer],
        count = stages,
        released
    );
    // The tile each stage holds, written by the producer before it arms
    // `full[s]`; `tiles` when there is none left (the consumers stop).
    let tile_of = shared!([u32; stages], guard = full, roles = [producer, consumer]);
    let ring = shared!(
        [f32; stages, tile],
        align = 128,
        guard = full,
        roles = [producer, consumer]
    );
    let lane = thread_idx() % 32;
    in_role!(producer, {
        if lane == 0 {
            for s in 0..stages {
                full[s].init();
                empty[s].init();
            }
        }
        fence_mbarrier_init();
    });
    bar_sync(0, 32 + consumers);

    // The producer decides which tile each stage gets and tells the
    // consumers through `tile_of`; the order is the only thing that differs.
    let (grid, first) = (grid_dim(0), block_idx(0));
    let per = (tiles + grid - 1) / grid;
    let end = match order {
        Order::Contiguous => tiles.min(first * per + per),
        _ => tiles,
    };
    in_role!(producer, {
        let ticket = || {
            let mut t = val(0u32);
            if lane == 0 {
                t = queue
                    .expect("Order::Queue declares `queue`")
                    .atomic_add([0], 1u32);
            }
            shfl_idx(t, 0u32)
        };
        let mut t = match order {
            Order::Strided => first,
            Order::Contiguous => first * per,
            Order::Queue => ticket(),
        };
        let mut i = val(0u32);
        while t < end {
            let s = i % stages;
            empty[s].wait();
            if lane == 0 {
                tile_of[s] = t;
                full[s].arm();
                for k in 0..split {
                    bulk_copy!(
                        ring[[s, k * piece]] = x[[t, k * piece]],
                        bytes = piece * 4,
                        completes = full[s],
                        evict_first = evict
                    );
                }
            }
            t = match order {
                Order::Strided => t + grid,
                Order::Contiguous => t + 1,
                Order::Queue => ticket(),
            };
            i += 1;
        }
        // No tile left: one more phase of the next stage, with no bytes,
        // tells the consumers to stop.
        let s = i % stages;
        empty[s].wait();
        if lane == 0 {
            tile_of[s] = tiles;
            full[s].arrive();
            // Every CTA took one ticket past the last tile, so ticket
            // `tiles + grid - 1` is the launch's last: it puts the queue back.
            if let Some(queue) = queue {
                if t == tiles + grid - 1 {
                    queue.atomic_add([0], val(0u32) - (tiles + grid));
                }
            }
        }
    });
    in_role!(consumer, {
        let c = thread_idx() - 32;
        let mut i = val(0u32);
        let mut live = val(true);
        while live {
            let s = i % stages;
            full[s].wait();
            let t = tile_of[s];
            live = t < tiles;
            if live {
                if bulk_out && stages > 1 && c == 0 {
                    // The previous iteration's store has read its stage (the
                    // newest group; the barrier below tells the others).
                    bulk_wait_read(0);
                }
                for j in 0..tile / (4 * consumers) {
                    let col = (j * consumers + c) * 4;
                    let v = ring.load4([s, col]).lanes();
                    let out = pack(v.map(|e| e * a + b));
                    if bulk_out {
                        ring.store([s, col], out);
                    } else if evict {
                        y.evict_first().store([t, col], out);
                    } else {
                        y.store([t, col], out);
                    }
                }
                if bulk_out {
                    // The writes, then the async proxy's read of the stage.
                    fence_proxy_async();
                    bar_sync(1, consumers);
                    if stages > 1 && i > 0 {
                        empty[(i + stages - 1) % stages].arrive();
                    }
                    if c == 0 {
                        bulk_store!(
                            y[[t, 0]] = ring[[s, 0]],
                            bytes = tile * 4,
                            evict_first = evict
                        );
                        bulk_commit();
                        if stages == 1 {
                            bulk_wait_read(0);
                        }
                    }
                    if stages == 1 {
                        bar_sync(1, consumers);
                        empty[s].arrive();
                    }
                } else {
                    empty[s].arrive();
                }
            }
            i += 1;
        }
    });
}
