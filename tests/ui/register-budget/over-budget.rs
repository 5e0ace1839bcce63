// 128 × 56 + 2 × 128 × 232 = 66560 registers, more than the 384 × 168 =
// 64512 the block starts with: a consumer's `setmaxnreg.inc` would wait
// for registers no warpgroup releases.
use kda::cluster_kernel;

#[cluster_kernel(block = 384, max_regs = 168)]
fn budgets(out: Tensor<f32, rows, 384>) {
    let producer = role!(0..128, regs = 56);
    let consumer0 = role!(128..256, regs = 232);
    let consumer1 = role!(256..384, regs = 232);
    in_role!(producer, {
        out[[block_idx(0), thread_idx()]] = 1.0;
    });
    in_role!(consumer0, {
        out[[block_idx(0), thread_idx()]] = 2.0;
    });
    in_role!(consumer1, {
        out[[block_idx(0), thread_idx()]] = 3.0;
    });
}

fn main() {
    let _ = budgets();
}
