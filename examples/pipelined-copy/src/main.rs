//! `pipelined-copy`: check the kernel for 1..=4 stages and several tile
//! counts on the GPU if there is one, else on the simulator, and exit 0 only
//! if every run matches the host, with both output paths (`st.global` from
//! registers, and the bulk store of each stage; `--path` keeps one).
//! `--bench` (GPU only) times 1 GiB for 2, 3 and 4 stages, both paths, other
//! tile sizes and L2 policies, next to the device copy ceiling.

use std::process::ExitCode;

use clap::{Parser, ValueEnum};
use kda_runtime::{AnyDevice, CudaDevice, Device};
use pipelined_copy::bench::{Point, bench, default_rings, sweep_points};
use pipelined_copy::run::run_checked;
use pipelined_copy::{Order, Ring};

/// Which output paths the check runs.
#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
enum Path {
    /// `st.global` from registers.
    St,
    /// The stage written back and bulk-stored.
    Bulk,
    /// Both.
    Both,
}

#[derive(Parser)]
#[command(about = "A persistent, warp-specialised streaming kernel over an N-stage ring")]
struct Cli {
    /// Time 1 GiB for 2, 3 and 4 stages, both output paths, against the copy
    /// ceiling (needs a GPU).
    #[arg(long)]
    bench: bool,
    /// Input bytes for --bench (16 KiB to 16 GiB: input and output are
    /// both held on the device, the input also on the host).
    #[arg(long, default_value_t = 1 << 30, value_parser = clap::value_parser!(u64).range(16 << 10..=16 << 30))]
    bytes: u64,
    /// With --bench: measure the wide sweep (tile size x stages x CTAs per
    /// SM, bulk copies per stage, contiguous tiles) instead of the default
    /// configurations.
    #[arg(long, requires = "bench")]
    sweep: bool,
    /// Timed runs per configuration for --bench (1 to 10000).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    reps: u32,
    /// Output paths the check runs (not --bench).
    #[arg(long, value_enum, default_value_t = Path::Both)]
    path: Path,
}

fn check(path: Path) -> ExitCode {
    let dev = match AnyDevice::gpu_or_sim(0) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("pipelined-copy: no device: {e}");
            return ExitCode::FAILURE;
        }
    };
    // The simulator interprets every thread: keep its runs small.
    let tiles: &[u32] = if dev.is_gpu() {
        &[0, 1, 7, 4097]
    } else {
        &[0, 1, 5, 9]
    };
    let mut ok = true;
    for stages in 1..=4 {
        let paths = match path {
            Path::St => &[false][..],
            Path::Bulk => &[true],
            Path::Both => &[false, true],
        };
        for (&bulk_out, &t) in paths.iter().flat_map(|b| tiles.iter().map(move |t| (b, t))) {
            let path = if bulk_out { "bulk store" } else { "st.global" };
            for order in [Order::Strided, Order::Queue] {
                let ring = Ring {
                    order,
                    ..Ring::new(stages, bulk_out)
                };
                match run_checked(&dev, &ring, t, None) {
                    Ok(r) => println!(
                        "{}: {stages} stages, {path}, {order:?}, {t} tiles on {} CTAs: match",
                        dev.describe(),
                        r.grid
                    ),
                    Err(e) => {
                        println!("{}: MISMATCH: {e}", dev.describe());
                        ok = false;
                    }
                }
            }
        }
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn run_bench(cli: &Cli) -> ExitCode {
    let dev = match CudaDevice::new(0) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("pipelined-copy --bench needs a GPU: {e}");
            return ExitCode::FAILURE;
        }
    };
    let points: Vec<Point> = if cli.sweep {
        sweep_points()
    } else {
        default_rings().into_iter().map(Point::from).collect()
    };
    match bench(&dev, cli.bytes, &points, cli.reps as usize) {
        Ok(rows) => {
            let ceiling = rows[0].gbps;
            println!(
                "{}: {} bytes read + written per run",
                dev.describe(),
                rows[0].bytes
            );
            for r in &rows {
                println!(
                    "{:<100} {:>9.3} ms {:>8.1} GB/s {:>6.1} % of the ceiling{}{}",
                    r.name,
                    r.median_ms,
                    r.gbps,
                    100.0 * r.gbps / ceiling,
                    if r.checked { ", checked" } else { "" },
                    if r.grid > 0 {
                        format!(" (grid {})", r.grid)
                    } else {
                        String::new()
                    }
                );
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("pipelined-copy --bench: {e}");
            ExitCode::FAILURE
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if cli.bench {
        run_bench(&cli)
    } else {
        check(cli.path)
    }
}
