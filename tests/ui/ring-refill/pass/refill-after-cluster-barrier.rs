// A DSMEM buffer refilled in every iteration of a runtime loop, released by
// a cluster barrier instead of an empty barrier: each iteration starts with
// `cluster_arrive()` / `cluster_wait()` on every thread, so past the wait
// every reader in the cluster has finished the previous iteration's reads
// (the persistent KdaSplit's decays and outputs work this way).
use kda::cluster_kernel;

#[cluster_kernel(block = 64, cluster = 2)]
fn with_cluster_barrier(y: Tensor<f32, rows, 64>, n: u32) {
    let sender = role!(0..32);
    let receiver = role!(32..64);
    let full = mbarrier!(arrivals = 1, tx = 256, roles = [sender, receiver]);
    let inbox = shared!([f32; 64], guard = full, roles = [sender, receiver]);
    let lane = thread_idx() % 32;
    let rank = cluster_rank();
    in_role!(receiver, {
        if lane == 0 {
            full.init();
        }
        fence_mbarrier_init();
        cluster_arrive_relaxed();
        cluster_wait();
        for i in range(0, n) {
            if lane == 0 {
                full.arm();
            }
            cluster_arrive();
            cluster_wait();
            full.wait();
            y[[i * 2 + rank, lane]] = inbox[lane];
            y[[i * 2 + rank, lane + 32]] = inbox[lane + 32];
        }
    });
    in_role!(sender, {
        cluster_arrive_relaxed();
        cluster_wait();
        for i in range(0, n) {
            cluster_arrive();
            cluster_wait();
            let v = (i * 32 + lane).cast::<f32>();
            send!(inbox[rank * 32 + lane] = v, to = all, completes = full);
        }
    });
}

fn main() {
    let _ = with_cluster_barrier();
}
