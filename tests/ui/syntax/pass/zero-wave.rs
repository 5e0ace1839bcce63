// The legal form: a wave of at least one chain. The body states one row's
// chain (load, then scale and store); `wave` only decides how many rows'
// phases are issued together: two loads, two stores, two loads, two stores.
use kda::cluster_kernel;

#[cluster_kernel(block = 32, wave = wave)]
fn rows(#[comptime] wave: u32, x: Tensor<f32, rows, 32>, y: Tensor<f32, rows, 32>) {
    let t = thread_idx();
    let base = block_idx(0) * 4;
    let mut loaded = regs!([f32; 4]);
    chains(4, 2, |r, phase| match phase {
        0 => loaded[r] = x[[base + r as u32, t]],
        _ => y[[base + r as u32, t]] = loaded[r] * 2.0,
    });
}

fn main() {
    use kda::ir::write::write_kernel;
    for (wave, order) in [(1, "lslslsls"), (2, "llssllss"), (3, "lllsssls"), (4, "llllssss")] {
        let text = write_kernel(&rows(wave));
        assert!(text.contains(&format!(" wave={wave} {{")), "{text}");
        let issued: String = text
            .lines()
            .filter_map(|l| {
                if l.contains("= ld.global t0") {
                    Some('l')
                } else if l.contains("st.global t1") {
                    Some('s')
                } else {
                    None
                }
            })
            .collect();
        assert_eq!(issued, order, "wave {wave}:\n{text}");
    }
}
