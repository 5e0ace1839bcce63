// The producer arms `staged`, but the consumer waits on `loaded`, which nothing arms.
use kda::cluster_kernel;

#[cluster_kernel(block = 64)]
fn armed_another(#[align(16)] state: Tensor<f32, rows, 128>, out: Tensor<f32, rows, 128>) {
    let loader = role!(0..32);
    let user = role!(32..64);
    let staged = mbarrier!(arrivals = 1, tx = 512, roles = [loader, user]);
    let loaded = mbarrier!(arrivals = 1, tx = 512, roles = [loader, user]);
    let rows = shared!(
        [f32; 128],
        align = 128,
        guard = staged,
        roles = [loader, user]
    );
    let lane = thread_idx() % 32;
    in_role!(loader, {
        if lane == 0 {
            staged.init();
            loaded.init();
            fence_mbarrier_init();
            staged.arm();
            bulk_copy!(
                rows[0] = state[[block_idx(0), 0]],
                bytes = 512,
                completes = staged
            );
        }
    });
    bar_sync(0, 64);
    in_role!(user, {
        loaded.wait();
        staged.wait();
        for j in 0..4 {
            out[[block_idx(0), 4 * lane + j]] = rows[4 * lane + j];
        }
    });
}

fn main() {
    let _ = armed_another();
}
