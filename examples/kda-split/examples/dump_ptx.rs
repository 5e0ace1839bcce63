//! Print the PTX of KdaSplit for a configuration built for contiguous
//! arguments: `cargo run -p kda-split --example dump_ptx -- HEADS BATCH TOKENS [schedule...]`.
use kda_split::{GenOptions, KdaConfig, generate, run::kernel_for};

fn main() {
    let a: Vec<u32> = std::env::args()
        .skip(1)
        .map(|s| s.parse().expect("numbers"))
        .collect();
    let (h, b, t) = (
        a.first().copied().unwrap_or(12),
        a.get(1).copied().unwrap_or(1),
        a.get(2).copied().unwrap_or(1),
    );
    let sched: Vec<u32> = if a.len() > 3 {
        a[3..].to_vec()
    } else {
        vec![0, 0, 0]
    };
    let cfg = KdaConfig::new(h, b, 0, true, &sched, t).expect("valid configuration");
    let args = generate(&GenOptions::new(h, b as usize, t));
    let k = kernel_for(&cfg, &args);
    let c = kda_ir::pipeline::compile(&k, &Default::default()).expect("compiles");
    print!("{}", c.ptx);
}
