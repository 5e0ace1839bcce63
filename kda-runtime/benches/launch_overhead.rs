//! Launch overhead on the GPU: chains of launches of a minimal kernel (one
//! cluster of 1 or 2 CTAs that waits for its predecessor and counts itself),
//! with and without PDL, replayed from a CUDA graph and issued directly on the
//! stream; plus the DSMEM exchange demo when the PTX backend can compile it.
//! Prints a markdown table of median µs per launch.
//!
//! `cargo bench -p kda-runtime --bench launch_overhead`; prints "skipped" and
//! exits 0 where there is no CUDA driver (unless `KDA_REQUIRE_GPU` is set).

use std::process::ExitCode;

use kda_ir::{Access, Builder, Dim, Kernel, LaunchDecl, Provenance, Scalar};
use kda_runtime::cuda::median;
use kda_runtime::{CudaBuffer, CudaDevice, CudaKernel, Device, Graph, LaunchConfig, RuntimeError};

const COUNT_LAUNCHES: &str = include_str!("../tests/ptx/count_launches.ptx");
/// Launches per chain: enough that per-replay costs are spread thin.
const CHAIN: usize = 64;
const WARMUP: usize = 10;
const REPLAYS: usize = 200;
const STREAM_CHAINS: usize = 50;

/// The declarations of `count_launches.ptx` in clusters of `cluster` CTAs.
fn count_launches(cluster: u32) -> Kernel {
    let mut b = Builder::new(
        "count_launches",
        LaunchDecl {
            block: 32,
            cluster,
            min_blocks_per_sm: None,
        },
    );
    b.tensor(
        "out",
        Scalar::U32,
        &[Dim::Const(1)],
        &[Dim::Const(1)],
        Provenance::Ready,
        Access::ReadWrite,
    );
    b.finish()
}

struct Row {
    name: &'static str,
    cluster: u32,
    pdl: bool,
    graph_us: f32,
    stream_us: f32,
}

/// Median µs per launch of chains of `CHAIN` launches, replayed from a graph
/// and issued on the stream. Returns how many launches ran, for a check.
fn measure(
    dev: &CudaDevice,
    module: &CudaKernel,
    cfg: &LaunchConfig,
    tensors: &[&CudaBuffer],
) -> Result<(f32, f32, usize), RuntimeError> {
    let chain = |dev: &CudaDevice| (0..CHAIN).try_for_each(|_| dev.launch(module, cfg, tensors));
    let graph = Graph::capture(dev, chain)?;
    for _ in 0..WARMUP {
        graph.replay()?;
    }
    let replays = graph.time_replays(dev, REPLAYS)?;
    let mut chains = Vec::with_capacity(STREAM_CHAINS);
    for _ in 0..STREAM_CHAINS {
        chains.push(dev.time(chain)?);
    }
    let per_launch_us = |ms: &[f32]| median(ms) * 1e3 / CHAIN as f32;
    let launched = CHAIN * (WARMUP + REPLAYS + STREAM_CHAINS);
    Ok((per_launch_us(&replays), per_launch_us(&chains), launched))
}

fn bench(dev: &CudaDevice) -> Result<Vec<Row>, Box<dyn std::error::Error>> {
    let mut rows = Vec::new();
    for cluster in [1, 2] {
        let module = dev.load_ptx(&count_launches(cluster), COUNT_LAUNCHES, 0)?;
        for pdl in [false, true] {
            let counter = dev.upload(&[0; 4])?;
            let cfg = LaunchConfig {
                grid: [cluster, 1, 1],
                pdl,
                ..Default::default()
            };
            let (graph_us, stream_us, launched) = measure(dev, &module, &cfg, &[&counter])?;
            let counted = u32::from_le_bytes(dev.download(&counter)?.try_into().expect("4 bytes"));
            if counted as usize != launched {
                return Err(
                    format!("count_launches: {launched} launches issued, {counted} ran").into(),
                );
            }
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
    match dev.load(&dsmem_exchange::builder_api(cluster)) {
        Ok(module) => {
            let lanes = dsmem_exchange::LANES as usize;
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
                let (graph_us, stream_us, _) = measure(dev, &module, &cfg, &[&src, &dst])?;
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
