// A bulk copy reads its source tensor too: staging produced data before the
// PDL wait copies whatever the preceding launch has not finished writing.
use kda::cluster_kernel;

#[cluster_kernel(block = 128)]
fn staged(
    #[produced]
    #[align(16)]
    x: Tensor<f32, rows, 128>,
    y: Tensor<f32, rows, 128>,
) {
    let loaded = mbarrier!(arrivals = 1, tx = 512);
    let tile = shared!([f32; 128], align = 128, guard = loaded);
    let t = thread_idx();
    let row = block_idx(0);
    if t == 0 {
        loaded.init();
        fence_mbarrier_init();
        loaded.arm();
        bulk_copy!(tile[0] = x[[row, 0]], bytes = 512, completes = loaded);
    }
    pdl_wait();
    loaded.wait();
    y[[row, t]] = tile[t];
}

fn main() {
    let _ = staged();
}
