// The legal form: the producer is a whole warpgroup (threads 0..128).
use kda::cluster_kernel;

#[cluster_kernel(block = 384)]
fn budgets(out: Tensor<f32, rows, 384>) {
    let producer = role!(0..128, regs = 40);
    let consumers = role!(128..384, regs = 232);
    in_role!(producer, {
        out[[block_idx(0), thread_idx()]] = 1.0;
    });
    in_role!(consumers, {
        out[[block_idx(0), thread_idx()]] = 2.0;
    });
}

fn main() {
    let k = budgets();
    kda::ir::verifier::verify(&k).unwrap_or_else(|e| panic!("{e}"));
}
