"""GdnDecode and Mamba2Decode on the GPU with torch tensors (skipped
without torch, CUDA and a compute capability 9.0 GPU), as test_gpu.py does
for KdaSplit: generated cases against the crate's Rust path on the same GPU
(bit for bit) and the f64 reference, CUDA graph capture and replay, the
device and contract errors."""

import pytest

from torch_cases import (check_device_and_contract, check_explicit_stream, check_graph_replay,
                         check_in_place, check_uncompiled_capture, torch)

import kda

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
    check_in_place(cls(**config), requests, seed=3, **options)


@pytest.mark.parametrize(
    "cls, config",
    [(kda.GdnDecode, dict(num_k_heads=2, num_v_heads=4, tokens=2)), (kda.Mamba2Decode, dict(heads=8))],
    ids=["GdnDecode", "Mamba2Decode"],
)
def test_graph_capture_and_replay_equal_eager_launches(cls, config):
    check_graph_replay(cls(**config))


def test_capture_of_an_uncompiled_layout_raises():
    check_uncompiled_capture(kda.Mamba2Decode(4))


def test_explicit_stream():
    check_explicit_stream(kda.GdnDecode(1, 2))


def accepted_out_of_range(by):
    by["accepted"][0] = 3


def shared_slot(by):
    by["slots"][1] = by["slots"][0]


def test_gdn_wrong_device_and_contract_errors():
    check_device_and_contract(
        kda.GdnDecode(1, 2, tokens=2), 2, dict(seed=7, padding=0.0, holes=0.0),
        "z", accepted_out_of_range, r"accepted\[0\] = 3", "x", lambda t: t.float(), "x: dtype F32",
    )


def test_mamba2_wrong_device_and_contract_errors():
    check_device_and_contract(
        kda.Mamba2Decode(2), 3, dict(seed=8, padding=0.0),
        "dt", shared_slot, "active requests must own distinct slots",
        "state", lambda t: t.to(torch.bfloat16), "state: dtype BF16",
    )


@pytest.mark.parametrize(
    "cls, config, requests",
    [(kda.GdnDecode, dict(num_k_heads=4, num_v_heads=8), 64), (kda.Mamba2Decode, dict(heads=24), 64)],
    ids=["GdnDecode", "Mamba2Decode"],
)
def test_autotune_times_the_schedule_space_and_persists_its_choice(cls, config, requests, tmp_path,
                                                                   monkeypatch, capfd):
    import json

    from torch_cases import torch_case

    table = tmp_path / "tune.json"
    monkeypatch.setenv("KDA_TUNE_FILE", str(table))
    k = cls(**config)
    args, _ = torch_case(k, requests, device="cuda", seed=5)
    before = [a.clone() if hasattr(a, "clone") else a for a in args]
    choice, times = k.autotune(*args, reps=20)
    torch.cuda.synchronize()
    err = capfd.readouterr().err
    print(err)
    assert len(times) > 1 and choice in times
    assert choice == min(times, key=times.get)
    assert f"{len(times)}/{len(times)}" in err and "stored in" in err
    # The arguments are read, not written.
    for a, b in zip(args, before):
        if hasattr(a, "equal"):
            assert a.equal(b)
    entries = json.loads(table.read_text())["entries"]
    (key, entry), = entries.items()
    assert cls.__name__ in key and entry["choice"] == choice
    # Later calls with that shape run the stored schedule, and stay within
    # the float64 reference's tolerances.
    from cases import compare
    from torch_cases import written
    fresh, _ = torch_case(k, requests, device="cuda", seed=5, run=False)
    k(*fresh)
    torch.cuda.synchronize()
    passed, report = compare(k, requests, written(k, fresh), seed=5)
    assert passed, report
