// The legal form: lane 0 commits its bulk store and waits until the store
// has read `tile` (`bulk_wait_read(0)`) before the warp writes it again.
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
        bulk_wait_read(0);
    }
    sync_warp();
    tile[lane] = 0.0;
}

fn main() {
    let k = stage_out();
    kda::ir::verifier::verify(&k).unwrap_or_else(|e| panic!("{e}"));
}
