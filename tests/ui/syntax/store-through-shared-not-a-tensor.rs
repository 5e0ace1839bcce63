// `#[store_through_shared]` stores a tensor's tiles through shared memory;
// a scalar (passed by value) or a comptime parameter has no tiles in global
// memory to store.
use kda::cluster_kernel;

#[cluster_kernel(block = 32)]
fn store_tiles(
    #[comptime] staged: bool,
    #[store_through_shared] #[comptime] tiles: u32,
    #[align(16)]
    #[strides(512, 128, 1)]
    y: Tensor<f32, slots, 4, 128>,
    #[store_through_shared(staged)] scale: f32,
) {
    let warp = role!(0..32);
    let out = y.tile_writer([4, 128], tiles, &warp, 1);
    in_role!(warp, {
        let lane = thread_idx();
        let base = (lane * 4).cast::<f32>().val() * scale;
        for t in 0..tiles {
            let tile = out.tile([block_idx(0) * tiles + t, 0u32, 0u32], || None);
            for r in 0..4u32 {
                let v = [0, 1, 2, 3].map(|e| base + (e + r) as f32);
                let mask = tile.mask(None);
                tile.row(val(r)).store4(lane * 4, pack(v), &mask);
            }
            tile.finish(|| lane == 0);
        }
        out.drain(|| lane == 0);
    });
}

fn main() {
    let _ = store_tiles(true, 2);
}
