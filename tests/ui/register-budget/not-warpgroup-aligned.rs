// `setmaxnreg` resizes a whole warpgroup (four warps, 128 threads): a role
// of two warps cannot have a budget of its own.
use kda::cluster_kernel;

#[cluster_kernel(block = 384)]
fn budgets(out: Tensor<f32, rows, 384>) {
    let producer = role!(0..64, regs = 40);
    let consumers = role!(128..384, regs = 232);
    in_role!(producer, {
        out[[block_idx(0), thread_idx()]] = 1.0;
    });
    in_role!(consumers, {
        out[[block_idx(0), thread_idx()]] = 2.0;
    });
}

fn main() {
    let _ = budgets();
}
