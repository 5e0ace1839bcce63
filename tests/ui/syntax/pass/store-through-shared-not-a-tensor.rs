// The legal form: `#[store_through_shared(cond)]` on the tensor whose tiles
// the body stores through a tile writer (`tile_writer`, one `tile` after
// the other, `finish`, `drain`). The body states its stores once; where the
// comptime condition holds each tile goes into a shared stage and leaves as
// one bulk store, else each row's stores are register stores.
use kda::cluster_kernel;

#[cluster_kernel(block = 32)]
fn store_tiles(
    #[comptime] staged: bool,
    #[comptime] tiles: u32,
    #[align(16)]
    #[strides(512, 128, 1)]
    #[store_through_shared(staged)]
    y: Tensor<f32, slots, 4, 128>,
    scale: f32,
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
    use kda::ir::pipeline::{Options, schedule};
    use kda::ir::write::write_kernel;
    for staged in [false, true] {
        let k = schedule(&store_tiles(staged, 2), &Options::default())
            .unwrap_or_else(|e| panic!("{e}"));
        let text = write_kernel(&k);
        assert_eq!(text.contains(" store_through_shared=t0 {"), staged, "{text}");
        let (bulk, direct) = if staged { (2, 0) } else { (0, 8) };
        assert_eq!(text.matches("cp.async.bulk.store t0[").count(), bulk, "{text}");
        assert_eq!(text.matches("st.global t0[").count(), direct, "{text}");
    }
}
