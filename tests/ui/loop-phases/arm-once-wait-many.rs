// The producer arms and fills `full` once, but the consumer waits on it in
// every iteration of a runtime loop: from the second iteration on it waits
// for a phase that never completes.
use kda::cluster_kernel;

#[cluster_kernel(block = 64)]
fn arm_once(#[align(16)] x: Tensor<f32, rows, 128>, y: Tensor<f32, rows, 128>, n: u32) {
    let producer = role!(0..32);
    let consumer = role!(32..64);
    let full = mbarrier!(arrivals = 1, tx = 512, roles = [producer, consumer]);
    let tile = shared!(
        [f32; 128],
        align = 128,
        guard = full,
        roles = [producer, consumer]
    );
    let lane = thread_idx() % 32;
    in_role!(producer, {
        if lane == 0 {
            full.init();
            fence_mbarrier_init();
            full.arm();
            bulk_copy!(
                tile[0] = x[[block_idx(0), 0]],
                bytes = 512,
                completes = full
            );
        }
    });
    bar_sync(0, 64);
    in_role!(consumer, {
        for i in range(0, n) {
            full.wait();
            y[[i, lane]] = tile[lane];
        }
    });
}

fn main() {
    let _ = arm_once();
}
