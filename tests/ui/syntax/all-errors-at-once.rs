// Independent mistakes are reported together, each at its token, and the
// call of the kernel in `main` does not add errors of its own.
use kda::cluster_kernel;

#[cluster_kernel(block = 64, cluster = 2)]
fn kernel(#[produced] x: Tensor<f32, rows, 32>, y: Tensor<f32, rows, 32>) {
    let sender = role!(0..48);
    let receiver = role!(32..64);
    let full = mbarrier!(arrivals = 1, tx = 128, roles = [receiver]);
    let inbox = shared!([f32; 32], guard = full, roles = [sender, receiver]);
    let lane = thread_idx() % 32;
    in_role!(sender, {
        send!(
            inbox[lane] = x[[block_idx(0), lane]],
            to = 1,
            completes = full
        );
    });
    in_role!(receiver, {
        y[[block_idx(0), lane]] = shfl_idx(inbox[lane], 0);
    });
}

fn main() {
    let k = kernel();
    println!("{}", k.name);
}
