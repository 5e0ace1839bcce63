// A remote arrival in a kernel without a cluster: there is no other CTA to
// arrive on (`empty.arrive()` is the local form).
use kda::cluster_kernel;

#[cluster_kernel(block = 64)]
fn release(output: Tensor<f32, rows, 32>) {
    let producer = role!(0..32);
    let consumer = role!(32..64);
    let empty = mbarrier!(arrivals = 32, roles = [producer, consumer]);
    let lane = thread_idx() % 32;
    let cta = block_idx(0);
    in_role!(producer, {
        if lane == 0 {
            empty.init();
        }
        fence_mbarrier_init();
    });
    cluster_sync();
    in_role!(consumer, {
        empty.arrive_on(0);
    });
    in_role!(producer, {
        empty.wait();
        output[[cta, lane]] = 1.0;
    });
    cluster_sync();
}

fn main() {
    let _ = release();
}
