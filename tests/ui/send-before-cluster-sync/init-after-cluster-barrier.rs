// The mbarrier is initialised after the cluster barrier: passing the barrier
// does not order the peer's `init` before this CTA's send.
use kda::cluster_kernel;

#[cluster_kernel(block = 64, cluster = 2)]
fn exchange(#[produced] input: Tensor<f32, rows, 32>, output: Tensor<f32, rows, 32>) {
    let sender = role!(0..32);
    let receiver = role!(32..64);
    let full = mbarrier!(arrivals = 1, tx = 128, roles = [sender, receiver]);
    let inbox = shared!([f32; 32], guard = full, roles = [sender, receiver]);
    let lane = thread_idx() % 32;
    let cta = block_idx(0);
    cluster_arrive();
    cluster_wait();
    in_role!(receiver, {
        if lane == 0 {
            full.init();
            full.arm();
        }
        fence_mbarrier_init();
    });
    in_role!(sender, {
        pdl_wait();
        let peer = cluster_rank().add_mod(1, 2);
        send!(
            inbox[lane] = input[[cta, lane]],
            to = peer,
            completes = full
        );
    });
    in_role!(receiver, {
        full.wait();
        output[[cta, lane]] = inbox[lane];
    });
}

fn main() {
    let _ = exchange();
}
