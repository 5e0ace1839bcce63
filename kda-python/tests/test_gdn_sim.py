"""GdnDecode on the CPU simulator with NumPy arrays: the in-place path
against `gdn_decode::run` (bit for bit) and the f64 reference, and every
error path raising before anything is written."""

import numpy as np
import pytest

import kda

from cases import check_raises, compare, key_strided, misaligned_copy, names, numpy_case, replace, results

# Small configurations from the crate's matrix: T = 1..4, bias on and off,
# head groupings 1, 2 and 4 (clusters), every lane width, f32 weights, the
# SD conv layout, spare conv and slot columns. The seeds give padding
# requests and write holes (checked below).
CASES = [
    dict(num_k_heads=1, num_v_heads=1, tokens=1, has_bias=False, lanes=8, requests=3, seed=1),
    dict(num_k_heads=1, num_v_heads=2, tokens=2, has_bias=True, lanes=16, requests=3, seed=2,
         conv_sd=True, weights_f32=True, extra=True),
    dict(num_k_heads=1, num_v_heads=4, tokens=3, has_bias=True, lanes=32, requests=2, seed=3),
    dict(num_k_heads=2, num_v_heads=2, tokens=4, has_bias=False, lanes=16, requests=2, seed=4,
         conv_sd=True),
]

CONFIG = ("num_k_heads", "num_v_heads", "tokens", "has_bias", "lanes")


def make(case):
    c = dict(case)
    k = kda.GdnDecode(*(c.pop(n) for n in CONFIG))
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
        assert got[name] == rust[name], f"{name} differs from gdn_decode::run"
    passed, report = compare(k, requests, got, **options)
    assert passed, report


def test_the_cases_have_padding_and_write_holes():
    padding = holes = 0
    for case in CASES:
        k, requests, options = make(case)
        args, _ = numpy_case(k, requests, run=False, **options)
        by = dict(zip(names(k), args))
        slots, t = by["slots"], k.tokens
        for b in range(requests):
            if t == 1:
                padding += slots[b] <= 0
                continue
            read = slots[b, by["accepted"][b] - 1]
            padding += read <= 0
            if read > 0:
                holes += int(np.sum(slots[b, :t] <= 0))
    assert padding > 0 and holes > 0, (padding, holes)


def test_kernels_are_cached_per_layout_not_per_batch():
    k = kda.GdnDecode(1, 2)
    for requests, seed in ((2, 1), (3, 2)):
        args, _ = numpy_case(k, requests, seed=seed, run=False)
        k(*args)
    assert k.info()["cached_kernels"] == 1
    args, _ = numpy_case(k, 2, seed=3, conv_sd=True, run=False)
    k(*args)
    assert k.info()["cached_kernels"] == 2


def test_ptx_and_info():
    k = kda.GdnDecode(1, 2, tokens=2, has_bias=True, lanes=8)
    ptx = k.ptx()
    assert ".entry" in ptx and "sm_90a" in ptx
    info = k.info()
    for key in ("kernel", "cluster", "lanes", "block", "dynamic_shared_bytes", "ptx_lines",
                "resources_from"):
        assert key in info, key
    assert info["source"] == "contiguous tensors"
    assert (info["tokens"], info["lanes"], info["cluster"]) == ("2", "8", "2")
    assert repr(k) == "GdnDecode(num_k_heads=1, num_v_heads=2, tokens=2, has_bias=True, lanes=8)"
    assert names(k) == [
        "x", "conv_weight", "conv_bias", "conv_state", "a", "beta", "a_log", "dt_bias",
        "slots", "state", "output", "z", "norm_weight", "scale", "eps", "accepted",
    ]
    args, _ = numpy_case(k, 2, seed=1, run=False)
    k(*args)
    assert k.info()["source"] == "last launch"
    assert k.ptx() == ptx  # contiguous DS tensors: the same specialisation


# ---- errors: each names the argument and leaves every array untouched ----


@pytest.fixture
def call():
    k = kda.GdnDecode(1, 2, tokens=2)
    args, _ = numpy_case(k, 2, seed=11, padding=0.0, holes=0.0, run=False)
    return k, args, dict(zip(names(k), args))


def test_wrong_argument_count(call):
    k, args, _ = call
    check_raises(k, args[:-1], TypeError, "GdnDecode takes 15 positional arguments", "accepted")


def test_optional_arguments_follow_the_configuration():
    k = kda.GdnDecode(1, 1, has_bias=True)
    assert len(k.params) == 15 and "accepted" not in k.params
    plain = kda.GdnDecode(1, 1)
    args, _ = numpy_case(plain, 1, seed=1, run=False)
    assert len(args) == 14
    check_raises(k, args, TypeError, "15 positional arguments", "conv_bias")


def test_not_an_array(call):
    k, args, _ = call
    check_raises(k, replace(k, args, "z", [1.0, 2.0]), TypeError, "z:", "expected an array")


def test_unsupported_dtype(call):
    k, args, by = call
    check_raises(k, replace(k, args, "x", by["x"].astype(np.float64)), TypeError, "x:", "float64")


def test_dtype_the_argument_does_not_take(call):
    k, args, by = call
    check_raises(k, replace(k, args, "a_log", by["a_log"].view(np.int32)), TypeError,
                 "a_log: dtype I32 is not allowed")
    check_raises(k, replace(k, args, "state", by["state"].view(np.int32)), TypeError,
                 "state: dtype I32")


def test_scalar_must_be_a_float(call):
    k, args, _ = call
    check_raises(k, replace(k, args, "eps", "small"), TypeError, "eps", "float")


def test_scalar_contract(call):
    k, args, _ = call
    check_raises(k, replace(k, args, "scale", float("nan")), ValueError, "scale = NaN must be finite")
    check_raises(k, replace(k, args, "eps", -1.0), ValueError, "eps = -1 must be finite and >= 0")


def test_wrong_shape(call):
    k, args, by = call
    check_raises(k, replace(k, args, "beta", by["beta"][:, :1]), ValueError, "beta: shape [4, 1]")
    # x has B*T rows, B from slots.
    check_raises(k, replace(k, args, "x", by["x"][:3]), ValueError, "x: shape", "requests * tokens")


def test_conv_width_follows_tokens(call):
    k, args, by = call
    narrow = by["conv_state"][:, :, :3]  # tokens = 2 needs T + 2 = 4 columns
    check_raises(k, replace(k, args, "conv_state", narrow), ValueError, "conv_state: shape", ">=4")


def test_state_must_be_key_contiguous(call):
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


def test_read_only_output(call):
    k, args, by = call
    out = by["output"].copy()
    out.setflags(write=False)
    check_raises(k, replace(k, args, "output", out), ValueError, "output", "read-only")


def test_overlapping_output(call):
    k, args, by = call
    row = np.zeros(by["output"].shape[1], dtype=np.uint16)
    rows = np.lib.stride_tricks.as_strided(row, by["output"].shape, (0, 2))
    check_raises(k, replace(k, args, "output", rows), ValueError, "output", "overlap")


def test_accepted_out_of_range(call):
    k, args, by = call
    by["accepted"][1] = 0
    check_raises(k, args, ValueError, "accepted[1] = 0")


def test_shared_slot(call):
    k, args, by = call
    by["slots"][1, :] = by["slots"][0, :]
    check_raises(k, args, ValueError, "slots", "active requests must own distinct slots")


def test_slot_outside_the_state(call):
    k, args, by = call
    by["slots"][0, 0] = by["state"].shape[0]
    check_raises(k, args, ValueError, "slots[0, 0]", "outside")


def test_several_violations_are_listed(call):
    k, args, by = call
    bad = replace(k, args, "beta", by["beta"][:, :1])
    bad = replace(k, bad, "z", by["z"][:1])
    msg = check_raises(k, bad, ValueError, "beta", "z:")
    assert "GdnDecode: 2 invalid arguments" in msg or "invalid arguments" in msg


@pytest.mark.parametrize(
    "kwargs, words",
    [
        (dict(num_k_heads=1, num_v_heads=1, tokens=5), "tokens must be in 1..=4"),
        (dict(num_k_heads=0, num_v_heads=1), "at least 1"),
        (dict(num_k_heads=2, num_v_heads=3), "multiple of num_k_heads"),
        (dict(num_k_heads=1, num_v_heads=16), "at most 8 v-heads per k-head"),
        (dict(num_k_heads=1, num_v_heads=1, lanes=4), "lanes per state row must be 8, 16 or 32"),
    ],
)
def test_bad_configuration(kwargs, words):
    with pytest.raises(ValueError) as e:
        kda.GdnDecode(**kwargs)
    assert words in str(e.value) and "GdnDecode" in str(e.value)
