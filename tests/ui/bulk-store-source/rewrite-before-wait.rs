// The misuse: the warp writes `tile` again right after lane 0's bulk store
// of it, with no `bulk_wait_read` between them: the store may still be
// reading the tile, and store the new bytes instead of the old ones.
use kda::cluster_kernel;

#[cluster_kernel(block = 32)]
fn stage_out(x: Tensor<f32, rows, 32>, #[align(16)] y: Tensor<f32, rows, 32>) {
    let tile = shared!([f32; 32], align = 128);
    let lane = thread_idx();
    let row = block_idx(0);
    tile[lane] = x[[row, lane]];
    fence_proxy_async();
    sync_warp();
    if lane == 0 {
        bulk_store!(y[[row, 0]] = tile[0], bytes = 128);
        bulk_commit();
    }
    sync_warp();
    tile[lane] = 0.0;
}

fn main() {}
