"""One launch of each decode kernel, kda's and fla's, on the same shapes, for
Nsight Compute (issue 33: where kda's state stream loses to fla's).

Each measured launch sits inside the NVTX range `ncu`; everything else (input
generation, Triton compilation, warm-up) is outside it, so

    ncu --nvtx --nvtx-include "ncu/" --section SpeedOfLight ... \
        python bench/ncu_decode.py --batch 128,512

profiles exactly one launch per (kernel, batch). Without ncu it prints each
launch's time (CUDA events, median of 20) so the run is also a quick
same-process timing. fla's rows are skipped, with the reason, where fla is
not installed.

Kernels: KdaSplit H12 T1 (in place through slots) against fla's
`fused_recurrent_kda_fwd` as vLLM calls it (same pool, in place) and fla's
`fused_recurrent_kda` on a contiguous batch; GdnDecode HK4 HV8 against fla's
`fused_recurrent_gated_delta_rule` on a contiguous batch.
"""

import argparse
import statistics

import torch

import kda
from kda import _kda

TORCH = {"BF16": torch.bfloat16, "F32": torch.float32, "I32": torch.int32}


def to_torch(spec):
    flat = torch.frombuffer(bytearray(spec["storage"]), dtype=TORCH[spec["dtype"]]).cuda()
    return torch.as_strided(flat, spec["shape"], spec["strides"])


def kda_launch(k, batch, heads_v, conv_width=None):
    """A kda kernel's launch on a fresh state pool of batch + 1 slots, slot
    b + 1 for request b (slot 0 is the null block)."""
    items, _ = _kda._case(k, batch, seed=1, padding=0.0, holes=0.0, run=False)
    args = [to_torch(v) if kind == "tensor" else v for _, kind, v in items]
    at = list(k.params).index
    state = args[at("state")]
    args[at("state")] = torch.randn(batch + 1, *state.shape[1:], device="cuda") * 0.1
    conv = args[at("conv_state")]
    args[at("conv_state")] = torch.zeros(batch + 1, *conv.shape[1:], dtype=conv.dtype, device="cuda")
    args[at("slots")] = torch.arange(1, batch + 1, dtype=torch.int32, device="cuda")
    return lambda: k(*args, check_slots=False)


def fla_kda_launches(batch, heads):
    from fla.ops.kda import fused_recurrent_kda
    from fla.ops.kda.fused_recurrent import fused_recurrent_kda_fwd

    n = batch
    q = torch.randn(1, n, heads, 128, device="cuda").bfloat16()
    k = torch.nn.functional.normalize(torch.randn(1, n, heads, 128, device="cuda"), dim=-1).bfloat16()
    v = torch.randn(1, n, heads, 128, device="cuda").bfloat16()
    g = -torch.rand(1, n, heads, 128, device="cuda")
    beta = torch.rand(1, n, heads, device="cuda")
    cu = torch.arange(0, n + 1, dtype=torch.long, device="cuda")
    pool = torch.randn(batch + 1, heads, 128, 128, device="cuda") * 0.1
    slots = torch.arange(1, batch + 1, dtype=torch.int32, device="cuda")

    def vllm():
        fused_recurrent_kda_fwd(
            q, k, v, g, beta, initial_state=pool, scale=128**-0.5, inplace_final_state=True,
            state_v_first=True, cu_seqlens=cu, ssm_state_indices=slots, num_accepted_tokens=None,
            use_qk_l2norm_in_kernel=True,
        )

    qc, kc, vc = (x.view(batch, 1, heads, 128).float() for x in (q, k, v))
    gc, bc = g.view(batch, 1, heads, 128), beta.view(batch, 1, heads)
    h0 = torch.randn(batch, heads, 128, 128, device="cuda") * 0.1

    def contiguous():
        fused_recurrent_kda(qc, kc, vc, gc, bc, scale=128**-0.5, initial_state=h0,
                            output_final_state=True, use_qk_l2norm_in_kernel=True)

    return {"fla_kda_vllm": vllm, "fla_kda_contig": contiguous}


def fla_gdn_launches(batch, hk, hv):
    from fla.ops.gated_delta_rule import fused_recurrent_gated_delta_rule

    q = torch.randn(batch, 1, hk, 128, device="cuda").bfloat16()
    k = torch.nn.functional.normalize(torch.randn(batch, 1, hk, 128, device="cuda"), dim=-1).bfloat16()
    v = torch.randn(batch, 1, hv, 128, device="cuda").bfloat16()
    g = -torch.rand(batch, 1, hv, device="cuda")
    beta = torch.rand(batch, 1, hv, device="cuda").bfloat16()
    h0 = torch.randn(batch, hv, 128, 128, device="cuda") * 0.1

    def contiguous():
        # By keyword: fla's fifth positional parameter is `gk`, not `beta`.
        fused_recurrent_gated_delta_rule(q, k, v, g=g, beta=beta, scale=128**-0.5, initial_state=h0,
                                         output_final_state=True, use_qk_l2norm_in_kernel=True,
                                         state_v_first=True)

    return {"fla_gdn_contig": contiguous}


def time_us(fn, reps=20):
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1000.0)
    return statistics.median(times)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batch", default="128,512")
    p.add_argument("--heads", type=int, default=12, help="KdaSplit heads")
    a = p.parse_args()
    for batch in map(int, a.batch.split(",")):
        launches = {
            "kda_split": kda_launch(kda.KdaSplit(a.heads), batch, a.heads),
            "kda_gdn": kda_launch(kda.GdnDecode(4, 8), batch, 8),
        }
        for name, make in (("fla_kda", lambda: fla_kda_launches(batch, a.heads)),
                           ("fla_gdn", lambda: fla_gdn_launches(batch, 4, 8))):
            try:
                launches.update(make())
            except Exception as e:  # fla absent, or its API differs
                print(f"B{batch} {name}: skipped ({type(e).__name__}: {e})")
        for name, fn in launches.items():  # compile and warm up outside the range
            print(f"B{batch} {name}: warm-up", flush=True)
            fn()
            torch.cuda.synchronize()
        for name, fn in launches.items():
            torch.cuda.nvtx.range_push("ncu")
            fn()
            torch.cuda.nvtx.range_pop()
            torch.cuda.synchronize()
            print(f"B{batch} {name:<16} {time_us(fn):9.2f} us (events, median of 20, state in L2 where it fits)")


if __name__ == "__main__":
    main()
