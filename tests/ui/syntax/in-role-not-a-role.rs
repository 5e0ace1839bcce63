// `in_role!` names a role; `full` is an mbarrier.
use kda::cluster_kernel;

#[cluster_kernel(block = 64)]
fn kernel(y: Tensor<f32, rows, 64>) {
    let main = role!(0..64);
    let full = mbarrier!(arrivals = 64, roles = [main]);
    in_role!(full, {
        y[[block_idx(0), thread_idx()]] = 0.0;
    });
}

fn main() {
    let _ = kernel();
}
