// The misuse around a loop: each iteration writes `tile` and lane 0
// bulk-stores it, but nothing waits for the store to read the tile before
// the next iteration writes it again.
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
        }
        sync_warp();
    }
}

fn main() {}
