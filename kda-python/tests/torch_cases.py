"""The GPU tests' shared part: skip the importing test module without torch
and an sm_90 GPU (fail with KDA_REQUIRE_GPU set), generated cases as torch
CUDA tensors, and the checks every class's GPU tests make: the in-place
path against the crate's Rust path on the same GPU, CUDA graph capture and
replay, a capture that would compile, an explicit stream, the device and
contract errors."""

import os

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available() or torch.cuda.get_device_capability(0) != (9, 0):
    if os.environ.get("KDA_REQUIRE_GPU"):
        raise RuntimeError("KDA_REQUIRE_GPU is set but no sm_90 GPU is usable from torch")
    pytest.skip("needs torch with an sm_90 CUDA GPU", allow_module_level=True)

from kda import _kda

from cases import WRITTEN, compare

TORCH = {"BF16": torch.bfloat16, "F32": torch.float32, "I32": torch.int32}


def to_torch(spec):
    flat = torch.frombuffer(bytearray(spec["storage"]), dtype=TORCH[spec["dtype"]]).cuda()
    return torch.as_strided(flat, spec["shape"], spec["strides"])


def torch_case(k, requests, **options):
    items, rust = _kda._case(k, requests, **options)
    return [to_torch(v) if kind == "tensor" else v for _, kind, v in items], rust


def row_major(t):
    t = t.contiguous().cpu()
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)
    return t.numpy().tobytes()


def written(k, args):
    by = dict(zip(k.params, args))
    return {n: row_major(by[n]) for n in WRITTEN}


def check_in_place(k, requests, **options):
    """The in-place call writes what the crate's run writes on the same GPU,
    within the f64 reference's tolerances; returns `k.info()`."""
    args, rust = torch_case(k, requests, device="cuda", **options)
    k(*args)
    torch.cuda.synchronize()
    got = written(k, args)
    for name in WRITTEN:
        assert got[name] == rust[name], f"{name} differs from the crate's run on the GPU"
    passed, report = compare(k, requests, got, **options)
    assert passed, report
    info = k.info()
    assert info["resources_from"] == "driver"
    return info


def check_graph_replay(k):
    """Replays of a captured call write what eager calls write."""
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


def check_uncompiled_capture(k):
    """A capture of a call whose kernel is not compiled yet raises."""
    args, _ = torch_case(k, 2, seed=5, run=False)
    g = torch.cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match="warm-up"):
        with torch.cuda.graph(g):
            k(*args)


def check_explicit_stream(k):
    """A call on a stream given writes what a call on the current one does."""
    a, _ = torch_case(k, 4, seed=6, run=False)
    b, _ = torch_case(k, 4, seed=6, run=False)
    k(*a)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    k(*b, stream=s)
    s.synchronize()
    assert written(k, a) == written(k, b)


def check_device_and_contract(k, requests, options, on_host, slot_edit, slot_error, retyped,
                              retype, type_error):
    """The argument `on_host` moved to the host, the slot tables after
    `slot_edit`, the argument `retyped` after `retype`: each raises."""
    args, _ = torch_case(k, requests, run=False, **options)
    by = dict(zip(k.params, args))
    bad = list(args)
    bad[k.params.index(on_host)] = by[on_host].cpu()
    with pytest.raises(ValueError, match=f"{on_host}: on the host"):
        k(*bad)
    slot_edit(by)
    with pytest.raises(ValueError, match=slot_error):
        k(*args)
    bad = list(args)
    bad[k.params.index(retyped)] = retype(by[retyped])
    with pytest.raises(TypeError, match=type_error):
        k(*bad)
