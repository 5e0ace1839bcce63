//! Traced fragments the kda kernels share, like `cubecl-std` for CubeCL:
//! plain Rust functions over `kda::dsl` values that a `#[cluster_kernel]`
//! calls while it is traced, so each emits the same IR in every kernel that
//! uses it. KdaSplit and the GDN decode kernel resolve their slot tables,
//! run their causal convs and dot their state rows through these.

#![warn(missing_docs)]

use kda::dsl::{Elem, Regs, Tensor, Val, bf16, fma_with, ix, val};

/// `σ(x)`: the approximate sigmoid (`ex2.approx` based) with `fast`, else the
/// IEEE one.
pub fn sigmoid(x: Val<f32>, fast: bool) -> Val<f32> {
    if fast { x.fast_sigmoid() } else { x.sigmoid() }
}

/// The slots of one request (KdaSplit spec §2), read from ready tensors.
pub struct RequestSlots {
    /// The slot whose state is read; `<= 0` marks a padding request.
    pub read: Val<i32>,
    /// The conv-state slot, read and rewritten in place.
    pub conv: Val<i32>,
    /// The conv-tap offset `accepted - 1` (0 for T = 1).
    pub offset: Val<u32>,
    /// Each token's write slot (`<= 0`: a write hole).
    pub writes: Vec<Val<i32>>,
}

/// Slot resolution of `request` (KdaSplit spec §2): `slots` for T = 1, the
/// slot table and `accepted` for T > 1 (the kernel's `#[when]` parameters as
/// passed). Panics while tracing if T > 1 and the table or `accepted` is
/// missing.
pub fn request_slots(
    tokens: u32,
    request: Val<u32>,
    slots: Option<Tensor<i32, 1>>,
    table: Option<Tensor<i32, 2>>,
    accepted: Option<Tensor<i32, 1>>,
) -> RequestSlots {
    match (slots, table, accepted) {
        (Some(slots), _, _) => {
            let slot = slots.load(request);
            RequestSlots {
                read: slot,
                conv: slot,
                offset: val::<u32>(0),
                writes: vec![slot],
            }
        }
        (_, Some(table), Some(accepted)) => {
            let offset = (accepted.load(request) - 1).bitcast::<u32>();
            let writes = (0..tokens)
                .map(|t| table.load([ix(request), ix(t)]))
                .collect();
            RequestSlots {
                read: table.load([request, offset]),
                conv: table.load([ix(request), ix(0u32)]),
                offset,
                writes,
            }
        }
        _ => unreachable!("T > 1 kernels take the slot table and `accepted`"),
    }
}

/// The causal conv of stream `s` for token `tok`, then SiLU (KdaSplit spec
/// §3.1): `acc` (the bias, or 0) plus the four taps oldest first,
/// `taps[[s, 0..3]]` then `inputs[[0.., s]]`, times `coeff[[s, 0..4]]`.
pub fn conv_silu<W: Elem>(
    acc: Val<f32>,
    taps: &Regs<bf16>,
    inputs: &Regs<bf16>,
    coeff: &Regs<W>,
    s: usize,
    tok: usize,
    fast: bool,
) -> Val<f32> {
    let mut a = acc;
    for i in 0..4 {
        let w = tok + i;
        let term = if w < 3 {
            taps[[s, w]]
        } else {
            inputs[[w - 3, s]]
        };
        a = fma_with(term.cast::<f32>(), coeff[[s, i]].cast::<f32>(), a, fast);
    }
    a * sigmoid(a, fast)
}

/// Row `p` of `history` dotted with `x` (`[chunk, 4]`): per chunk a product
/// and three FMAs, then the chunks summed pairwise (the seed's `row_dot`).
pub fn row_dot(history: &Regs<f32>, x: &Regs<f32>, p: usize, ftz: bool) -> Val<f32> {
    let chunks = x.dims()[0];
    let mut partial: Vec<Val<f32>> = (0..chunks)
        .map(|j| {
            let mut acc = history[[p, j, 0]] * x[[j, 0]];
            for e in 1..4 {
                acc = fma_with(history[[p, j, e]], x[[j, e]], acc, ftz);
            }
            acc
        })
        .collect();
    while partial.len() > 1 {
        let half = partial.len() / 2;
        for j in 0..half {
            partial[j] = partial[j] + partial[j + half];
        }
        partial.truncate(half);
    }
    partial[0]
}
