//! Instruction grouping the scheduler decides: [`chains`] issues a program's
//! independent per-row chains in the waves the kernel's `wave = ..` hint
//! asks for ([`kda_ir::ScheduleHints::wave`]).

use super::trace::emit;

/// Issue `n` independent chains of `phases` steps each: `step(i, phase)`
/// emits phase `phase` of chain `i`. The chains go in waves of the kernel's
/// `wave = ..` hint (all `n` at once without one): for each wave, phase 0 of
/// its chains in order, then phase 1, and so on, so that the instructions of
/// one phase of several chains are independent and can overlap, while at most
/// a wave's chains have values live between phases.
///
/// The kernel states the chain once; how many run side by side is the
/// schedule's choice, visible in the IR header (`wave=N`). Values one phase
/// hands the next are kept per chain, e.g. in a `regs!([f32; n])` indexed by
/// `i`. Each chain's phases run in order, so a step may read what the same
/// chain's earlier phases wrote; it must not depend on other chains' later
/// phases.
pub fn chains(n: usize, phases: usize, mut step: impl FnMut(usize, usize)) {
    let wave = emit(|b| b.kernel().schedule.wave).map_or(n, |w| w as usize);
    for start in (0..n).step_by(wave.max(1)) {
        let rows = start..(start + wave).min(n);
        for phase in 0..phases {
            for i in rows.clone() {
                step(i, phase);
            }
        }
    }
}
