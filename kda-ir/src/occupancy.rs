//! How many CTAs of a kernel one Hopper SM (sm_90) holds at once, from
//! ptxas's register count and the CTA's shared memory: the occupancy
//! calculator's arithmetic, without a GPU, so `info`-style reports can show
//! what limits residency next to the registers and shared memory they
//! already print.
//!
//! The limits are the H100 / H200 ones (CUDA programming guide, "compute
//! capability 9.0"): 65,536 registers per SM in four partitions of 16,384,
//! allocated per warp in units of 256; 228 KB of shared memory per SM with
//! 1 KB reserved per CTA; 64 warps, 32 CTAs. The shared-memory limit
//! assumes the whole 228 KB carveout (the driver picks a carveout that
//! fits the kernel's need; a smaller one only lowers the figure). A
//! cluster kernel may get fewer: its CTAs must fit one GPC together
//! (`cuOccupancyMaxActiveClusters` on a device says how many clusters).

/// Registers per SM.
pub const REGISTERS_PER_SM: u32 = 65_536;
/// Register-file partitions (one per warp scheduler).
pub const PARTITIONS: u32 = 4;
/// Registers are allocated per warp in units of this many.
pub const REGISTER_UNIT: u32 = 256;
/// Shared memory per SM, bytes (228 KB).
pub const SHARED_PER_SM: u32 = 228 * 1024;
/// Shared memory the system reserves per CTA, bytes.
pub const SHARED_RESERVED_PER_CTA: u32 = 1024;
/// Shared memory is allocated in units of this many bytes.
pub const SHARED_UNIT: u32 = 128;
/// Resident warps per SM.
pub const WARPS_PER_SM: u32 = 64;
/// Resident CTAs per SM.
pub const CTAS_PER_SM: u32 = 32;

/// What bounds the CTAs per SM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limiter {
    /// The register file.
    Registers,
    /// Shared memory.
    Shared,
    /// Resident warps.
    Warps,
    /// Resident CTAs.
    Ctas,
}

impl Limiter {
    /// A short name for tables.
    pub fn name(self) -> &'static str {
        match self {
            Limiter::Registers => "regs",
            Limiter::Shared => "smem",
            Limiter::Warps => "warps",
            Limiter::Ctas => "ctas",
        }
    }
}

/// CTAs per SM and what bounds them (the first of equal bounds in the
/// order registers, shared memory, warps, CTAs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Occupancy {
    /// CTAs one SM holds at once (0: the CTA does not fit at all).
    pub ctas: u32,
    /// What bounds `ctas`.
    pub limiter: Limiter,
}

/// The CTAs per SM of a kernel with `threads` threads per CTA,
/// `registers` per thread (ptxas's figure) and `shared_bytes` of shared
/// memory per CTA (static plus dynamic). A CTA that cannot be resident
/// (0 threads, or more registers, shared memory or warps than an SM has)
/// gives 0 CTAs, limited by the resource it exceeds.
pub fn ctas_per_sm(threads: u32, registers: u32, shared_bytes: u32) -> Occupancy {
    let warps = threads.div_ceil(32);
    if warps == 0 {
        return Occupancy {
            ctas: 0,
            limiter: Limiter::Warps,
        };
    }
    let per_warp = registers
        .saturating_mul(32)
        .div_ceil(REGISTER_UNIT)
        .saturating_mul(REGISTER_UNIT);
    // Warps per partition by registers, times the partitions; a CTA's
    // warps spread over the partitions.
    let by_registers = match per_warp {
        0 => u32::MAX,
        w => (REGISTERS_PER_SM / PARTITIONS / w) * PARTITIONS / warps,
    };
    let shared = shared_bytes
        .saturating_add(SHARED_RESERVED_PER_CTA)
        .div_ceil(SHARED_UNIT)
        .saturating_mul(SHARED_UNIT);
    let by_shared = SHARED_PER_SM / shared;
    let by_warps = WARPS_PER_SM / warps;
    let bounds = [
        (by_registers, Limiter::Registers),
        (by_shared, Limiter::Shared),
        (by_warps, Limiter::Warps),
        (CTAS_PER_SM, Limiter::Ctas),
    ];
    let (ctas, limiter) = bounds
        .into_iter()
        .fold((u32::MAX, Limiter::Ctas), |best, b| {
            if b.0 < best.0 { b } else { best }
        });
    Occupancy { ctas, limiter }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The figures Nsight Compute reported on the H200 for KdaSplit's
    /// defaults (docs/perf.md, "KdaSplit's tuned defaults under Nsight
    /// Compute"), and what the bench's occupancy bounds reached.
    #[test]
    fn matches_what_the_h200_reported() {
        // H12 B128 T1: 160 threads, 96 registers, 51.5 KB: 4, registers
        // first (ncu: "registers and shared memory").
        let o = ctas_per_sm(160, 96, 51_520);
        assert_eq!((o.ctas, o.limiter), (4, Limiter::Registers));
        // At 72 registers shared memory is what holds it at 4.
        let o = ctas_per_sm(160, 72, 51_520);
        assert_eq!((o.ctas, o.limiter), (4, Limiter::Shared));
        // H12 B64 T4: 128 registers, 7.3 KB: 3, registers.
        assert_eq!(
            ctas_per_sm(160, 128, 7_300),
            Occupancy {
                ctas: 3,
                limiter: Limiter::Registers
            }
        );
        // `.minnctapersm 6` gave 64 registers, `7` 56, `5` 72.
        assert_eq!(ctas_per_sm(160, 64, 26_816).ctas, 6);
        assert_eq!(ctas_per_sm(160, 56, 14_464).ctas, 7);
        assert_eq!(ctas_per_sm(160, 72, 26_816).ctas, 5);
        // C 1 at early 3: 100.9 KB of shared memory, 2.
        let o = ctas_per_sm(160, 128, 100_928);
        assert_eq!((o.ctas, o.limiter), (2, Limiter::Shared));
    }

    #[test]
    fn warps_ctas_and_what_cannot_fit() {
        // 32 threads and few registers: 32 CTAs, the CTA limit.
        assert_eq!(ctas_per_sm(32, 16, 0).limiter, Limiter::Ctas);
        // 1024 threads: 2 by warps.
        let o = ctas_per_sm(1024, 16, 0);
        assert_eq!((o.ctas, o.limiter), (2, Limiter::Warps));
        // Too much shared memory or no threads: nothing resident.
        assert_eq!(ctas_per_sm(128, 32, 300_000).ctas, 0);
        assert_eq!(ctas_per_sm(0, 32, 0).ctas, 0);
        // 255 registers x 1024 threads exceeds the register file.
        assert_eq!(ctas_per_sm(1024, 255, 0).ctas, 0);
        // Huge inputs saturate rather than overflow.
        assert_eq!(ctas_per_sm(u32::MAX, u32::MAX, u32::MAX).ctas, 0);
    }
}
