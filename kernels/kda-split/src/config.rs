//! `KdaConfig`: the constructor arguments of the seed's `KdaSplit` and what they
//! derive (spec §6).
//!
//! The checks are the seed's asserts, in the seed's order, followed by the
//! constraints the seed leaves implicit (spec §6 "two constraints are implicit",
//! §8.11). Each failure is a typed [`ConfigError`]; nothing here panics.

use thiserror::Error;

/// Head dimension: key dim, value dim and F_B rank are all 128, hard-wired.
pub const HEAD_DIM: usize = 128;

/// Most tokens per request: the gate stage emits decays for tokens
/// `2 * quarter + column`, at most 8, and the decay barrier expects 512 bytes per
/// token, so a ninth token would never arrive.
pub const MAX_TOKENS: u32 = 8;

/// F_B reduction order. Only the f32 summation order before the bf16 rounding of
/// the raw gate differs between modes (spec §6).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GateMode {
    /// 0: one chain of eight `mma.m16n8k16` over k.
    Mma = 0,
    /// 1: four chains of two MMAs, summed `((c0 + c1) + c2) + c3`.
    MmaChains = 1,
    /// 2: sixteen f32 FMA chains of 8, butterfly-summed; exactly reproducible.
    Fma = 2,
}

impl TryFrom<u32> for GateMode {
    type Error = ConfigError;

    fn try_from(mode: u32) -> Result<Self, ConfigError> {
        match mode {
            0 => Ok(Self::Mma),
            1 => Ok(Self::MmaChains),
            2 => Ok(Self::Fma),
            _ => Err(ConfigError::GateMode { mode }),
        }
    }
}

/// The schedule knobs as the caller gave them. Zeros mean "use the default", and
/// the raw value is kept because the seed asserts on it (an explicit cluster equal
/// to the default is still rejected for gate mode 2); [`KdaConfig::cluster`] and
/// [`KdaConfig::lanes`] resolve the defaults.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Schedule {
    /// Prefetch level 0..=3.
    pub early: u8,
    /// Threads per state row; 0 = default.
    pub lanes: u32,
    /// `min_blocks_per_mp` launch bound; 0 = none.
    pub occupancy: u32,
    /// CTAs per head; 0 = default.
    pub cluster: u32,
    /// L2 evict-first on staged state traffic.
    pub evict: bool,
    /// T > 1 only (issue 15, "T > 1 restructured for bandwidth"): each
    /// token's new state rows go through a shared staging ring of two token
    /// stages and leave as one bulk store per token (`cp.async.bulk` shared
    /// -> global) overlapping the next token's math, instead of register
    /// stores. The kernel's `#[store_through_shared(..)]` hint on `state`
    /// (its tile writer); the tuned table's sixth entry where on, which the
    /// autotuner searches at T > 1.
    pub bulk_store: bool,
    /// The cluster scheduling policy `LoadBalancing` (the kernel's
    /// `cluster_policy = ..`, added by the runtime to each launch):
    /// the block scheduler starts a cluster where its CTAs' slots free up
    /// first. Needs clusters of more than one CTA. The tuned table's seventh
    /// entry where on, which the autotuner searches where the cluster is
    /// above 1 (docs/perf.md: faster at the T > 1 cluster-4 points from
    /// B·H ≥ 256, slower at others).
    pub balance: bool,
}

/// A validated `KdaSplit` configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct KdaConfig {
    /// Heads per launch (grid y).
    pub heads: u32,
    /// Number of requests B; used only for defaults (the real B comes from `x`).
    pub batch: u32,
    pub gate_mode: GateMode,
    pub has_bias: bool,
    /// Tokens per request T, 1..=8.
    pub tokens: u32,
    pub schedule: Schedule,
}

/// Why a configuration is rejected. Seed asserts first, then implicit constraints.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum ConfigError {
    #[error("tokens must be in 1..=8 (one to eight tokens per request); got {tokens}")]
    Tokens { tokens: u32 },
    #[error(
        "schedule needs 3 to 7 entries (early, lanes, occupancy[, cluster[, evict[, bulk_store[, balance]]]]); got {len}"
    )]
    ScheduleLength { len: usize },
    #[error("gate mode must be 0, 1 or 2; got {mode}")]
    GateMode { mode: u32 },
    #[error("early must be in 0..=3; got {early}")]
    Early { early: u32 },
    #[error(
        "gate mode 2 needs early = 0 and the default cluster (schedule value 0); got early = {early}, cluster = {cluster}"
    )]
    Mode2Schedule { early: u8, cluster: u32 },
    #[error(
        "tokens > 1 rules out early >= 2, gate mode 2 and cluster = 16; got tokens = {tokens}, early = {early}, gate mode {gate_mode}, cluster = {cluster}"
    )]
    TokensSchedule {
        tokens: u32,
        early: u8,
        gate_mode: u32,
        cluster: u32,
    },
    #[error(
        "early = 3 needs at least 64 state rows per CTA (cluster 1 or 2); got cluster {cluster}"
    )]
    GateStagedRows { cluster: u32 },
    #[error("evict needs early >= 2 (it marks the staged state traffic)")]
    EvictUnstaged,
    #[error("bulk_store needs tokens > 1 (it bulk-stores each token's state rows)")]
    BulkStoreTokens,
    #[error(
        "balance needs clusters of more than one CTA (cluster 2, 4 or 8; it is the clusters' scheduling policy); got cluster 1"
    )]
    BalanceCluster,
    #[error("heads must be at least 1")]
    NoHeads,
    #[error(
        "heads must be at most {max} (the heads are the launch grid's y dimension); got {heads}"
    )]
    TooManyHeads { heads: u32, max: u32 },
    #[error("batch must be at least 1 (it counts requests)")]
    NoBatch,
    #[error("lanes must be a power of two dividing 32 (1, 2, 4, 8, 16, 32); got {lanes}")]
    Lanes { lanes: u32 },
    #[error(
        "cluster must be 1, 2, 4 or 8 (a power of two leaving at least 16 state rows for the MMA tiles); got {cluster}"
    )]
    Cluster { cluster: u32 },
}

impl KdaConfig {
    /// Mirrors `KdaSplit(heads, batch, gate_mode, has_bias, schedule, tokens)`.
    ///
    /// `schedule_raw` is `(early, lanes, occupancy[, cluster[, evict]])` exactly as
    /// the seed unpacks `(*schedule, 0, 0)[:5]`: fewer than 3 entries cannot
    /// unpack there. The seed silently drops entries past the fifth; that hides a
    /// caller's mistake, so it is an error here, except for a sixth and a
    /// seventh, this port's own [`Schedule::bulk_store`] (nonzero: on; T > 1
    /// only) and [`Schedule::balance`] (nonzero: on; cluster > 1 only).
    pub fn new(
        heads: u32,
        batch: u32,
        gate_mode: u32,
        has_bias: bool,
        schedule_raw: &[u32],
        tokens: u32,
    ) -> Result<Self, ConfigError> {
        if !(1..=MAX_TOKENS).contains(&tokens) {
            return Err(ConfigError::Tokens { tokens });
        }
        if !(3..=7).contains(&schedule_raw.len()) {
            return Err(ConfigError::ScheduleLength {
                len: schedule_raw.len(),
            });
        }
        let raw = |i: usize| schedule_raw.get(i).copied().unwrap_or(0);
        let early = match u8::try_from(raw(0)) {
            Ok(early @ 0..=3) => early,
            _ => return Err(ConfigError::Early { early: raw(0) }),
        };
        let gate_mode_raw = gate_mode;
        let gate_mode = GateMode::try_from(gate_mode)?;
        let schedule = Schedule {
            early,
            lanes: raw(1),
            occupancy: raw(2),
            cluster: raw(3),
            // The seed keeps `bool(evict)`: any nonzero value turns it on.
            evict: raw(4) != 0,
            bulk_store: raw(5) != 0,
            balance: raw(6) != 0,
        };
        let config = Self {
            heads,
            batch,
            gate_mode,
            has_bias,
            tokens,
            schedule,
        };

        // Seed asserts, in order.
        if gate_mode == GateMode::Fma && (early != 0 || schedule.cluster != 0) {
            return Err(ConfigError::Mode2Schedule {
                early,
                cluster: schedule.cluster,
            });
        }
        if tokens != 1 && (config.staged() || gate_mode == GateMode::Fma || schedule.cluster == 16)
        {
            return Err(ConfigError::TokensSchedule {
                tokens,
                early,
                gate_mode: gate_mode_raw,
                cluster: schedule.cluster,
            });
        }
        // Implicit: the derived values below divide by these.
        if heads == 0 {
            return Err(ConfigError::NoHeads);
        }
        // Beyond the grid no launch is possible, and the kernel's extents
        // (3 x heads x 128) would overflow its u32 counts (issue 32 item 3).
        let max = kda_runtime::launch::MAX_GRID[1];
        if heads > max {
            return Err(ConfigError::TooManyHeads { heads, max });
        }
        if batch == 0 {
            return Err(ConfigError::NoBatch);
        }
        let lanes = config.lanes();
        if !lanes.is_power_of_two() || 32 % lanes != 0 {
            return Err(ConfigError::Lanes { lanes });
        }
        // Modes 0/1 need `rows / 16 >= 1` MMA tiles; mode 2 only ever sees the
        // defaults 4 and 8, so the same set covers every mode.
        let cluster = config.cluster();
        if !matches!(cluster, 1 | 2 | 4 | 8) {
            return Err(ConfigError::Cluster { cluster });
        }
        if config.gate_staged() && config.rows() < 64 {
            return Err(ConfigError::GateStagedRows { cluster });
        }
        if !config.staged() && schedule.evict {
            return Err(ConfigError::EvictUnstaged);
        }
        if schedule.bulk_store && tokens == 1 {
            return Err(ConfigError::BulkStoreTokens);
        }
        if schedule.balance && cluster == 1 {
            return Err(ConfigError::BalanceCluster);
        }
        Ok(config)
    }

    /// Model dimension of this launch, `heads * 128`.
    pub fn dim(&self) -> usize {
        self.heads as usize * HEAD_DIM
    }

    /// CTAs per head C: 8 for a single request (more parallelism at batch 1),
    /// else 4.
    pub fn cluster(&self) -> u32 {
        match self.schedule.cluster {
            0 if self.batch == 1 => 8,
            0 => 4,
            cluster => cluster,
        }
    }

    /// Threads per state row.
    pub fn lanes(&self) -> u32 {
        let small = if self.heads == 6 { 4 } else { 2 };
        match self.schedule.lanes {
            0 if self.batch <= small => 8,
            0 => 16,
            lanes => lanes,
        }
    }

    /// Value rows per CTA, `128 / C`.
    pub fn rows(&self) -> u32 {
        HEAD_DIM as u32 / self.cluster()
    }

    /// State rows processed at once by the CTA's 128 threads, `128 / lanes`.
    pub fn groups(&self) -> u32 {
        HEAD_DIM as u32 / self.lanes()
    }

    /// Passes over the CTA's rows, `ceil(rows / groups)`.
    pub fn passes(&self) -> u32 {
        self.rows().div_ceil(self.groups())
    }

    /// Passes updated per wave (the kernel's `wave` schedule hint): at most 4
    /// when the state is staged in shared memory (frees the registers that
    /// held the rows), else all of them.
    pub fn wave(&self) -> u32 {
        if self.staged() {
            self.passes().min(4)
        } else {
            self.passes()
        }
    }

    /// float4 chunks per thread and row, `32 / lanes`.
    pub fn chunks(&self) -> u32 {
        32 / self.lanes()
    }

    /// Approximate sigmoid and FTZ FMAs; on for TP8 (12 heads) only.
    pub fn fast_math(&self) -> bool {
        self.heads == 12
    }

    /// PDL `launch_dependents` at kernel entry; on for batch 1.
    pub fn trigger_at_entry(&self) -> bool {
        self.batch == 1
    }

    /// Loads independent of the predecessor are issued before the PDL wait.
    pub fn early(&self) -> bool {
        self.schedule.early >= 1
    }

    /// State rows are bulk-copied to shared memory (early >= 2).
    pub fn staged(&self) -> bool {
        self.schedule.early >= 2
    }

    /// The gate warp stages its F_B rows through cp.async (early == 3).
    pub fn gate_staged(&self) -> bool {
        self.schedule.early == 3
    }

    /// Each token's new state rows leave through shared memory as one bulk
    /// store ([`Schedule::bulk_store`]; T > 1).
    pub fn bulk_store(&self) -> bool {
        self.schedule.bulk_store
    }

    /// The clusters' scheduling policy ([`Schedule::balance`]).
    pub fn cluster_policy(&self) -> kda::ir::ClusterPolicy {
        kda::ir::ClusterPolicy::load_balancing_if(self.schedule.balance, self.cluster())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn new(heads: u32, batch: u32, mode: u32, schedule: &[u32], tokens: u32) -> KdaConfig {
        KdaConfig::new(heads, batch, mode, false, schedule, tokens).unwrap()
    }

    fn err(heads: u32, batch: u32, mode: u32, schedule: &[u32], tokens: u32) -> ConfigError {
        KdaConfig::new(heads, batch, mode, false, schedule, tokens).unwrap_err()
    }

    #[test]
    fn cluster_default_is_8_at_batch_1_else_4() {
        assert_eq!(new(8, 1, 0, &[0, 0, 0], 1).cluster(), 8);
        assert_eq!(new(8, 2, 0, &[0, 0, 0], 1).cluster(), 4);
        assert_eq!(new(8, 64, 0, &[0, 0, 0], 1).cluster(), 4);
        assert_eq!(new(8, 64, 0, &[0, 0, 0, 2], 1).cluster(), 2);
    }

    #[test]
    fn lanes_default_depends_on_batch_and_six_heads() {
        assert_eq!(new(8, 2, 0, &[0, 0, 0], 1).lanes(), 8);
        assert_eq!(new(8, 3, 0, &[0, 0, 0], 1).lanes(), 16);
        assert_eq!(new(6, 4, 0, &[0, 0, 0], 1).lanes(), 8);
        assert_eq!(new(6, 5, 0, &[0, 0, 0], 1).lanes(), 16);
        assert_eq!(new(8, 64, 0, &[0, 4, 0], 1).lanes(), 4);
    }

    #[test]
    fn derived_values_follow_the_seed() {
        // batch 3: C = 4, lanes = 16 -> rows 32, groups 8, passes 4, chunks 2.
        let c = new(8, 3, 0, &[0, 0, 0], 1);
        assert_eq!(
            (c.rows(), c.groups(), c.passes(), c.wave(), c.chunks()),
            (32, 8, 4, 4, 2)
        );
        // C = 1, lanes = 8, early 3: rows 128, groups 16, passes 8, wave 4.
        let c = new(8, 3, 0, &[3, 8, 0, 1], 1);
        assert_eq!((c.rows(), c.passes(), c.wave(), c.chunks()), (128, 8, 4, 4));
        assert!(c.early() && c.staged() && c.gate_staged());
        // Unstaged: wave = passes.
        assert_eq!(new(8, 3, 0, &[1, 8, 0, 1], 1).wave(), 8);
        // passes rounds up: rows 16, groups 32 (lanes 4).
        assert_eq!(new(8, 3, 0, &[0, 4, 0, 8], 1).passes(), 1);
    }

    #[test]
    fn flags_follow_heads_batch_and_early() {
        let c = new(12, 1, 0, &[0, 0, 0], 1);
        assert!(c.fast_math() && c.trigger_at_entry());
        assert!(!c.early() && !c.staged() && !c.gate_staged());
        let c = new(16, 2, 0, &[2, 0, 0, 0, 1], 1);
        assert!(!c.fast_math() && !c.trigger_at_entry());
        assert!(c.early() && c.staged() && !c.gate_staged() && c.schedule.evict);
        assert_eq!(c.schedule.occupancy, 0);
        assert_eq!(new(8, 2, 0, &[0, 0, 2], 1).schedule.occupancy, 2);
    }

    #[test]
    fn tokens_outside_1_to_8_are_rejected_first() {
        assert_eq!(
            err(8, 1, 0, &[0, 0, 0], 0),
            ConfigError::Tokens { tokens: 0 }
        );
        assert_eq!(
            err(8, 1, 0, &[0, 0, 0], 9),
            ConfigError::Tokens { tokens: 9 }
        );
        // Checked before anything else, like the seed's ValueError.
        assert_eq!(err(8, 1, 7, &[9], 9), ConfigError::Tokens { tokens: 9 });
        new(8, 1, 0, &[0, 0, 0], 8);
    }

    #[test]
    fn schedule_needs_3_to_7_entries() {
        assert_eq!(
            err(8, 1, 0, &[0, 0], 1),
            ConfigError::ScheduleLength { len: 2 }
        );
        assert_eq!(
            err(8, 1, 0, &[0; 8], 1),
            ConfigError::ScheduleLength { len: 8 }
        );
        new(8, 1, 0, &[0, 0, 0, 0, 0], 1);
        new(8, 1, 0, &[0, 0, 0, 0, 0, 0], 1);
        new(8, 1, 0, &[0; 7], 1);
    }

    #[test]
    fn balance_is_a_seventh_entry_for_clusters() {
        let off = new(8, 64, 0, &[1, 16, 0, 4, 0, 0, 0], 1);
        assert_eq!(off.cluster_policy(), kda::ir::ClusterPolicy::Default);
        let on = new(8, 64, 0, &[1, 16, 0, 4, 0, 0, 1], 1);
        assert!(on.schedule.balance);
        assert_eq!(on.cluster_policy(), kda::ir::ClusterPolicy::LoadBalancing);
        // With bulk_store at T > 1, and with the default cluster (4 at batch 64).
        assert!(new(8, 64, 0, &[0, 16, 0, 4, 0, 1, 1], 4).schedule.balance);
        assert!(new(8, 64, 0, &[0, 0, 0, 0, 0, 0, 1], 1).schedule.balance);
        // Not at cluster 1: there are no clusters to place.
        assert_eq!(
            err(8, 64, 0, &[3, 32, 0, 1, 0, 0, 1], 1),
            ConfigError::BalanceCluster
        );
        assert!(
            ConfigError::BalanceCluster
                .to_string()
                .contains("balance needs clusters of more than one CTA")
        );
    }

    #[test]
    fn bulk_store_is_a_sixth_entry_for_several_tokens() {
        assert!(!new(8, 4, 0, &[0, 16, 0, 4, 0], 4).bulk_store());
        assert!(!new(8, 4, 0, &[0, 16, 0, 4, 0, 0], 4).bulk_store());
        let c = new(8, 4, 0, &[0, 16, 0, 4, 0, 1], 4);
        assert!(c.bulk_store() && c.schedule.bulk_store);
        assert_eq!(
            err(8, 4, 0, &[0, 16, 0, 4, 0, 1], 1),
            ConfigError::BulkStoreTokens
        );
    }

    #[test]
    fn gate_mode_and_early_ranges() {
        assert_eq!(
            err(8, 1, 3, &[0, 0, 0], 1),
            ConfigError::GateMode { mode: 3 }
        );
        assert_eq!(err(8, 1, 0, &[4, 0, 0], 1), ConfigError::Early { early: 4 });
        assert_eq!(GateMode::try_from(1), Ok(GateMode::MmaChains));
    }

    #[test]
    fn mode_2_needs_early_0_and_raw_default_cluster() {
        assert!(matches!(
            err(8, 1, 2, &[1, 0, 0], 1),
            ConfigError::Mode2Schedule { early: 1, .. }
        ));
        // Explicit cluster equal to the default (8 at batch 1) is still rejected.
        assert!(matches!(
            err(8, 1, 2, &[0, 0, 0, 8], 1),
            ConfigError::Mode2Schedule { cluster: 8, .. }
        ));
        let c = new(8, 1, 2, &[0, 16, 3], 1);
        assert_eq!(
            (c.gate_mode, c.cluster(), c.lanes()),
            (GateMode::Fma, 8, 16)
        );
    }

    #[test]
    fn multi_token_rules_out_staging_mode_2_and_cluster_16() {
        for (mode, schedule) in [(0, [2, 0, 0, 0]), (2, [0, 0, 0, 0]), (1, [0, 0, 0, 16])] {
            assert!(matches!(
                err(8, 4, mode, &schedule, 2),
                ConfigError::TokensSchedule { tokens: 2, .. }
            ));
        }
        new(8, 4, 1, &[1, 0, 0, 2], 2);
    }

    #[test]
    fn early_3_needs_64_rows() {
        assert_eq!(
            err(8, 2, 0, &[3, 0, 0], 1),
            ConfigError::GateStagedRows { cluster: 4 }
        );
        new(8, 2, 0, &[3, 0, 0, 2], 1);
    }

    #[test]
    fn evict_needs_staging() {
        assert_eq!(
            err(8, 2, 0, &[1, 0, 0, 0, 1], 1),
            ConfigError::EvictUnstaged
        );
        assert!(new(8, 2, 0, &[2, 0, 0, 0, 1], 1).schedule.evict);
    }

    #[test]
    fn heads_and_batch_must_be_positive() {
        assert_eq!(err(0, 1, 0, &[0, 0, 0], 1), ConfigError::NoHeads);
        assert_eq!(err(8, 0, 0, &[0, 0, 0], 1), ConfigError::NoBatch);
    }

    #[test]
    fn lanes_must_be_a_power_of_two_dividing_32() {
        for lanes in [3, 6, 64] {
            assert_eq!(
                err(8, 2, 0, &[0, lanes, 0], 1),
                ConfigError::Lanes { lanes }
            );
        }
        for lanes in [1, 2, 4, 8, 16, 32] {
            assert_eq!(new(8, 2, 0, &[0, lanes, 0], 1).lanes(), lanes);
        }
    }

    #[test]
    fn cluster_must_be_1_2_4_or_8() {
        // 16 passes the seed's asserts at T = 1 but leaves zero MMA tiles.
        for cluster in [3, 16, 32] {
            assert_eq!(
                err(8, 2, 0, &[0, 0, 0, cluster], 1),
                ConfigError::Cluster { cluster }
            );
        }
        for cluster in [1, 2, 4, 8] {
            assert_eq!(new(8, 2, 1, &[0, 0, 0, cluster], 1).cluster(), cluster);
        }
    }

    #[test]
    fn messages_are_lowercase_and_say_what_is_allowed() {
        let text = err(8, 2, 0, &[0, 0, 0, 16], 1).to_string();
        assert_eq!(
            text,
            "cluster must be 1, 2, 4 or 8 (a power of two leaving at least 16 state rows for the MMA tiles); got 16"
        );
    }
}
