// The legal forms of extents: `{CONST}` or a number (comptime), a lowercase
// name (bound at launch), and comptime parameters in braces.
use kda::cluster_kernel;

const LANES: u32 = 32;

#[cluster_kernel(block = 32)]
fn kernel(#[comptime] heads: u32, x: Tensor<f32, rows, { LANES }>, y: Tensor<f32, { heads }, 32>) {
    y[[block_idx(0), thread_idx()]] = x[[block_idx(0), thread_idx()]];
}

fn main() {
    let k = kernel(4);
    assert_eq!(k.syms.len(), 1);
    kda::ir::verifier::verify(&k).unwrap_or_else(|e| panic!("{e}"));
}
