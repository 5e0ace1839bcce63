"""The bindings on the GPU with torch tensors (skipped without torch, CUDA
and a compute capability 9.0 GPU): the same cases as the simulator tests
against the Rust path on the same GPU (bit for bit) and the f64
reference, CUDA graph capture and replay, and agreement with fla."""

import pytest

from torch_cases import (check_device_and_contract, check_explicit_stream, check_graph_replay,
                         check_in_place, check_uncompiled_capture, torch, torch_case)

import kda
from kda import _kda

# The flagship's matrix (heads per rank, batch, tokens) at sizes that keep
# the test quick.
CASES = [
    (8, 1, 1), (16, 4, 1), (32, 64, 1), (12, 8, 1), (16, 4, 2), (8, 3, 4), (32, 16, 3),
]


@pytest.mark.parametrize("heads, requests, tokens", CASES)
def test_torch_in_place_equals_the_rust_gpu_path_and_the_reference(heads, requests, tokens):
    info = check_in_place(kda.KdaSplit(heads, tokens=tokens), requests, seed=3)
    assert info["local_bytes"] == 0


def test_graph_capture_and_replay_equal_eager_launches():
    check_graph_replay(kda.KdaSplit(16))


def test_capture_of_an_uncompiled_configuration_raises():
    check_uncompiled_capture(kda.KdaSplit(8))


def test_explicit_stream():
    check_explicit_stream(kda.KdaSplit(8))


def accepted_out_of_range(by):
    by["accepted"][0] = 3


def test_wrong_device_and_contract_errors():
    check_device_and_contract(
        kda.KdaSplit(8, tokens=2), 2, dict(seed=7, padding=0.0, holes=0.0),
        "gate", accepted_out_of_range, r"accepted\[0\] = 3", "x", lambda t: t.float(), "x: dtype F32",
    )


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
