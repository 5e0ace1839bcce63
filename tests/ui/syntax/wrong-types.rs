// Wrong types in the signature and in declarations, reported together.
use kda::cluster_kernel;

pub struct Config {
    pub heads: u32,
}

#[cluster_kernel(block = 64, cluster = "2")]
fn kernel(cfg: &Config, x: Tensor<f16, rows, 64>, n: usize) {
    let full = mbarrier!(arrivals = "one", tx = 1.5);
    let buf = shared!([f16; 64]);
}

fn main() {
    let _ = kernel(&Config { heads: 1 });
}
