"""GdnDecode and Mamba2Decode on the GPU with torch tensors (skipped
without torch, CUDA and a compute capability 9.0 GPU), as test_gpu.py does
for KdaSplit: generated cases against the crate's Rust path on the same GPU
(bit for bit) and the f64 reference, CUDA graph capture and replay, the
device and contract errors."""

import os

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available() or torch.cuda.get_device_capability(0) != (9, 0):
    if os.environ.get("KDA_REQUIRE_GPU"):
        raise RuntimeError("KDA_REQUIRE_GPU is set but no sm_90 GPU is usable from torch")
    pytest.skip("needs torch with an sm_90 CUDA GPU", allow_module_level=True)

import kda

from cases import CASE, WRITTEN, compare

TORCH = {"BF16": torch.bfloat16, "F32": torch.float32, "I32": torch.int32}


def to_torch(spec):
    flat = torch.frombuffer(bytearray(spec["storage"]), dtype=TORCH[spec["dtype"]]).cuda()
    return torch.as_strided(flat, spec["shape"], spec["strides"])


def torch_case(k, requests, **options):
    items, rust = CASE[type(k)](k, requests, **options)
    return [to_torch(v) if kind == "tensor" else v for _, kind, v in items], rust


def row_major(t):
    t = t.contiguous().cpu()
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)
    return t.numpy().tobytes()


def written(k, args):
    by = dict(zip(k.params, args))
    return {n: row_major(by[n]) for n in WRITTEN}


# (constructor arguments, requests, case options): Qwen3-Next-like GDN
# groupings at every T, Mamba-2 model shapes (P = 64, N = 128) with
# clusters of 1 to 16 CTAs.
GDN = [
    (dict(num_k_heads=2, num_v_heads=4), 4, {}),
    (dict(num_k_heads=4, num_v_heads=8, tokens=2, has_bias=True), 8, dict(conv_sd=True)),
    (dict(num_k_heads=1, num_v_heads=8, tokens=4, lanes=32), 3, dict(extra=True)),
    (dict(num_k_heads=2, num_v_heads=2, tokens=3, lanes=8), 16, dict(weights_f32=True)),
    (dict(num_k_heads=8, num_v_heads=16), 64, {}),
]
MAMBA2 = [
    (dict(heads=8), 8, {}),
    (dict(heads=24, n_groups=1, has_z=False), 4, dict(conv_sd=True)),
    (dict(heads=16, n_groups=8, has_conv_bias=False), 4, dict(weights_f32=True)),
    (dict(heads=80, n_groups=8), 2, dict(extra=True)),
    (dict(heads=32, n_groups=1), 64, {}),
]
CASES = [(kda.GdnDecode, *c) for c in GDN] + [(kda.Mamba2Decode, *c) for c in MAMBA2]


def label(case):
    cls, config, requests, options = case
    parts = [f"{k}{v}" for k, v in {**config, **options}.items()]
    return "-".join([cls.__name__, *parts, f"B{requests}"])


@pytest.mark.parametrize("case", CASES, ids=label)
def test_torch_in_place_equals_the_rust_gpu_path_and_the_reference(case):
    cls, config, requests, options = case
    k = cls(**config)
    args, rust = torch_case(k, requests, seed=3, device="cuda", **options)
    k(*args)
    torch.cuda.synchronize()
    got = written(k, args)
    for name in WRITTEN:
        assert got[name] == rust[name], f"{name} differs from the crate's run on the GPU"
    passed, report = compare(k, requests, got, seed=3, **options)
    assert passed, report
    assert k.info()["resources_from"] == "driver"


@pytest.mark.parametrize(
    "cls, config",
    [(kda.GdnDecode, dict(num_k_heads=2, num_v_heads=4, tokens=2)), (kda.Mamba2Decode, dict(heads=8))],
    ids=["GdnDecode", "Mamba2Decode"],
)
def test_graph_capture_and_replay_equal_eager_launches(cls, config):
    k = cls(**config)
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


def test_capture_of_an_uncompiled_layout_raises():
    k = kda.Mamba2Decode(4)
    args, _ = torch_case(k, 2, seed=5, run=False)
    g = torch.cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match="warm-up"):
        with torch.cuda.graph(g):
            k(*args)


def test_explicit_stream():
    k = kda.GdnDecode(1, 2)
    a, _ = torch_case(k, 4, seed=6, run=False)
    b, _ = torch_case(k, 4, seed=6, run=False)
    k(*a)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    k(*b, stream=s)
    s.synchronize()
    assert written(k, a) == written(k, b)


def test_gdn_wrong_device_and_contract_errors():
    k = kda.GdnDecode(1, 2, tokens=2)
    args, _ = torch_case(k, 2, seed=7, padding=0.0, holes=0.0, run=False)
    by = dict(zip(k.params, args))
    bad = list(args)
    bad[k.params.index("z")] = by["z"].cpu()
    with pytest.raises(ValueError, match="z: on the host"):
        k(*bad)
    by["accepted"][0] = 3
    with pytest.raises(ValueError, match=r"accepted\[0\] = 3"):
        k(*args)
    bad = list(args)
    bad[k.params.index("x")] = by["x"].float()
    with pytest.raises(TypeError, match="x: dtype F32"):
        k(*bad)


def test_mamba2_wrong_device_and_contract_errors():
    k = kda.Mamba2Decode(2)
    args, _ = torch_case(k, 3, seed=8, padding=0.0, run=False)
    by = dict(zip(k.params, args))
    bad = list(args)
    bad[k.params.index("dt")] = by["dt"].cpu()
    with pytest.raises(ValueError, match="dt: on the host"):
        k(*bad)
    by["slots"][1] = by["slots"][0]
    with pytest.raises(ValueError, match="active requests must own distinct slots"):
        k(*args)
    bad = list(args)
    bad[k.params.index("state")] = by["state"].to(torch.bfloat16)
    with pytest.raises(TypeError, match="state: dtype BF16"):
        k(*bad)
