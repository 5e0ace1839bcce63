//! `kda-split ptx` and `kda-split info`.

mod cli_support;

use cli_support::{TempFile, kda_split};

#[test]
fn ptx_is_sm_90a_with_source_comments() {
    let out = kda_split(&["ptx", "--heads", "2", "--batch", "2", "--tokens", "2"]).expect_ok();
    let ptx = &out.stdout;
    assert!(ptx.contains(".target sm_90a"), "{out}");
    assert!(ptx.contains(".visible .entry kda_split("), "{out}");
    assert!(
        ptx.starts_with("// kda-split: heads 2, batch 2, tokens 2, gate mode 0, bias on"),
        "{out}"
    );
    // Instruction groups are annotated with the DSL line that traced them.
    let comments: Vec<&str> = ptx
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("// kernels/kda-split/src/kernel.rs:"))
        .collect();
    assert!(
        comments.len() > 100,
        "few source comments:\n{}",
        comments.join("\n")
    );
}

#[test]
fn ptx_follows_the_configuration_flags() {
    // Specialised for contiguous tensors (as `run` launches them) unless
    // --symbolic-strides: then strides are parameters.
    let specialised = kda_split(&["ptx", "--heads", "2", "--schedule", "seed"])
        .expect_ok()
        .stdout;
    let symbolic = kda_split(&["ptx", "--heads", "2", "--symbolic-strides"])
        .expect_ok()
        .stdout;
    assert!(!specialised.contains("_stride"), "strides became constants");
    assert!(symbolic.contains("_x_stride0"));
    // The cluster size comes from the schedule.
    let c2 = kda_split(&["ptx", "--heads", "2", "--schedule", "2,8,0,2,1"])
        .expect_ok()
        .stdout;
    assert!(c2.contains(".reqnctapercluster 2"), "cluster 2");
    assert!(
        specialised.contains(".reqnctapercluster 4"),
        "the seed's default cluster 4 at batch 64"
    );
    // Without --schedule: the tuned table's schedule (`auto`).
    let tuned = kda_split::KdaConfig::tuned(2, 64, 0, true, 1).unwrap();
    let auto = kda_split(&["ptx", "--heads", "2"]).expect_ok().stdout;
    let s = tuned.schedule.raw().flag();
    assert!(
        auto.starts_with(&format!(
            "// kda-split: heads 2, batch 64, tokens 1, gate mode 0, bias on; schedule [{s}]"
        )),
        "{}",
        &auto[..200]
    );
    assert!(
        auto.contains(&format!(".reqnctapercluster {}", tuned.cluster())),
        "tuned cluster {}",
        tuned.cluster()
    );
    // --ir prints the scheduled IR, --out writes a file.
    let ir = kda_split(&["ptx", "--heads", "2", "--ir", "--schedule", "seed"])
        .expect_ok()
        .stdout;
    assert!(ir.contains("kernel kda_split block=160 cluster=4"), "{ir}");
    let file = TempFile::new("ptx");
    kda_split(&[
        "ptx",
        "--heads",
        "2",
        "--schedule",
        "seed",
        "-o",
        file.path(),
    ])
    .expect_ok();
    assert_eq!(std::fs::read_to_string(&file.0).unwrap(), specialised);
    // Invalid configurations: the typed error, exit 2.
    let out = kda_split(&["ptx", "--schedule", "3,0,0"]).expect_code(2);
    assert!(
        out.stderr
            .contains("invalid configuration: early = 3 needs at least 64 state rows per CTA"),
        "{out}"
    );
}

#[test]
fn ptx_of_a_case_file_is_what_run_launches() {
    let file = TempFile::new("ptx-case");
    kda_split(&["gen-case", "-o", file.path(), "--conv-layout", "sd"]).expect_ok();
    let out = kda_split(&["ptx", "--case", file.path()]).expect_ok();
    assert!(out.stdout.contains("heads 2, batch 4, tokens 1"), "{out}");
    let out = kda_split(&["ptx", "--case", file.path(), "--heads", "3"]).expect_code(2);
    assert!(out.stderr.contains("cannot be used with"), "{out}");
}

fn ptxas_or_fail() {
    assert!(
        kda_ir::ptxas::find().is_some(),
        "ptxas not found: run `bash scripts/provision-ptxas.sh` (scripts/test.sh does) or set KDA_PTXAS"
    );
}

/// The numbers of `info`'s row for `label`: C, lanes, regs.
fn row<'a>(stdout: &'a str, label: &str) -> Vec<&'a str> {
    let line = stdout
        .lines()
        .find(|l| l.starts_with(label))
        .unwrap_or_else(|| panic!("no row `{label}` in\n{stdout}"));
    line[label.len()..].split_whitespace().collect()
}

#[test]
fn info_prints_registers_spills_stack_and_shared_memory() {
    ptxas_or_fail();
    let out = kda_split(&["info", "--heads", "2,12", "--batch", "1,64"]).expect_ok();
    let header = out.stdout.lines().nth(1).unwrap_or_default();
    for column in [
        "regs",
        "spill st/ld",
        "stack",
        "smem st+dyn",
        "CTAs/SM",
        "state/SM",
    ] {
        assert!(header.contains(column), "{out}");
    }
    for (label, cluster) in [
        ("H2 B1 T1 mode0 bias1 sched[0,0,0,0,0]", 8),
        ("H12 B64 T1 mode0 bias1 sched[0,0,0,0,0]", 4),
    ] {
        let cells = row(&out.stdout, label);
        assert_eq!(cells[0], cluster.to_string(), "{out}");
        let regs: u32 = cells[2].parse().unwrap_or_else(|_| panic!("{out}"));
        assert!((24..=255).contains(&regs), "{regs} registers\n{out}");
        assert_eq!(cells[3], "0/0", "spills\n{out}");
        // CTAs per SM from the row's registers and shared memory, and the
        // state rows (128 / C of 512 bytes) those CTAs hold.
        let shared: u32 = cells[7]
            .split('+')
            .map(|b| b.parse::<u32>().unwrap_or_else(|_| panic!("{out}")))
            .sum();
        let occupancy = kda_ir::occupancy::ctas_per_sm(160, regs, shared);
        assert!(occupancy.ctas > 0, "{out}");
        assert_eq!(cells[10], occupancy.ctas.to_string(), "{out}");
        assert_eq!(cells[11], occupancy.limiter.name(), "{out}");
        let state = occupancy.ctas * (128 / cluster) * 512 / 1024;
        assert_eq!(cells[12..14], [state.to_string(), "KiB".into()], "{out}");
    }
}

#[test]
fn info_reports_invalid_configurations_of_a_list_and_exits_2() {
    ptxas_or_fail();
    let out = kda_split(&[
        "info",
        "--heads",
        "2",
        "--batch",
        "2",
        "--tokens",
        "1,2",
        "--schedule",
        "0,0,0",
        "--schedule",
        "2,0,0",
    ])
    .expect_code(2);
    // T = 2 with early 2 is invalid; the other three are reported.
    let cells = row(&out.stdout, "H2 B2 T2 mode0 bias1 sched[2,0,0]");
    assert_eq!(cells[..2], ["invalid", "configuration:"], "{out}");
    for label in [
        "H2 B2 T1 mode0 bias1 sched[0,0,0,0,0]",
        "H2 B2 T1 mode0 bias1 sched[2,0,0,0,0]",
        "H2 B2 T2 mode0 bias1 sched[0,0,0,0,0]",
    ] {
        row(&out.stdout, label);
    }
    assert!(
        out.stderr.contains("1 of 4 configurations are invalid"),
        "{out}"
    );
}
