//! Print one view of step 5: its IR as traced, its IR as scheduled, its PTX,
//! or ptxas's report.
//!
//! `cargo run -p guide --example inspect -- ir|scheduled|ptx|ptxas [CLUSTER] [early]`

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let view = args.first().map_or("ir", String::as_str);
    let cluster = args.get(1).map_or(Ok(2), |c| c.parse())?;
    let early = args.get(2).is_some_and(|e| e == "early");
    let kernel = guide::step_5::ema_step(cluster, early);
    print!("{}", guide::inspect::show(&kernel, view)?);
    Ok(())
}
