"""Mamba2Decode on the CPU simulator with NumPy arrays: the in-place path
against `mamba2_decode::run` (bit for bit) and the f64 reference, and every
error path raising before anything is written."""

import numpy as np
import pytest

import kda

from cases import (bad_calls, check_bad_call, check_bad_configuration, check_cached,
                   check_in_place, check_raises, key_strided, label, misaligned_copy, names,
                   numpy_case, read_only, swap)

# Small configurations from the crate's matrix: every option on and off,
# groups, clusters of 1 to 4 CTAs with several heads per CTA, head sizes
# that change the thread layout, f32 weights, the SD conv layout, a spare
# conv column; padding requests at 25 %.
CASES = [
    dict(heads=2, n_groups=1, head_dim=16, d_state=16, requests=3, seed=1),
    dict(heads=4, n_groups=2, head_dim=16, d_state=32, has_z=False, has_d=False,
         has_conv_bias=False, requests=3, seed=2, conv_sd=True),
    dict(heads=3, n_groups=1, head_dim=32, d_state=64, has_d=False, requests=2, seed=3,
         weights_f32=True, extra=True),
    dict(heads=2, n_groups=2, head_dim=64, d_state=128, has_z=False, requests=2, seed=4,
         padding=0.5),
]

CONFIG = ("heads", "n_groups", "head_dim", "d_state", "has_z", "has_d", "has_conv_bias")


def make(case):
    c = dict(case)
    k = kda.Mamba2Decode(**{n: c.pop(n) for n in CONFIG if n in c})
    return k, c.pop("requests"), c


@pytest.mark.parametrize("case", CASES, ids=label)
def test_in_place_equals_the_rust_path_and_the_reference(case):
    k, requests, options = make(case)
    check_in_place(k, requests, "mamba2_decode::run", **options)


def test_the_cases_have_padding():
    padding = 0
    for case in CASES:
        k, requests, options = make(case)
        args, _ = numpy_case(k, requests, run=False, **options)
        padding += int(np.sum(dict(zip(names(k), args))["slots"] <= 0))
    assert padding > 0


def test_kernels_are_cached_per_layout_not_per_batch():
    k = kda.Mamba2Decode(2, head_dim=16, d_state=16)
    check_cached(k, [(2, dict(seed=1)), (4, dict(seed=2))], (2, dict(seed=3, weights_f32=True)))


def test_the_schedule_follows_the_batch():
    # Below batch 64 clusters of up to 8 CTAs; from it on clusters of up to
    # 4 with the load-balancing policy (docs/perf.md): 8 heads in one group
    # are 8 CTAs of one head, then 4 of two. Each batch runs its own kernel,
    # bit for bit the Rust path's at that batch and within the reference's
    # tolerances.
    k = kda.Mamba2Decode(8, head_dim=16, d_state=16)
    small, large = k.info(requests=63), k.info(requests=64)
    assert (small["schedule"], small["cluster"]) == ("c8 early", "8")
    assert (large["schedule"], large["cluster"], large["heads_per_cta"]) == (
        "c4 early bal", "4", "2")
    policy = "// cluster scheduling policy: balance"
    assert policy in k.ptx(requests=64) and policy not in k.ptx(requests=2)
    check_in_place(k, 2, "mamba2_decode::run", seed=5)
    check_in_place(k, 64, "mamba2_decode::run", seed=6)
    assert k.info()["cached_kernels"] == 2
    # 80 heads in one group: clusters of 4 would put 20 heads in a CTA, so
    # every batch keeps the small-batch default.
    wide = kda.Mamba2Decode(80, head_dim=16, d_state=16)
    assert wide.info(requests=512)["schedule"] == wide.info(requests=1)["schedule"] == "early"


def test_ptx_and_info():
    k = kda.Mamba2Decode(4, n_groups=2, head_dim=32, d_state=64, has_d=False)
    ptx = k.ptx()
    assert ".entry" in ptx and "sm_90a" in ptx
    info = k.info()
    for key in ("kernel", "cluster", "heads_per_cta", "block", "dynamic_shared_bytes",
                "ptx_lines", "resources_from"):
        assert key in info, key
    assert (info["heads"], info["n_groups"], info["has_d"]) == ("4", "2", "false")
    assert repr(k) == (
        "Mamba2Decode(heads=4, n_groups=2, head_dim=32, d_state=64, has_z=True, has_d=False, "
        "has_conv_bias=True)"
    )
    assert names(k) == [
        "xbc", "conv_weight", "conv_bias", "conv_state", "dt", "dt_bias", "a", "z", "slots",
        "state", "output",
    ]


# ---- errors: each names the argument and leaves every array untouched ----


@pytest.fixture
def call():
    k = kda.Mamba2Decode(2, head_dim=16, d_state=16)
    args, _ = numpy_case(k, 3, seed=11, padding=0.0, run=False)
    return k, args, dict(zip(names(k), args))


def test_wrong_argument_count(call):
    k, args, _ = call
    check_raises(k, args[:-1], TypeError, "Mamba2Decode takes 12 positional arguments", "output")


def test_optional_arguments_follow_the_configuration(call):
    _, args, _ = call
    k = kda.Mamba2Decode(2, head_dim=16, d_state=16, has_z=False)
    assert "z" not in k.params
    check_raises(k, args, TypeError, "11 positional arguments")


def shared_slot(by):
    by["slots"][2] = by["slots"][0]


def slot_outside_the_state(by):
    by["slots"][1] = by["state"].shape[0]


BAD_CALLS = [
    ("a_scalar_is_not_a_tensor", swap(a=lambda a: -1.0), TypeError, "a:", "expected an array"),
    ("unsupported_dtype", swap(xbc=lambda a: a.astype(np.float64)), TypeError, "xbc:",
     "float64"),
    ("dtype_the_argument_does_not_take", swap(a=lambda a: a.view(np.int32)), TypeError,
     "a: dtype I32 is not allowed"),
    ("dtype_the_slots_do_not_take", swap(slots=lambda a: a.view(np.float32)), TypeError,
     "slots: dtype F32"),
    ("wrong_shape", swap(dt=lambda a: a[:, :1]), ValueError, "dt: shape [3, 1]"),
    ("wrong_rows", swap(xbc=lambda a: a[:2]), ValueError, "xbc: shape", "one row per request"),
    ("state_must_be_contiguous_along_d_state", swap(state=key_strided), ValueError, "state",
     "contiguous"),
    ("negative_stride", swap(z=lambda a: a[::-1]), ValueError, "z", "negative"),
    ("misaligned_state", swap(state=misaligned_copy), ValueError, "state", "16-byte"),
    ("read_only_state", swap(state=read_only), ValueError, "state", "read-only"),
    ("shared_slot", shared_slot, ValueError, "slots[2]", "active requests must own distinct slots"),
    ("slot_outside_the_state", slot_outside_the_state, ValueError, "slots[1]", "outside"),
    ("several_violations_are_listed", swap(dt=lambda a: a[:, :1], output=lambda a: a[:1]),
     ValueError, "dt", "output", "invalid arguments"),
]


@pytest.mark.parametrize("edit, exc, words", bad_calls(BAD_CALLS))
def test_bad_call(call, edit, exc, words):
    check_bad_call(call, edit, exc, words)


@pytest.mark.parametrize(
    "kwargs, words",
    [
        (dict(heads=0), "heads must be at least 1"),
        (dict(heads=2, n_groups=0), "n_groups must be at least 1"),
        (dict(heads=6, n_groups=4), "n_groups must divide heads"),
        (dict(heads=2, head_dim=48), "head_dim must be a power of two"),
        (dict(heads=2, d_state=512), "d_state must be a power of two"),
    ],
)
def test_bad_configuration(kwargs, words):
    check_bad_configuration(kda.Mamba2Decode, kwargs, words)
