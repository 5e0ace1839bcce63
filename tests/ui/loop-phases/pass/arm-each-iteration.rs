// The legal form of `arm-once-wait-many`: the producer refills the buffer in
// every iteration (after the consumer released it), so each iteration's wait
// has its own phase; the compiler carries both barriers' parities through the
// loops.
use kda::cluster_kernel;

#[cluster_kernel(block = 64)]
fn arm_each(#[align(16)] x: Tensor<f32, rows, 128>, y: Tensor<f32, rows, 128>, n: u32) {
    let producer = role!(0..32);
    let consumer = role!(32..64);
    let full = mbarrier!(arrivals = 1, tx = 512, roles = [producer, consumer]);
    let empty = mbarrier!(arrivals = 32, roles = [producer, consumer], released);
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
            empty.init();
        }
        fence_mbarrier_init();
    });
    bar_sync(0, 64);
    in_role!(producer, {
        for i in range(0, n) {
            empty.wait();
            if lane == 0 {
                full.arm();
                bulk_copy!(tile[0] = x[[i, 0]], bytes = 512, completes = full);
            }
        }
    });
    in_role!(consumer, {
        for i in range(0, n) {
            full.wait();
            y[[i, lane]] = tile[lane];
            empty.arrive();
        }
    });
}

fn main() {
    let _ = arm_each();
}
