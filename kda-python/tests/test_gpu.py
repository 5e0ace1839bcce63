"""The bindings on the GPU with torch tensors (skipped without torch, CUDA
and a compute capability 9.0 GPU): the same cases as the simulator tests
against the Rust path on the same GPU (bit for bit) and the f64
reference, CUDA graph capture and replay, and agreement with fla."""

import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available() or torch.cuda.get_device_capability(0) != (9, 0):
    if os.environ.get("KDA_REQUIRE_GPU"):
        raise RuntimeError("KDA_REQUIRE_GPU is set but no sm_90 GPU is usable from torch")
    pytest.skip("needs torch with an sm_90 CUDA GPU", allow_module_level=True)

import kda
from kda import _kda

TORCH = {"BF16": torch.bfloat16, "F32": torch.float32, "I32": torch.int32}

# The flagship's matrix (heads per rank, batch, tokens) at sizes that keep
# the test quick.
CASES = [
    (8, 1, 1), (16, 4, 1), (32, 64, 1), (12, 8, 1), (16, 4, 2), (8, 3, 4), (32, 16, 3),
]


def to_torch(spec):
    flat = torch.frombuffer(bytearray(spec["storage"]), dtype=TORCH[spec["dtype"]]).cuda()
    return torch.as_strided(flat, spec["shape"], spec["strides"])


def torch_case(k, requests, **options):
    items, rust = _kda._kda_case(k, requests, **options)
    return [to_torch(v) if kind == "tensor" else v for _, kind, v in items], rust


def row_major(t):
    t = t.contiguous().cpu()
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)
    return t.numpy().tobytes()


def written(k, args):
    by = dict(zip(k.params, args))
    return {n: row_major(by[n]) for n in ("output", "state", "conv_state")}


@pytest.mark.parametrize("heads, requests, tokens", CASES)
def test_torch_in_place_equals_the_rust_gpu_path_and_the_reference(heads, requests, tokens):
    k = kda.KdaSplit(heads, tokens=tokens)
    args, rust = torch_case(k, requests, seed=3, device="cuda")
    k(*args)
    torch.cuda.synchronize()
    got = written(k, args)
    for name in ("output", "state", "conv_state"):
        assert got[name] == rust[name], f"{name} differs from kda_split::run on the GPU"
    passed, report = _kda._kda_compare(
        k, requests, got["output"], got["state"], got["conv_state"], seed=3
    )
    assert passed, report
    info = k.info()
    assert info["resources_from"] == "driver" and info["local_bytes"] == 0


def test_graph_capture_and_replay_equal_eager_launches():
    k = kda.KdaSplit(16)
    eager, _ = torch_case(k, 8, seed=4, run=False)
    graphed, _ = torch_case(k, 8, seed=4, run=False)
    k(*eager)  # also the warm-up: compiles and loads outside the capture
    k(*eager)
    initial = [a.clone() if isinstance(a, torch.Tensor) else a for a in graphed]
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        k(*graphed)
    for a, b in zip(graphed, initial):
        if isinstance(a, torch.Tensor):
            a.copy_(b)
    g.replay()
    g.replay()
    torch.cuda.synchronize()
    assert written(k, graphed) == written(k, eager)


def test_capture_of_an_uncompiled_configuration_raises():
    k = kda.KdaSplit(8)
    args, _ = torch_case(k, 2, seed=5, run=False)
    g = torch.cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match="warm-up"):
        with torch.cuda.graph(g):
            k(*args)


def test_explicit_stream():
    k = kda.KdaSplit(8)
    a, _ = torch_case(k, 4, seed=6, run=False)
    b, _ = torch_case(k, 4, seed=6, run=False)
    k(*a)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    k(*b, stream=s)
    s.synchronize()
    assert written(k, a) == written(k, b)


def test_wrong_device_and_contract_errors():
    k = kda.KdaSplit(8, tokens=2)
    args, _ = torch_case(k, 2, seed=7, padding=0.0, holes=0.0, run=False)
    by = dict(zip(k.params, args))
    bad = list(args)
    bad[k.params.index("gate")] = by["gate"].cpu()
    with pytest.raises(ValueError, match="gate: on the host"):
        k(*bad)
    by["accepted"][0] = 3
    with pytest.raises(ValueError, match=r"accepted\[0\] = 3"):
        k(*args)
    bad = list(args)
    bad[k.params.index("x")] = by["x"].float()
    with pytest.raises(TypeError, match="x: dtype F32"):
        k(*bad)


def test_agrees_with_fla():
    fla_kda = pytest.importorskip("fla.ops.kda")
    from unfused import unfused_step

    heads, requests = 16, 8
    k = kda.KdaSplit(heads)
    ours, _ = torch_case(k, requests, seed=8, run=False)
    theirs, _ = torch_case(k, requests, seed=8, run=False)
    k(*ours)
    unfused_step(theirs, heads, fla_kda.fused_recurrent_kda)
    torch.cuda.synchronize()
    out_limit, state_limit = _kda._tolerances()
    by_o, by_t = dict(zip(k.params, ours)), dict(zip(k.params, theirs))

    def rel(a, b):
        a, b = a.double(), b.double()
        return ((a - b).norm() / b.norm().clamp(min=1e-30)).item()

    assert rel(by_o["output"], by_t["output"]) <= out_limit
    # fla's recurrence sums in another order; the state differs by rounding.
    assert rel(by_o["state"], by_t["state"]) <= 10 * state_limit
    assert torch.equal(by_o["conv_state"], by_t["conv_state"])
