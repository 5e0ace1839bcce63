"""The bindings on the CPU simulator with NumPy arrays: the in-place path
against the Rust run path (bit for bit) and the f64 reference, and every
error path raising before anything is written."""

import numpy as np
import pytest

import kda

from cases import (bad_calls, check_bad_call, check_bad_configuration, check_cached,
                   check_in_place, check_raises, label, names, numpy_case, read_only, results,
                   swap)

# Small, quick configurations; strided conv layouts (SD is a transposed
# view), padding rows and holes in the slot tables, several gate modes.
CASES = [
    dict(heads=1, tokens=1, gate_mode=0, requests=2, conv_sd=False),
    dict(heads=2, tokens=1, gate_mode=1, requests=3, conv_sd=True),
    dict(heads=1, tokens=1, gate_mode=2, requests=2, conv_sd=False, schedule=[0, 0, 0]),
    dict(heads=1, tokens=2, gate_mode=0, requests=2, conv_sd=True),
    dict(heads=1, tokens=3, gate_mode=0, requests=2, conv_sd=False, weights_f32=True),
    # Schedule entry 6: each token's state rows through shared memory, one
    # bulk store per token.
    dict(heads=1, tokens=2, gate_mode=0, requests=3, conv_sd=False, schedule=[0, 16, 0, 4, 0, 1]),
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


@pytest.mark.parametrize("case", CASES, ids=label)
def test_in_place_equals_the_rust_path_and_the_reference(case):
    k, requests, options = make(case)
    check_in_place(k, requests, "kda_split::run", seed=7, **options)


def test_kernels_are_cached_per_configuration():
    check_cached(kda.KdaSplit(1), [(2, dict(seed=1)), (2, dict(seed=2))], (3, dict(seed=3)))


def test_ptx_and_info():
    k = kda.KdaSplit(2, tokens=2)
    ptx = k.ptx(requests=4)
    assert ".entry" in ptx and "sm_90a" in ptx
    info = k.info(requests=4)
    for key in ("kernel", "cluster", "lanes", "dynamic_shared_bytes", "ptx_lines", "resources_from"):
        assert key in info, key
    assert info["tokens"] == "2"
    assert repr(k).startswith("KdaSplit(heads=2, tokens=2")
    assert "bulk_store" not in info
    bulk = kda.KdaSplit(2, tokens=2, schedule=[0, 16, 0, 4, 0, 1]).info(requests=4)
    assert bulk["bulk_store"] == "true" and bulk["schedule"] == "[0, 16, 0, 4, 0, 1]"
    assert "balance" not in bulk
    bal = kda.KdaSplit(2, schedule=[1, 16, 0, 4, 0, 0, 1]).info(requests=4)
    assert bal["balance"] == "true" and bal["schedule"] == "[1, 16, 0, 4, 0, 0, 1]"
    assert "// cluster scheduling policy: balance" in kda.KdaSplit(
        2, schedule=[1, 16, 0, 4, 0, 0, 1]
    ).ptx(requests=4)


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


def accepted_out_of_range(by):
    by["accepted"][0] = 3  # tokens = 2


def shared_slot(by):
    by["slots"][1, :] = by["slots"][0, :]


def strided_rows(a):
    """`a`'s shape over every other element of wider rows."""
    return np.zeros((a.shape[0], 256), dtype=np.uint16)[:, ::2]


def shifted(a):
    """`a`'s shape one f32 past an allocation's (16-byte aligned) start."""
    return np.zeros(a.size + 1, dtype=np.float32)[1:].reshape(a.shape)


BAD_CALLS = [
    ("not_an_array", swap(x=lambda a: [1, 2, 3]), TypeError, "x:", "expected an array"),
    ("unsupported_dtype", swap(x=lambda a: a.astype(np.float64)), TypeError, "x:", "float64"),
    ("dtype_the_argument_does_not_take", swap(a_log=lambda a: a.view(np.int32)), TypeError,
     "a_log", "I32"),
    ("scalar_must_be_a_float", swap(scale=lambda a: "big"), TypeError, "scale", "float"),
    ("wrong_shape", swap(beta=lambda a: a[:, :0]), ValueError, "beta", "shape"),
    # raw_gate's rows are vector-loaded: the last dimension must be contiguous.
    ("wrong_stride", swap(raw_gate=strided_rows), ValueError, "raw_gate", "contiguous"),
    ("negative_stride", swap(gate=lambda a: a[::-1]), ValueError, "gate", "negative"),
    ("misaligned", swap(state=shifted), ValueError, "state", "16-byte"),
    ("read_only_output", swap(output=read_only), ValueError, "output", "read-only"),
    ("accepted_out_of_range", accepted_out_of_range, ValueError, "accepted[0] = 3"),
    ("shared_slot", shared_slot, ValueError, "slots", "active requests must own distinct slots"),
    ("several_violations_are_listed", swap(beta=lambda a: a[:, :0], gate=lambda a: a[:1]),
     ValueError, "beta", "gate", "invalid arguments"),
]


@pytest.mark.parametrize("edit, exc, words", bad_calls(BAD_CALLS))
def test_bad_call(call, edit, exc, words):
    check_bad_call(call, edit, exc, words)


def test_missing_accepted_for_one_token():
    k = kda.KdaSplit(1, tokens=1)
    args, _ = numpy_case(k, 1, seed=1, run=False)
    assert len(args) == 17
    check_raises(k, args + [np.ones(1, np.int32)], TypeError, "17 positional arguments")


@pytest.mark.parametrize(
    "kwargs, words",
    [
        (dict(heads=1, tokens=9), "tokens must be in 1..=8"),
        (dict(heads=0), "heads"),
        (dict(heads=1, gate_mode=3), "gate mode"),
        (dict(heads=1, schedule="fast"), "schedule"),
        (dict(heads=1, schedule=[1]), "3 to 7 entries"),
        (dict(heads=1, tokens=2, schedule=[2, 0, 0]), "tokens > 1"),
        (dict(heads=1, schedule=[0, 0, 0, 0, 0, 1]), "bulk_store needs tokens > 1"),
        (dict(heads=1, schedule=[3, 32, 0, 1, 0, 0, 1]), "balance needs clusters"),
        (dict(heads=1, schedule=[0] * 8), "3 to 7 entries"),
    ],
)
def test_bad_configuration(kwargs, words):
    # Not every message names the class (the schedule's name the argument).
    check_bad_configuration(kda.KdaSplit, kwargs, words, named=False)


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
