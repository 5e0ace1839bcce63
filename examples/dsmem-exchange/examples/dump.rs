fn main() {
    print!(
        "{}",
        kda_ir::write::write_kernel(&dsmem_exchange::builder_api(2))
    );
}
