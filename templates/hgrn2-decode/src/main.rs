//! `cargo run --release`: the host program (`src/host.rs`).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    hgrn2_decode::host::main()
}
