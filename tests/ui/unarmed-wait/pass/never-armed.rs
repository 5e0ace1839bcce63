// The legal form: the producer arrives on `ready` after filling the tile.
use kda::cluster_kernel;

#[cluster_kernel(block = 64)]
fn never_armed(out: Tensor<f32, rows, 32>) {
    let producer = role!(0..32);
    let consumer = role!(32..64);
    let ready = mbarrier!(arrivals = 32, roles = [producer, consumer]);
    let tile = shared!([f32; 32], guard = ready, roles = [producer, consumer]);
    let lane = thread_idx() % 32;
    in_role!(producer, {
        if lane == 0 {
            ready.init();
        }
    });
    bar_sync(0, 64);
    in_role!(producer, {
        tile[lane] = lane.cast::<f32>();
        ready.arrive();
    });
    in_role!(consumer, {
        ready.wait();
        out[[block_idx(0), lane]] = tile[lane];
    });
}

fn main() {
    let k = never_armed();
    kda::ir::verifier::verify(&k).unwrap_or_else(|e| panic!("{e}"));
}
