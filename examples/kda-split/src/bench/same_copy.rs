//! The same-bytes copy: what a plain copy reaches when it moves exactly a
//! point's state traffic, chained the way KdaSplit's steps are.
//!
//! The copy ceiling is one launch over 1 GiB; a KdaSplit step at batch 128
//! moves a few hundred MB inside a graph of PDL-chained launches, so the
//! fixed cost of a step (the launch / PDL boundary, the first wave's ramp,
//! the tail) weighs far more. This copy pays the same: per point it reads
//! `R = B·H·64 KiB` (one state page per request and head) and writes `T`
//! copies of it (`W = T·R`) with [`copy_step_kernel`] (the ceiling's tiles;
//! PDL trigger at the entry, loads before the wait, stores after), in a
//! graph of as many steps as the point's KdaSplit graph, step `s` on group
//! `s mod groups` of source and destination regions, the groups and steps
//! being those of the point's workload ([`rotation_of`]). `R + W` is the
//! point's `state_bytes_per_step`, so KdaSplit's "% of same-bytes copy" is
//! the copy's µs/step over KdaSplit's.
//!
//! Generic over the device, so `bench --sim` runs the same rotation and
//! check on the simulator.
//!
//! [`copy_step_kernel`]: super::kernels::copy_step_kernel

use kda_ir::Scalar;
use kda_runtime::{Device, LaunchConfig, RuntimeError};

use super::error::BenchError;
use super::kernels::{FILL_MAX, copy_launch, copy_tile, fill, fill_kernel};
use super::workload::{BenchDevice, PAGE_BYTES, Plan, Point, rotation_of};

/// A point's state traffic as a copy: `read_bytes` read, `copies` copies
/// of them written, per step. Built by [`SameBytes::of`], which checks that
/// every size fits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SameBytes {
    read_bytes: usize,
    copies: u32,
}

/// Floats one copy-step launch reads at most: its element indices are u32,
/// and the fill kernel fills one source region in one launch.
pub const MAX_READ_FLOATS: usize = FILL_MAX;

impl SameBytes {
    /// The copy of `point`: `B·H` pages read, `T` copies written. Fails,
    /// naming the point, when a size overflows or the source is larger than
    /// one copy-step launch reads ([`MAX_READ_FLOATS`]).
    pub fn of(point: &Point) -> Result<SameBytes, BenchError> {
        let bad = |why: String| BenchError::SameCopySize { point: *point, why };
        let read_bytes = (point.batch as usize)
            .checked_mul(point.heads as usize)
            .and_then(|n| n.checked_mul(PAGE_BYTES))
            .ok_or_else(|| bad("B·H·64 KiB bytes read overflow usize".into()))?;
        let same = SameBytes {
            read_bytes,
            copies: point.tokens,
        };
        if read_bytes
            .checked_mul(same.copies as usize)
            .and_then(|w| w.checked_add(read_bytes))
            .is_none()
        {
            return Err(bad("T·B·H·64 KiB bytes written overflow usize".into()));
        }
        if read_bytes == 0 || same.copies == 0 {
            return Err(bad("it moves no bytes (B, H and T must be positive)".into()));
        }
        if same.floats() > MAX_READ_FLOATS {
            return Err(bad(format!(
                "{} floats read per step; one copy step reads at most {MAX_READ_FLOATS}",
                same.floats()
            )));
        }
        Ok(same)
    }

    /// Bytes read per step (`R`).
    pub fn read_bytes(&self) -> usize {
        self.read_bytes
    }

    /// Copies written per step (`T`).
    pub fn copies(&self) -> u32 {
        self.copies
    }

    /// Floats read per step.
    pub fn floats(&self) -> usize {
        self.read_bytes / 4
    }

    /// Bytes written per step (`W = T·R`; [`SameBytes::of`] checked that
    /// `R + W` fits).
    pub fn write_bytes(&self) -> usize {
        self.read_bytes * self.copies as usize
    }

    /// Bytes read + written per step (`R + W`: the point's state traffic).
    pub fn bytes_per_step(&self) -> usize {
        self.read_bytes + self.write_bytes()
    }

    /// The launch of `copy_step_kernel(block, unroll, T)` over the read
    /// bytes, PDL on. Fails when the bytes are not whole tiles of the
    /// variant.
    pub fn launch(&self, block: u32, unroll: u32) -> Result<LaunchConfig, BenchError> {
        step_launch(block, unroll, self.floats())
    }

    /// `(groups, steps)`: those of the point's KdaSplit workload under
    /// `plan` (its slot groups hold `W` bytes of state each). Each copy group
    /// holds `R + W` bytes, so the copy rotates over at least as much.
    pub fn rotation(&self, plan: &Plan) -> (usize, usize) {
        rotation_of(plan, self.write_bytes())
    }
}

/// `copy_step_kernel(block, unroll, _)`'s launch over `floats` floats read,
/// PDL on; `floats` must be whole tiles.
pub fn step_launch(block: u32, unroll: u32, floats: usize) -> Result<LaunchConfig, BenchError> {
    let tile = copy_tile(block, unroll) as usize;
    if floats == 0 || !floats.is_multiple_of(tile) || floats > MAX_READ_FLOATS {
        return Err(BenchError::Runtime(RuntimeError::BadLaunch {
            kernel: format!("bench_copy_step_b{block}_u{unroll}"),
            msg: format!(
                "{floats} floats is not a positive multiple of the tile ({tile}) of at most {MAX_READ_FLOATS}"
            ),
        }));
    }
    Ok(LaunchConfig {
        pdl: true,
        ..copy_launch(block, unroll, floats)
    })
}

/// The same-bytes copy's buffers on a device: `groups` source regions of
/// `R` bytes (filled with seeded values) and as many destination regions of
/// `W` bytes; step `s` copies source `s mod groups` into destination
/// `s mod groups`.
pub struct CopyRotation<B> {
    pub same: SameBytes,
    pub groups: usize,
    pub steps: usize,
    srcs: Vec<B>,
    dsts: Vec<B>,
}

impl<B> CopyRotation<B> {
    /// Allocate and fill the groups of `same` under `plan` on `dev`
    /// (`seed` varies the source values).
    pub fn new<D: BenchDevice<Buffer = B>>(
        dev: &D,
        same: SameBytes,
        plan: &Plan,
        seed: u32,
    ) -> Result<Self, BenchError> {
        let (groups, steps) = same.rotation(plan);
        let fill_f32 = dev.load(&fill_kernel(Scalar::F32))?;
        let mut srcs = Vec::with_capacity(groups);
        let mut dsts = Vec::with_capacity(groups);
        for g in 0..groups {
            let src = dev.alloc(same.read_bytes)?;
            fill(
                dev,
                &fill_f32,
                &src,
                same.floats(),
                seed ^ (g as u32).wrapping_mul(0x9e37_79b9),
                1.0,
            )?;
            srcs.push(src);
            dsts.push(dev.alloc(same.write_bytes())?);
        }
        dev.synchronize()?;
        Ok(CopyRotation {
            same,
            groups,
            steps,
            srcs,
            dsts,
        })
    }

    /// Bytes the groups hold in all (`groups · (R + W)`).
    pub fn bytes(&self) -> usize {
        self.groups.saturating_mul(self.same.bytes_per_step())
    }

    /// Fill every destination region with seeded values unlike any
    /// source's, so a check after a launch sees what that launch wrote (not
    /// what an earlier variant left there).
    pub fn poison<D: BenchDevice<Buffer = B>>(&self, dev: &D, seed: u32) -> Result<(), BenchError> {
        let fill_f32 = dev.load(&fill_kernel(Scalar::F32))?;
        let floats = self.same.write_bytes() / 4;
        for (g, dst) in self.dsts.iter().enumerate() {
            fill(
                dev,
                &fill_f32,
                dst,
                floats,
                !seed ^ (g as u32).wrapping_mul(0x85eb_ca6b),
                1.0,
            )?;
        }
        dev.synchronize()?;
        Ok(())
    }

    /// Launch step `step` of the loaded copy-step kernel `module`.
    pub fn launch<D: Device<Buffer = B>>(
        &self,
        dev: &D,
        module: &D::Module,
        cfg: &LaunchConfig,
        step: usize,
    ) -> Result<(), RuntimeError> {
        let g = step % self.groups;
        dev.launch(module, cfg, &[&self.srcs[g], &self.dsts[g]])
    }

    /// Download group `group`'s source and destination and check that the
    /// destination holds `T` exact copies of the source.
    pub fn check_group<D: Device<Buffer = B>>(
        &self,
        dev: &D,
        kernel: &str,
        group: usize,
    ) -> Result<(), BenchError> {
        let src = dev.download(&self.srcs[group])?;
        let dst = dev.download(&self.dsts[group])?;
        compare_copies(kernel, &src, &dst)
    }
}

/// Whether `dst` is `src` repeated (bit for bit); else the first element
/// that differs, as [`BenchError::CopyStepMismatch`].
pub fn compare_copies(kernel: &str, src: &[u8], dst: &[u8]) -> Result<(), BenchError> {
    let f32_at = |b: &[u8], i: usize| f32::from_le_bytes(b[4 * i..4 * i + 4].try_into().unwrap());
    let n = src.len() / 4;
    if n == 0 || !dst.len().is_multiple_of(src.len()) {
        return Err(BenchError::CopyStepMismatch {
            kernel: kernel.into(),
            copy: 0,
            index: 0,
            got: f32::NAN,
            want: f32::NAN,
        });
    }
    for (copy, region) in dst.chunks_exact(src.len()).enumerate() {
        if region != src
            && let Some(index) = (0..n).find(|&i| src[4 * i..4 * i + 4] != region[4 * i..4 * i + 4])
        {
            return Err(BenchError::CopyStepMismatch {
                kernel: kernel.into(),
                copy,
                index,
                got: f32_at(region, index),
                want: f32_at(src, index),
            });
        }
    }
    Ok(())
}

/// One launch of the loaded copy-step kernel `module` (`copies` copies)
/// over `floats` filled floats into a poisoned destination, compared with
/// its source: `Ok(())` when every copy is exact.
pub fn check_copy_step<D: BenchDevice>(
    dev: &D,
    module: &D::Module,
    block: u32,
    unroll: u32,
    copies: u32,
    floats: usize,
) -> Result<(), BenchError> {
    let launch = step_launch(block, unroll, floats)?;
    let write = floats
        .checked_mul(4 * copies as usize)
        .ok_or_else(|| RuntimeError::BadLaunch {
            kernel: dev.module_kernel(module).name.clone(),
            msg: format!("{copies} copies of {floats} floats overflow usize"),
        })?;
    let fill_f32 = dev.load(&fill_kernel(Scalar::F32))?;
    let src = dev.alloc(floats * 4)?;
    let dst = dev.alloc(write)?;
    fill(dev, &fill_f32, &src, floats, 21, 1.0)?;
    fill(dev, &fill_f32, &dst, write / 4, 22, 1.0)?;
    dev.launch(module, &launch, &[&src, &dst])?;
    compare_copies(
        &dev.module_kernel(module).name,
        &dev.download(&src)?,
        &dev.download(&dst)?,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_match_the_points_state_traffic() {
        for p in [
            Point::new(12, 128, 1),
            Point::new(12, 64, 4),
            Point::new(32, 512, 1),
        ] {
            let same = SameBytes::of(&p).unwrap();
            assert_eq!(same.bytes_per_step(), p.state_bytes_per_step(), "{p}");
            assert_eq!(same.read_bytes(), (p.batch * p.heads) as usize * 65536);
            assert_eq!(same.copies(), p.tokens);
            assert_eq!(same.floats() * 4, same.read_bytes());
        }
        // H12 B128 T1: 100.7 MB read, as much written.
        let same = SameBytes::of(&Point::new(12, 128, 1)).unwrap();
        assert_eq!(same.bytes_per_step(), 2 * 12 * 128 * 128 * 128 * 4);
        // Points of the same B·H and T share a copy.
        assert_eq!(same, SameBytes::of(&Point::new(6, 256, 1)).unwrap());
        assert_ne!(same, SameBytes::of(&Point::new(6, 256, 2)).unwrap());
    }

    #[test]
    fn sizes_past_the_limits_are_errors_not_panics() {
        // B·H·64 KiB past 2^32 floats: larger than one copy step reads.
        let e = SameBytes::of(&Point::new(u32::MAX, u32::MAX, 1)).unwrap_err();
        let msg = e.to_string();
        assert!(matches!(e, BenchError::SameCopySize { .. }), "{msg}");
        assert!(msg.contains("H4294967295 B4294967295 T1"), "{msg}");
        // Read fits usize, T copies of it do not.
        let e = SameBytes::of(&Point::new(1 << 16, 1 << 16, u32::MAX)).unwrap_err();
        assert!(e.to_string().contains("written overflow"), "{e}");
        // Fits usize, but more floats than one launch reads.
        let e = SameBytes::of(&Point::new(32, 1 << 19, 1)).unwrap_err();
        assert!(e.to_string().contains("reads at most"), "{e}");
        let e = SameBytes::of(&Point::new(12, 8, 0)).unwrap_err();
        assert!(e.to_string().contains("moves no bytes"), "{e}");
        // The largest default point fits.
        assert!(SameBytes::of(&Point::new(32, 512, 4)).is_ok());
    }

    #[test]
    fn launches_cover_the_bytes_in_whole_tiles() {
        let same = SameBytes::of(&Point::new(12, 8, 4)).unwrap();
        for (block, unroll) in crate::bench::kernels::COPY_VARIANTS {
            let cfg = same.launch(block, unroll).unwrap();
            assert!(cfg.pdl);
            assert_eq!(
                cfg.grid[0] as u64 * copy_tile(block, unroll),
                same.floats() as u64
            );
            assert_eq!(cfg.syms, [same.floats() as i64]);
        }
        assert!(step_launch(256, 4, 4096 + 4).is_err());
        assert!(step_launch(256, 4, 0).is_err());
    }

    #[test]
    fn rotation_is_the_workloads() {
        let plan = Plan {
            rotate_bytes: 4 * (60 << 20),
            min_groups: 2,
            min_steps: 32,
            seed: 1,
        };
        for p in [
            Point::new(12, 1, 1),
            Point::new(12, 128, 1),
            Point::new(12, 8, 4),
        ] {
            let same = SameBytes::of(&p).unwrap();
            assert_eq!(
                same.rotation(&plan),
                crate::bench::workload::rotation(&plan, &p)
            );
        }
    }

    #[test]
    fn copies_compare_bit_for_bit() {
        let src: Vec<u8> = [1.0f32, 2.0].iter().flat_map(|v| v.to_le_bytes()).collect();
        let mut dst = [src.clone(), src.clone()].concat();
        compare_copies("k", &src, &dst).unwrap();
        dst[12..16].copy_from_slice(&(-0.0f32).to_le_bytes());
        let e = compare_copies("k", &src, &dst).unwrap_err();
        assert!(
            matches!(e, BenchError::CopyStepMismatch { copy: 1, index: 1, got, want: 2.0, .. } if got == 0.0),
            "{e}"
        );
        assert!(compare_copies("k", &src, &dst[..12]).is_err());
    }
}
