// Receivers release the peer's `empty` once they have read what it sent: a
// remote arrival on the mbarrier (not the buffer it guards), after the
// cluster barrier that follows every CTA's init. The legal twin of
// `before-cluster-sync.rs` and `not-an-mbarrier.rs`.
use kda::cluster_kernel;

#[cluster_kernel(block = 64, cluster = 2)]
fn release(input: Tensor<f32, rows, 32>, output: Tensor<f32, rows, 32>) {
    let sender = role!(0..32);
    let receiver = role!(32..64);
    let full = mbarrier!(arrivals = 1, tx = 128, roles = [sender, receiver]);
    let empty = mbarrier!(arrivals = 32, roles = [sender, receiver]);
    let inbox = shared!([f32; 32], guard = full, roles = [sender, receiver]);
    let lane = thread_idx() % 32;
    let cta = block_idx(0);
    let peer = cluster_rank().add_mod(1, 2);
    in_role!(receiver, {
        if lane == 0 {
            full.init();
            empty.init();
            full.arm();
        }
        fence_mbarrier_init();
    });
    // Every CTA's barriers exist before anyone sends or arrives remotely.
    cluster_sync();
    in_role!(sender, {
        send!(inbox[lane] = input[[cta, lane]], to = peer, completes = full);
        // The peer has read it: its receivers released `empty` here.
        empty.wait();
    });
    in_role!(receiver, {
        full.wait();
        output[[cta, lane]] = inbox[lane];
        empty.arrive_on(peer);
    });
    // No CTA exits while its peer may still arrive on its barriers.
    cluster_sync();
}

fn main() {
    let _ = release();
}
