"""The bindings on the CPU simulator with NumPy arrays: the in-place path
against the Rust run path (bit for bit) and the f64 reference, and every
error path raising before anything is written."""

import numpy as np
import pytest

import kda
from kda import _kda

from cases import check_raises, names, numpy_case, replace, results

# Small, quick configurations; strided conv layouts (SD is a transposed
# view), padding rows and holes in the slot tables, several gate modes.
CASES = [
    dict(heads=1, tokens=1, gate_mode=0, requests=2, conv_sd=False),
    dict(heads=2, tokens=1, gate_mode=1, requests=3, conv_sd=True),
    dict(heads=1, tokens=1, gate_mode=2, requests=2, conv_sd=False, schedule=[0, 0, 0]),
    dict(heads=1, tokens=2, gate_mode=0, requests=2, conv_sd=True),
    dict(heads=1, tokens=3, gate_mode=0, requests=2, conv_sd=False, weights_f32=True),
]


def make(case):
    c = dict(case)
    k = kda.KdaSplit(
        c.pop("heads"),
        tokens=c.pop("tokens"),
        gate_mode=c.pop("gate_mode"),
        schedule=c.pop("schedule", "auto"),
    )
    return k, c.pop("requests"), c


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(f"{k}{v}" for k, v in c.items()))
def test_in_place_equals_the_rust_path_and_the_reference(case):
    k, requests, options = make(case)
    args, rust = numpy_case(k, requests, seed=7, **options)
    k(*args)
    got = results(k, args)
    for name in ("output", "state", "conv_state"):
        assert got[name] == rust[name], f"{name} differs from kda_split::run"
    passed, report = _kda._kda_compare(
        k, requests, got["output"], got["state"], got["conv_state"], seed=7, **options
    )
    assert passed, report


def test_kernels_are_cached_per_configuration():
    k = kda.KdaSplit(1)
    for seed in (1, 2):
        args, _ = numpy_case(k, 2, seed=seed, run=False)
        k(*args)
    assert k.info()["cached_kernels"] == 1
    args, _ = numpy_case(k, 3, seed=3, run=False)
    k(*args)
    assert k.info()["cached_kernels"] == 2


def test_ptx_and_info():
    k = kda.KdaSplit(2, tokens=2)
    ptx = k.ptx(requests=4)
    assert ".entry" in ptx and "sm_90a" in ptx
    info = k.info(requests=4)
    for key in ("kernel", "cluster", "lanes", "dynamic_shared_bytes", "ptx_lines", "resources_from"):
        assert key in info, key
    assert info["tokens"] == "2"
    assert repr(k).startswith("KdaSplit(heads=2, tokens=2")


# ---- errors: each names the argument and leaves every array untouched ----


@pytest.fixture
def call():
    k = kda.KdaSplit(1, tokens=2)
    args, _ = numpy_case(k, 2, seed=11, padding=0.0, holes=0.0, run=False)
    by_name = dict(zip(names(k), args))
    return k, args, by_name


def test_wrong_argument_count(call):
    k, args, _ = call
    check_raises(k, args[:-1], TypeError, "KdaSplit takes 18 positional arguments", "accepted")


def test_not_an_array(call):
    k, args, _ = call
    check_raises(k, replace(k, args, "x", [1, 2, 3]), TypeError, "x:", "expected an array")


def test_unsupported_dtype(call):
    k, args, by = call
    check_raises(k, replace(k, args, "x", by["x"].astype(np.float64)), TypeError, "x:", "float64")


def test_dtype_the_argument_does_not_take(call):
    k, args, by = call
    check_raises(k, replace(k, args, "a_log", by["a_log"].view(np.int32)), TypeError, "a_log", "I32")


def test_scalar_must_be_a_float(call):
    k, args, _ = call
    check_raises(k, replace(k, args, "scale", "big"), TypeError, "scale", "float")


def test_wrong_shape(call):
    k, args, by = call
    check_raises(k, replace(k, args, "beta", by["beta"][:, :0]), ValueError, "beta", "shape")


def test_wrong_stride(call):
    k, args, by = call
    # raw_gate's rows are vector-loaded: the last dimension must be contiguous.
    wide = np.zeros((by["raw_gate"].shape[0], 256), dtype=np.uint16)
    check_raises(k, replace(k, args, "raw_gate", wide[:, ::2]), ValueError, "raw_gate", "contiguous")


def test_negative_stride(call):
    k, args, by = call
    check_raises(k, replace(k, args, "gate", by["gate"][::-1]), ValueError, "gate", "negative")


def test_misaligned(call):
    k, args, by = call
    s = by["state"]
    flat = np.zeros(s.size + 1, dtype=np.float32)
    shifted = flat[1:].reshape(s.shape)
    check_raises(k, replace(k, args, "state", shifted), ValueError, "state", "16-byte")


def test_read_only_output(call):
    k, args, by = call
    out = by["output"].copy()
    out.setflags(write=False)
    check_raises(k, replace(k, args, "output", out), ValueError, "output", "read-only")


def test_accepted_out_of_range(call):
    k, args, by = call
    by["accepted"][0] = 3  # tokens = 2
    check_raises(k, args, ValueError, "accepted[0] = 3")


def test_shared_slot(call):
    k, args, by = call
    by["slots"][1, :] = by["slots"][0, :]
    check_raises(k, args, ValueError, "slots", "active requests must own distinct slots")


def test_missing_accepted_for_one_token():
    k = kda.KdaSplit(1, tokens=1)
    args, _ = numpy_case(k, 1, seed=1, run=False)
    assert len(args) == 17
    check_raises(k, args + [np.ones(1, np.int32)], TypeError, "17 positional arguments")


def test_several_violations_are_listed(call):
    k, args, by = call
    bad = replace(k, args, "beta", by["beta"][:, :0])
    bad = replace(k, bad, "gate", by["gate"][:1])
    msg = check_raises(k, bad, ValueError, "beta", "gate")
    assert "invalid arguments" in msg


@pytest.mark.parametrize(
    "kwargs, words",
    [
        (dict(heads=1, tokens=9), "tokens must be in 1..=8"),
        (dict(heads=0), "heads"),
        (dict(heads=1, gate_mode=3), "gate mode"),
        (dict(heads=1, schedule="fast"), "schedule"),
        (dict(heads=1, schedule=[1]), "3 to 5 entries"),
        (dict(heads=1, tokens=2, schedule=[2, 0, 0]), "tokens > 1"),
    ],
)
def test_bad_configuration(kwargs, words):
    with pytest.raises(ValueError) as e:
        kda.KdaSplit(**kwargs)
    assert words in str(e.value)


def test_bad_schedule_type():
    with pytest.raises(TypeError):
        kda.KdaSplit(1, schedule=1.5)


def test_torch_cpu_tensors_run_on_the_simulator():
    torch = pytest.importorskip("torch")
    k = kda.KdaSplit(1)
    args, rust = numpy_case(k, 2, seed=5)
    conv = []
    for a in args:
        if isinstance(a, np.ndarray) and a.dtype == np.uint16:
            t = torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
        elif isinstance(a, np.ndarray):
            t = torch.from_numpy(a)
        else:
            t = a
        conv.append(t)
    k(*conv)
    assert results(k, args)["output"] == rust["output"]
