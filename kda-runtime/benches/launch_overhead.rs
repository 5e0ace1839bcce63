//! Launch overhead on the GPU: chains of launches of a minimal kernel (one
//! cluster of 1 or 2 CTAs that waits for its predecessor and marks its own
//! slot; built with the IR builder in `tests/common/kernels.rs`),
//! with and without PDL, replayed from a CUDA graph and issued directly on the
//! stream; plus the DSMEM exchange demo when the PTX backend can compile it.
//! Prints a markdown table of median µs per launch.
//!
//! `cargo bench -p kda-runtime --bench launch_overhead`; prints "skipped" and
//! exits 0 where there is no CUDA driver (unless `KDA_REQUIRE_GPU` is set).

use std::process::ExitCode;

use kda_runtime::cuda::median;
use kda_runtime::{CudaDevice, Device, Graph, LaunchConfig, RuntimeError, ScalarArg};

#[path = "../tests/common/kernels.rs"]
mod kernels;

/// Launches per chain: enough that per-replay costs are spread thin.
const CHAIN: usize = 64;
const WARMUP: usize = 10;
const REPLAYS: usize = 200;
const STREAM_CHAINS: usize = 50;

/// What `count_launches` writes to its slot in the chain captured in the
/// graph (round 0) and in the chains issued on the stream (rounds 1..).
fn mark(slot: usize, round: usize) -> u32 {
    (round * 1000 + slot + 1) as u32
}

struct Row {
    name: &'static str,
    cluster: u32,
    pdl: bool,
    graph_us: f32,
    stream_us: f32,
}

/// One launch: slot `slot` of a chain, in round `round` (0: the chain
/// captured in the graph; 1..: the chains issued on the stream).
type Launch<'a> = dyn Fn(&CudaDevice, usize, usize) -> Result<(), RuntimeError> + 'a;

/// Median µs per launch of chains of `CHAIN` launches, replayed from a graph
/// and issued on the stream. `check(round)` runs after the graph replays
/// (round 0) and after the last stream chain (round `STREAM_CHAINS`).
fn measure(
    dev: &CudaDevice,
    launch: &Launch,
    check: &dyn Fn(usize) -> Result<(), Box<dyn std::error::Error>>,
) -> Result<(f32, f32), Box<dyn std::error::Error>> {
    let chain =
        |dev: &CudaDevice, round: usize| (0..CHAIN).try_for_each(|slot| launch(dev, slot, round));
    let graph = Graph::capture(dev, |dev| chain(dev, 0))?;
    for _ in 0..WARMUP {
        graph.replay()?;
    }
    let replays = graph.time_replays(dev, REPLAYS)?;
    check(0)?;
    let mut chains = Vec::with_capacity(STREAM_CHAINS);
    for round in 1..=STREAM_CHAINS {
        chains.push(dev.time(|dev| chain(dev, round))?);
    }
    check(STREAM_CHAINS)?;
    let per_launch_us = |ms: &[f32]| median(ms) * 1e3 / CHAIN as f32;
    Ok((per_launch_us(&replays), per_launch_us(&chains)))
}

fn bench(dev: &CudaDevice) -> Result<Vec<Row>, Box<dyn std::error::Error>> {
    let mut rows = Vec::new();
    for cluster in [1, 2] {
        let module = dev.load(&kernels::count_launches(cluster, CHAIN as u32))?;
        for pdl in [false, true] {
            let slots = dev.upload(&[0; 4 * CHAIN])?;
            let launch = |dev: &CudaDevice, slot: usize, round: usize| {
                let cfg = LaunchConfig {
                    grid: [cluster, 1, 1],
                    pdl,
                    syms: vec![],
                    scalars: vec![
                        ScalarArg::U32(slot as u32),
                        ScalarArg::U32(mark(slot, round)),
                    ],
                };
                dev.launch(&module, &cfg, &[&slots])
            };
            // Every launch wrote its own slot, with the mark it was issued with.
            let check = |round: usize| -> Result<(), Box<dyn std::error::Error>> {
                let got: Vec<u32> = dev
                    .download(&slots)?
                    .chunks_exact(4)
                    .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")))
                    .collect();
                let want: Vec<u32> = (0..CHAIN).map(|s| mark(s, round)).collect();
                if got != want {
                    return Err(format!(
                        "count_launches (cluster {cluster}, pdl {pdl}, round {round}): \
                         slots {got:?}, issued {want:?}"
                    )
                    .into());
                }
                Ok(())
            };
            let (graph_us, stream_us) = measure(dev, &launch, &check)?;
            rows.push(Row {
                name: "count_launches",
                cluster,
                pdl,
                graph_us,
                stream_us,
            });
        }
    }
    let cluster = 2;
    match dev.load(&kda_ir::testkernels::dsmem_exchange(cluster)) {
        Ok(module) => {
            let lanes = kda_ir::testkernels::LANES as usize;
            let n_rows = cluster as usize;
            let src = dev.upload(&vec![0; n_rows * lanes * 4])?;
            let dst = dev.upload(&vec![0; n_rows * lanes * 4])?;
            for pdl in [false, true] {
                let cfg = LaunchConfig {
                    grid: [cluster, 1, 1],
                    pdl,
                    syms: vec![n_rows as i64],
                    scalars: vec![],
                };
                let launch =
                    |dev: &CudaDevice, _: usize, _: usize| dev.launch(&module, &cfg, &[&src, &dst]);
                let (graph_us, stream_us) = measure(dev, &launch, &|_| Ok(()))?;
                rows.push(Row {
                    name: "dsmem_exchange",
                    cluster,
                    pdl,
                    graph_us,
                    stream_us,
                });
            }
        }
        Err(e) => println!("(dsmem_exchange left out: {e})\n"),
    }
    Ok(rows)
}

fn main() -> ExitCode {
    let dev = match CudaDevice::new(0) {
        Ok(dev) => dev,
        // The staged GPU run sets KDA_REQUIRE_GPU: there, no GPU is a failure.
        Err(RuntimeError::NoDriver(why)) if std::env::var_os("KDA_REQUIRE_GPU").is_none() => {
            println!("skipped: no CUDA driver ({why})");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!("launch overhead on {}", dev.describe());
    println!(
        "chains of {CHAIN} launches; graph: median of {REPLAYS} timed replays; \
         stream: median of {STREAM_CHAINS} chains launched one by one\n"
    );
    let rows = match bench(&dev) {
        Ok(rows) => rows,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!("| kernel | CTAs (one cluster) | PDL | graph µs/launch | stream µs/launch |");
    println!("|---|---:|---|---:|---:|");
    for r in rows {
        println!(
            "| {} | {} | {} | {:.2} | {:.2} |",
            r.name,
            r.cluster,
            if r.pdl { "yes" } else { "no" },
            r.graph_us,
            r.stream_us
        );
    }
    ExitCode::SUCCESS
}
