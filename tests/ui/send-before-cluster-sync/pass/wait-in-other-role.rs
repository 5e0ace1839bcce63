// The legal form with the cluster barrier inside the roles: each role arrives
// once and the senders wait just before their first send (the seed's "early"
// schedule, which overlaps the PDL wait with the cluster barrier).
use kda::cluster_kernel;

#[cluster_kernel(block = 64, cluster = 2)]
fn exchange(#[produced] input: Tensor<f32, rows, 32>, output: Tensor<f32, rows, 32>) {
    let sender = role!(0..32);
    let receiver = role!(32..64);
    let full = mbarrier!(arrivals = 1, tx = 128, roles = [sender, receiver]);
    let inbox = shared!([f32; 32], guard = full, roles = [sender, receiver]);
    let lane = thread_idx() % 32;
    let cta = block_idx(0);
    in_role!(receiver, {
        if lane == 0 {
            full.init();
            full.arm();
        }
        fence_mbarrier_init();
        cluster_arrive_relaxed();
        cluster_wait();
    });
    in_role!(sender, {
        cluster_arrive_relaxed();
        pdl_wait();
        let x = input[[cta, lane]];
        let peer = cluster_rank().add_mod(1, 2);
        cluster_wait();
        send!(inbox[lane] = x, to = peer, completes = full);
    });
    in_role!(receiver, {
        full.wait();
        output[[cta, lane]] = inbox[lane];
    });
}

fn main() {
    let k = exchange();
    kda::ir::verifier::verify(&k).unwrap_or_else(|e| panic!("{e}"));
}
