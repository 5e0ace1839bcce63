// Role blocks do not nest: a thread runs the code of one role.
use kda::cluster_kernel;

#[cluster_kernel(block = 64)]
fn kernel(y: Tensor<f32, rows, 64>) {
    let producer = role!(0..32);
    let consumer = role!(32..64);
    in_role!(producer, {
        in_role!(consumer, {
            y[[block_idx(0), thread_idx()]] = 0.0;
        });
    });
}

fn main() {
    let _ = kernel();
}
