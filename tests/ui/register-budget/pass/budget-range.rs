// The legal form: budgets on multiples of 8 (256 threads start at the
// default 248; 128 × 24 + 128 × 232 = 32768).
use kda::cluster_kernel;

#[cluster_kernel(block = 256)]
fn budgets(out: Tensor<f32, rows, 256>) {
    let producer = role!(0..128, regs = 24);
    let consumer = role!(128..256, regs = 232);
    in_role!(producer, {
        out[[block_idx(0), thread_idx()]] = 1.0;
    });
    in_role!(consumer, {
        out[[block_idx(0), thread_idx()]] = 2.0;
    });
}

fn main() {
    let k = budgets();
    kda::ir::verifier::verify(&k).unwrap_or_else(|e| panic!("{e}"));
}
