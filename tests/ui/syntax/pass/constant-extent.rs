// The legal forms of extents: `{CONST}` or a number (comptime), a lowercase
// name (bound at launch), and comptime parameters in braces.
use kda::cluster_kernel;

const LANES: u32 = 32;

#[cluster_kernel(block = 32)]
fn kernel(#[comptime] heads: u32, x: Tensor<f32, rows, { LANES }>, y: Tensor<f32, { heads }, 32>) {
    y[[block_idx(0), thread_idx()]] = x[[block_idx(0), thread_idx()]];
}

fn main() {
    use kda::ir::Dim::Const;
    let k = kernel(4);
    let shapes: Vec<_> = k.tensors.values().map(|t| t.shape.clone()).collect();
    assert!(matches!(shapes[0][..], [kda::ir::Dim::Sym(_), Const(32)]));
    assert_eq!(shapes[1], [Const(4), Const(32)]);
    kda::ir::verifier::verify(&k).unwrap_or_else(|e| panic!("{e}"));
}
