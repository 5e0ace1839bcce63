// The legal form: wait for the preceding launch, then stage its output.
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
    pdl_wait();
    if t == 0 {
        loaded.init();
        fence_mbarrier_init();
        loaded.arm();
        bulk_copy!(tile[0] = x[[row, 0]], bytes = 512, completes = loaded);
    }
    loaded.wait();
    y[[row, t]] = tile[t];
}

fn main() {
    let k = staged();
    kda::ir::verifier::verify(&k).unwrap_or_else(|e| panic!("{e}"));
}
