fn main() {
    println!("kda-split: CLI not yet wired");
}
