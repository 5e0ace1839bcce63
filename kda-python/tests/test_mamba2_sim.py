"""Mamba2Decode on the CPU simulator with NumPy arrays: the in-place path
against `mamba2_decode::run` (bit for bit) and the f64 reference, and every
error path raising before anything is written."""

import numpy as np
import pytest

import kda

from cases import check_raises, compare, key_strided, misaligned_copy, names, numpy_case, replace, results

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


def label(case):
    return "-".join(f"{k}{v}" for k, v in case.items())


@pytest.mark.parametrize("case", CASES, ids=label)
def test_in_place_equals_the_rust_path_and_the_reference(case):
    k, requests, options = make(case)
    args, rust = numpy_case(k, requests, **options)
    k(*args)
    got = results(k, args)
    for name in ("output", "state", "conv_state"):
        assert got[name] == rust[name], f"{name} differs from mamba2_decode::run"
    passed, report = compare(k, requests, got, **options)
    assert passed, report


def test_the_cases_have_padding():
    padding = 0
    for case in CASES:
        k, requests, options = make(case)
        args, _ = numpy_case(k, requests, run=False, **options)
        padding += int(np.sum(dict(zip(names(k), args))["slots"] <= 0))
    assert padding > 0


def test_kernels_are_cached_per_layout_not_per_batch():
    k = kda.Mamba2Decode(2, head_dim=16, d_state=16)
    for requests, seed in ((2, 1), (4, 2)):
        args, _ = numpy_case(k, requests, seed=seed, run=False)
        k(*args)
    assert k.info()["cached_kernels"] == 1
    args, _ = numpy_case(k, 2, seed=3, weights_f32=True, run=False)
    k(*args)
    assert k.info()["cached_kernels"] == 2


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


def test_a_scalar_is_not_a_tensor(call):
    k, args, _ = call
    check_raises(k, replace(k, args, "a", -1.0), TypeError, "a:", "expected an array")


def test_unsupported_dtype(call):
    k, args, by = call
    check_raises(k, replace(k, args, "xbc", by["xbc"].astype(np.float64)), TypeError, "xbc:",
                 "float64")


def test_dtype_the_argument_does_not_take(call):
    k, args, by = call
    check_raises(k, replace(k, args, "a", by["a"].view(np.int32)), TypeError,
                 "a: dtype I32 is not allowed")
    check_raises(k, replace(k, args, "slots", by["slots"].view(np.float32)), TypeError,
                 "slots: dtype F32")


def test_wrong_shape(call):
    k, args, by = call
    check_raises(k, replace(k, args, "dt", by["dt"][:, :1]), ValueError, "dt: shape [3, 1]")
    check_raises(k, replace(k, args, "xbc", by["xbc"][:2]), ValueError, "xbc: shape",
                 "one row per request")


def test_state_must_be_contiguous_along_d_state(call):
    k, args, by = call
    check_raises(k, replace(k, args, "state", key_strided(by["state"])), ValueError, "state",
                 "contiguous")


def test_negative_stride(call):
    k, args, by = call
    check_raises(k, replace(k, args, "z", by["z"][::-1]), ValueError, "z", "negative")


def test_misaligned_state(call):
    k, args, by = call
    check_raises(k, replace(k, args, "state", misaligned_copy(by["state"])), ValueError, "state",
                 "16-byte")


def test_read_only_state(call):
    k, args, by = call
    state = by["state"].copy()
    state.setflags(write=False)
    check_raises(k, replace(k, args, "state", state), ValueError, "state", "read-only")


def test_shared_slot(call):
    k, args, by = call
    by["slots"][2] = by["slots"][0]
    check_raises(k, args, ValueError, "slots[2]", "active requests must own distinct slots")


def test_slot_outside_the_state(call):
    k, args, by = call
    by["slots"][1] = by["state"].shape[0]
    check_raises(k, args, ValueError, "slots[1]", "outside")


def test_several_violations_are_listed(call):
    k, args, by = call
    bad = replace(k, args, "dt", by["dt"][:, :1])
    bad = replace(k, bad, "output", by["output"][:1])
    msg = check_raises(k, bad, ValueError, "dt", "output")
    assert "invalid arguments" in msg


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
    with pytest.raises(ValueError) as e:
        kda.Mamba2Decode(**kwargs)
    assert words in str(e.value) and "Mamba2Decode" in str(e.value)
