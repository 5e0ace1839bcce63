// A wait on an mbarrier that nothing arrives on and nothing completes never returns.
use kda::cluster_kernel;

#[cluster_kernel(block = 64)]
fn never_armed(out: Tensor<f32, rows, 32>) {
    let producer = role!(0..32);
    let consumer = role!(32..64);
    let ready = mbarrier!(arrivals = 1, roles = [producer, consumer]);
    let tile = shared!([f32; 32], guard = ready, roles = [producer, consumer]);
    let lane = thread_idx() % 32;
    in_role!(producer, {
        if lane == 0 {
            ready.init();
        }
        tile[lane] = lane.cast::<f32>();
    });
    bar_sync(0, 64);
    in_role!(consumer, {
        ready.wait();
        out[[block_idx(0), lane]] = tile[lane];
    });
}

fn main() {
    let _ = never_armed();
}
