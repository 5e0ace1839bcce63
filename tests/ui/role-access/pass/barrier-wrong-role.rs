// The legal form: only the declared roles touch the barrier; the gate warp
// does its own work.
use kda::cluster_kernel;

#[cluster_kernel(block = 96)]
fn staged(#[align(16)] state: Tensor<f32, rows, 128>, out: Tensor<f32, rows, 128>) {
    let loader = role!(0..32);
    let main = role!(32..64);
    let gate = role!(64..96);
    let state_ready = mbarrier!(arrivals = 1, tx = 512, roles = [loader, main]);
    let rows = shared!(
        [f32; 128],
        align = 128,
        guard = state_ready,
        roles = [loader, main]
    );
    let lane = thread_idx() % 32;
    in_role!(loader, {
        if lane == 0 {
            state_ready.init();
            fence_mbarrier_init();
            state_ready.arm();
            bulk_copy!(
                rows[0] = state[[block_idx(0), 0]],
                bytes = 512,
                completes = state_ready
            );
        }
    });
    bar_sync(0, 96);
    in_role!(main, {
        state_ready.wait();
        out[[block_idx(0), lane]] = rows[lane];
    });
    in_role!(gate, {
        out[[block_idx(0), 32 + lane]] = 0.0;
    });
}

fn main() {
    let k = staged();
    kda::ir::verifier::verify(&k).unwrap_or_else(|e| panic!("{e}"));
}
