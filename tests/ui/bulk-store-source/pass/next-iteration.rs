// The legal form: lane 0 waits for its store to read the tile before the
// warp's next write of it (at the end of the iteration, so the tile is
// free again when the loop comes round).
use kda::cluster_kernel;

#[cluster_kernel(block = 32)]
fn stream(x: Tensor<f32, rows, 32>, #[align(16)] y: Tensor<f32, rows, 32>, n: u32) {
    let tile = shared!([f32; 32], align = 128);
    let lane = thread_idx();
    for i in range(0, n) {
        tile[lane] = x[[i, lane]] * 2.0;
        fence_proxy_async();
        sync_warp();
        if lane == 0 {
            bulk_store!(y[[i, 0]] = tile[0], bytes = 128, evict_first);
            bulk_commit();
            bulk_wait_read(0);
        }
        sync_warp();
    }
}

fn main() {
    let k = stream();
    kda::ir::verifier::verify(&k).unwrap_or_else(|e| panic!("{e}"));
}
