// `ring` is guarded per stage by the ring `full`: stage `s` is filled
// through `full[s]`. The consumer waits on `full[s]` but reads the next
// stage, `(s + 1) % stages`, which nobody has waited for.
use kda::cluster_kernel;

#[cluster_kernel(block = 64)]
fn staged(#[comptime] stages: u32, #[align(16)] x: Tensor<f32, rows, 32>, y: Tensor<f32, rows, 32>, n: u32) {
    let producer = role!(0..32);
    let consumer = role!(32..64);
    let full = mbarrier!(arrivals = 1, tx = 128, roles = [producer, consumer], count = stages);
    let empty = mbarrier!(arrivals = 32, roles = [producer, consumer], count = stages, released);
    let ring = shared!([f32; stages, 32], align = 128, guard = full, roles = [producer, consumer]);
    let lane = thread_idx() % 32;
    in_role!(producer, {
        if lane == 0 {
            for s in 0..stages {
                full[s].init();
                empty[s].init();
            }
        }
        fence_mbarrier_init();
    });
    bar_sync(0, 64);
    in_role!(producer, {
        for i in range(0, n) {
            let s = i % stages;
            empty[s].wait();
            if lane == 0 {
                full[s].arm();
                bulk_copy!(ring[[s, 0]] = x[[i, 0]], bytes = 128, completes = full[s]);
            }
        }
    });
    in_role!(consumer, {
        for i in range(0, n) {
            let s = i % stages;
            full[s].wait();
            y[[i, lane]] = ring[[(s + 1) % stages, lane]];
            empty[s].arrive();
        }
    });
}

fn main() {
    let _ = staged(2);
}
