// A budget is what `setmaxnreg` can set: a multiple of 8 in 24..=256.
use kda::cluster_kernel;

#[cluster_kernel(block = 256)]
fn budgets(out: Tensor<f32, rows, 256>) {
    let producer = role!(0..128, regs = 20);
    let consumer = role!(128..256, regs = 236);
    in_role!(producer, {
        out[[block_idx(0), thread_idx()]] = 1.0;
    });
    in_role!(consumer, {
        out[[block_idx(0), thread_idx()]] = 2.0;
    });
}

fn main() {
    let _ = budgets();
}
