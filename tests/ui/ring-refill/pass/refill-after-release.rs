// The legal form of `refill-without-release`: the producer waits on the
// stage's empty barrier (released, so its first lap passes) before refilling
// it, and the consumers release the stage after reading it.
use kda::cluster_kernel;

#[cluster_kernel(block = 64)]
fn with_release(#[align(16)] x: Tensor<f32, rows, 128>, y: Tensor<f32, rows, 128>, n: u32) {
    let producer = role!(0..32);
    let consumer = role!(32..64);
    let full = mbarrier!(
        arrivals = 1,
        tx = 512,
        roles = [producer, consumer],
        count = 2
    );
    let empty = mbarrier!(
        arrivals = 32,
        roles = [producer, consumer],
        count = 2,
        released
    );
    let ring = shared!([f32; 2, 128], align = 128, guard = full, roles = [producer, consumer]);
    let lane = thread_idx() % 32;
    in_role!(producer, {
        if lane == 0 {
            for s in 0..2u32 {
                full[s].init();
                empty[s].init();
            }
        }
        fence_mbarrier_init();
    });
    bar_sync(0, 64);
    in_role!(producer, {
        for i in range(0, n) {
            let s = i % 2;
            empty[s].wait();
            if lane == 0 {
                full[s].arm();
                bulk_copy!(ring[[s, 0]] = x[[i, 0]], bytes = 512, completes = full[s]);
            }
        }
    });
    in_role!(consumer, {
        for i in range(0, n) {
            let s = i % 2;
            full[s].wait();
            y[[i, lane]] = ring[[s, lane]];
            empty[s].arrive();
        }
    });
}

fn main() {
    let _ = with_release();
}
