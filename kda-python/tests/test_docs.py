"""The examples of docs/python.md, run as written: the NumPy example on the
simulator always; the vLLM-style decode loop and its CUDA graph capture on
torch CUDA tensors when torch and an sm_90 GPU are there (skipped without,
failed with KDA_REQUIRE_GPU set). The docs are found beside the repository's
tests (../../docs/python.md) or beside the staged tests (../python.md)."""

import os
import re
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
DOCS = next((p for p in (HERE.parents[1] / "docs" / "python.md", HERE.parent / "python.md") if p.is_file()), None)


def blocks():
    assert DOCS is not None, f"docs/python.md not found from {HERE}"
    return re.findall(r"```python\n(.*?)```", DOCS.read_text(), re.S)


def block(marker):
    found = [b for b in blocks() if marker in b]
    assert len(found) == 1, f"expected one python block of {DOCS} containing {marker!r}, found {len(found)}"
    return found[0]


def test_the_numpy_example_runs_on_the_simulator():
    # The block ends with its own assertions (padding row zero, state written).
    exec(compile(block("import numpy as np, kda"), str(DOCS), "exec"), {})


def gpu_or_skip():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or torch.cuda.get_device_capability(0) != (9, 0):
        if os.environ.get("KDA_REQUIRE_GPU"):
            raise RuntimeError("KDA_REQUIRE_GPU is set but no sm_90 GPU is usable from torch")
        pytest.skip("needs torch with an sm_90 CUDA GPU")
    return torch


def test_the_decode_loop_and_its_graph_capture_run_on_torch_tensors():
    torch = gpu_or_skip()
    ns = {}
    exec(compile(block("import torch, kda"), str(DOCS), "exec"), ns)
    H, B, S, dim = ns["H"], ns["B"], ns["S"], ns["dim"]
    gen = torch.Generator(device="cuda").manual_seed(7)

    def inputs(offset):
        bf = dict(device="cuda", dtype=torch.bfloat16)
        x = torch.randn(B, 3 * dim, generator=gen, device="cuda").to(**bf)
        raw_gate = torch.randn(B, 128, generator=gen, device="cuda").to(**bf)
        beta = torch.randn(B, H, generator=gen, device="cuda").to(**bf)
        gate = torch.randn(B, dim, generator=gen, device="cuda").to(**bf)
        slots = (torch.arange(B, dtype=torch.int32, device="cuda") + offset) % (S - 1) + 1
        slots[3] = -1  # PAD_SLOT_ID
        return x, raw_gate, beta, gate, slots

    x, raw_gate, beta, gate, slots = inputs(0)
    out = ns["step"](x, raw_gate, beta, gate, slots).clone()
    assert torch.isfinite(out.float()).all()
    assert (out[3] == 0).all() and out[0].abs().sum() > 0
    assert ns["state"][slots[0].item()].abs().sum() > 0 and not ns["state"][0].any()

    # The graph block, with the names it leaves to the reader. A second
    # eager step from the same caches must equal the replayed one.
    nx, nr, nb, ng, ns_slots = inputs(B)
    state0, conv0 = ns["state"].clone(), ns["conv_state"].clone()
    ns["step"](nx, nr, nb, ng, ns_slots)
    eager = ns["output"].clone()
    ns["state"].copy_(state0)
    ns["conv_state"].copy_(conv0)
    ns.update(x=x, raw_gate=raw_gate, beta=beta, gate=gate, slots=slots,
              next_x=nx, next_slots=ns_slots, steps=1)
    # The captured call reads raw_gate, beta and gate from the captured tensors.
    raw_gate.copy_(nr), beta.copy_(nb), gate.copy_(ng)
    # Capture does not run the step; the warm-up line in the block does, so
    # restore the caches it advanced before replaying.
    graph_block = block("torch.cuda.CUDAGraph()")
    warm, rest = graph_block.split("\n", 1)
    exec(compile(warm, str(DOCS), "exec"), ns)
    ns["state"].copy_(state0)
    ns["conv_state"].copy_(conv0)
    exec(compile(rest, str(DOCS), "exec"), ns)
    torch.cuda.synchronize()
    assert torch.equal(ns["output"], eager)
