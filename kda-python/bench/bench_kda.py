"""Time kda.KdaSplit against fla's fused recurrent KDA kernel, and against
fla's whole unfused decode step (short conv, gate, fla's recurrence, gated
RMSNorm, cache writes in torch; tests/unfused.py), on the same tensors in
one process. Every figure is one step's GPU time inside a torch CUDA graph
of `steps` chained steps, replayed and CUDA-event timed (median), with the
state rotating over >= 4x L2 so no step finds its state in L2.

    python bench/bench_kda.py [--heads 32] [--batch 1,8,64] [--tokens 1]
"""

import argparse
import math
import os
import statistics
import sys

import torch

import kda
from kda import _kda

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))

TORCH = {"BF16": torch.bfloat16, "F32": torch.float32, "I32": torch.int32}


def to_torch(spec):
    flat = torch.frombuffer(bytearray(spec["storage"]), dtype=TORCH[spec["dtype"]]).cuda()
    return torch.as_strided(flat, spec["shape"], spec["strides"])


def graph_time(steps_fn, steps, replays):
    """Median µs per step of a graph of `steps_fn()` (which issues `steps` steps)."""
    steps_fn()  # warm-up (compiles, allocates) outside the capture
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        steps_fn()
    for _ in range(3):
        g.replay()
    times = []
    for _ in range(replays):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1000.0 / steps)
    return statistics.median(times)


def bench(heads, batch, tokens, replays, l2):
    k = kda.KdaSplit(heads, tokens=tokens)
    page = heads * 128 * 128 * 4
    slots_needed = max(batch * tokens, math.ceil(4 * l2 / page))
    num_slots = slots_needed + 1  # slot 0 is the null block
    # One generated case fixes every tensor but the slot tables; the caches
    # are re-allocated with num_slots pages.
    items, _ = _kda._case(k, batch, seed=1, padding=0.0, holes=0.0, run=False)
    args = [to_torch(v) if kind == "tensor" else v for _, kind, v in items]
    names = list(k.params)
    at = names.index
    state = torch.randn(num_slots, heads, 128, 128, device="cuda") * 0.1
    conv = args[at("conv_state")]
    conv = torch.zeros(num_slots, conv.shape[1], conv.shape[2], dtype=conv.dtype, device="cuda")
    args[at("state")], args[at("conv_state")] = state, conv
    steps = max(8, math.ceil(slots_needed / (batch * tokens)))
    tables = []
    for i in range(steps):
        ids = [1 + (i * batch * tokens + j) % slots_needed for j in range(batch * tokens)]
        t = torch.tensor(ids, dtype=torch.int32, device="cuda")
        tables.append(t if tokens == 1 else t.view(batch, tokens))
    step_args = []
    for t in tables:
        a = list(args)
        a[at("slots")] = t
        step_args.append(a)

    def ours():
        for a in step_args:
            k(*a, check_slots=False)

    row = {"kda": graph_time(ours, steps, replays)}
    try:
        from fla.ops.kda import fused_recurrent_kda
        from fla.ops.kda.fused_recurrent import fused_recurrent_kda_fwd
    except ImportError as e:
        row["why_no_fla"] = str(e)
        return row, k
    b, n = batch, batch * tokens
    # fla's kernel on the same state pool and slot tables, as vLLM calls it:
    # the batch flattened with cu_seqlens, states gathered and written in
    # place through ssm_state_indices (per token for T > 1, reading the
    # state of token accepted - 1), state_v_first (KdaSplit's [slot, H, V, K]).
    q = torch.randn(1, n, heads, 128, device="cuda").bfloat16()
    kk = torch.nn.functional.normalize(torch.randn(1, n, heads, 128, device="cuda"), dim=-1).bfloat16()
    v = torch.randn(1, n, heads, 128, device="cuda").bfloat16()
    g = -torch.rand(1, n, heads, 128, device="cuda")
    beta = torch.rand(1, n, heads, device="cuda")
    cu = torch.arange(0, n + 1, tokens, dtype=torch.long, device="cuda")
    accepted = args[at("accepted")] if tokens > 1 else None
    state = args[at("state")]

    def fla_kernel():
        for t in tables:
            fused_recurrent_kda_fwd(
                q, kk, v, g, beta, initial_state=state, scale=128**-0.5,
                inplace_final_state=True, state_v_first=True, cu_seqlens=cu,
                ssm_state_indices=t, num_accepted_tokens=accepted, use_qk_l2norm_in_kernel=True,
            )

    row["fla_kernel"] = graph_time(fla_kernel, steps, replays)
    if tokens == 1:
        from unfused import unfused_step

        # fla's public entry point on contiguous batches (gathered states
        # passed in, a fresh final state out): no index indirection.
        qc, kc, vc = (x.view(b, 1, heads, 128).float() for x in (q, kk, v))
        gc, bc = g.view(b, 1, heads, 128), beta.view(b, 1, heads)
        pool = torch.randn(steps * b, heads, 128, 128, device="cuda") * 0.1

        def fla_contiguous():
            for i in range(steps):
                fused_recurrent_kda(
                    qc, kc, vc, gc, bc, scale=128**-0.5, initial_state=pool[i * b:(i + 1) * b],
                    output_final_state=True, use_qk_l2norm_in_kernel=True,
                )

        def fla_step():
            for a in step_args:
                unfused_step(a, heads, fused_recurrent_kda)

        row["fla_contiguous"] = graph_time(fla_contiguous, steps, replays)
        row["fla_step"] = graph_time(fla_step, steps, replays)
    return row, k


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--heads", default="32")
    p.add_argument("--batch", default="1,8,64")
    p.add_argument("--tokens", default="1")
    p.add_argument("--replays", type=int, default=20)
    a = p.parse_args()
    props = torch.cuda.get_device_properties(0)
    l2 = props.L2_cache_size
    print(f"device: {props.name}, L2 {l2 / 2**20:.0f} MiB; state rotates over >= 4x L2")
    print("fla kern: fla's kernel as vLLM calls it (same state pool and slot tables, in place);")
    print("fla contig: its public entry on contiguous batches; fla step: the whole unfused step")
    print(f"{'config':<18} {'kda us':>8} {'fla kern us':>11} {'fla contig':>10} {'fla step us':>11} {'kern/kda':>8} {'step/kda':>8}  schedule")
    for h in map(int, a.heads.split(",")):
        for t in map(int, a.tokens.split(",")):
            for b in map(int, a.batch.split(",")):
                row, k = bench(h, b, t, a.replays, l2)
                fk, fc, fs = row.get("fla_kernel"), row.get("fla_contiguous"), row.get("fla_step")
                fmt = lambda x: f"{x:.2f}" if x is not None else "-"
                ratio = lambda x: f"{x / row['kda']:.2f}x" if x is not None else "-"
                info = k.info()
                print(f"H{h} B{b} T{t}".ljust(18), f"{row['kda']:>8.2f} {fmt(fk):>11} {fmt(fc):>10} {fmt(fs):>11} {ratio(fk):>8} {ratio(fs):>8}  "
                      f"{info.get('schedule', '')} regs={info.get('registers', '?')}")
                if "why_no_fla" in row:
                    print(f"   (fla not timed: {row['why_no_fla']})")


if __name__ == "__main__":
    main()
