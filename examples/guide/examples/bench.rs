//! µs per step of the guide's kernel on the GPU: a stack of `LAYERS` EMA
//! layers (layer l reads layer l − 1's output) captured in a CUDA graph,
//! replayed, and timed with events, with and without PDL.
//!
//! `cargo run --release -p guide --example bench`; without a GPU it says so
//! and exits 0.

use guide::host::{Problem, upload};
use guide::step_5::ema_step::Args;
use kda::runtime::cuda::{gpu_or_skip, median};
use kda::runtime::{Device, Graph};

const LAYERS: usize = 16;
const ROWS: usize = 256;
const WARMUP: usize = 10;
const REPLAYS: usize = 100;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let Some(dev) = gpu_or_skip() else {
        return Ok(()); // it printed "skipped: no CUDA driver (..)"
    };
    println!(
        "{}: {LAYERS} layers of {ROWS} requests per graph\n",
        dev.describe()
    );
    println!("| cluster | early | PDL | µs per step |");
    println!("|---|---|---|---|");
    for cluster in [1, 2, 4] {
        for early in [false, true] {
            let kernel = guide::step_5::ema_step(cluster, early);
            let module = dev.load(&kernel)?;
            let channels = 32 * cluster as usize;
            let layers: Vec<Problem> = (0..LAYERS)
                .map(|l| Problem::new(ROWS, channels, l as u64))
                .collect();
            let bufs = layers
                .iter()
                .map(|p| upload(&dev, p))
                .collect::<Result<Vec<_>, _>>()?;
            for pdl in [false, true] {
                let graph = Graph::capture(&dev, |dev| {
                    for l in 0..LAYERS {
                        // x of layer l = y of layer l − 1
                        let x = if l > 0 { &bufs[l - 1].y } else { &bufs[0].x };
                        let args = Args {
                            x: x.arg(),
                            ..bufs[l].args()
                        };
                        args.launch(dev, &module, layers[l].launch(pdl))?;
                    }
                    Ok(())
                })?;
                for _ in 0..WARMUP {
                    graph.replay()?;
                }
                let ms = graph.time_replays(&dev, REPLAYS)?;
                let us = median(&ms) * 1e3 / graph.launches() as f32;
                println!("| {cluster} | {early} | {pdl} | {us:.2} |");
            }
        }
    }
    Ok(())
}
