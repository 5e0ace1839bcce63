"""GdnDecode on the CPU simulator with NumPy arrays: the in-place path
against `gdn_decode::run` (bit for bit) and the f64 reference, and every
error path raising before anything is written."""

import numpy as np
import pytest

import kda

from cases import (bad_calls, check_bad_call, check_bad_configuration, check_cached,
                   check_in_place, check_raises, key_strided, label, misaligned_copy, names,
                   numpy_case, read_only, swap)

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


@pytest.mark.parametrize("case", CASES, ids=label)
def test_in_place_equals_the_rust_path_and_the_reference(case):
    k, requests, options = make(case)
    check_in_place(k, requests, "gdn_decode::run", **options)


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
    same = [(2, dict(seed=1)), (3, dict(seed=2))]
    check_cached(kda.GdnDecode(1, 2), same, (2, dict(seed=3, conv_sd=True)))


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


def test_the_schedule_follows_the_batch():
    # Below batch 64 the plain schedule with the conv taps' early release;
    # from it on evict-first, the trigger at entry, the release after the
    # conv, and at T = 1 the state staged (docs/perf.md).
    one, four = kda.GdnDecode(1, 2), kda.GdnDecode(1, 2, tokens=4, lanes=8)
    assert one.info(requests=63)["schedule"] == "l16 erel"
    assert one.info(requests=64)["schedule"] == "l16 evict trig staged"
    assert four.info(requests=1)["schedule"] == "l8 erel"
    assert four.info(requests=512)["schedule"] == "l8 evict trig"
    assert "cp.async.bulk" in one.ptx(requests=64)
    assert "cp.async.bulk" not in one.ptx(requests=63)


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


def accepted_out_of_range(by):
    by["accepted"][1] = 0


def shared_slot(by):
    by["slots"][1, :] = by["slots"][0, :]


def slot_outside_the_state(by):
    by["slots"][0, 0] = by["state"].shape[0]


def overlapping(a):
    """`a`'s shape with every row the same memory."""
    row = np.zeros(a.shape[1], dtype=np.uint16)
    return np.lib.stride_tricks.as_strided(row, a.shape, (0, 2))


BAD_CALLS = [
    ("not_an_array", swap(z=lambda a: [1.0, 2.0]), TypeError, "z:", "expected an array"),
    ("unsupported_dtype", swap(x=lambda a: a.astype(np.float64)), TypeError, "x:", "float64"),
    ("dtype_the_argument_does_not_take", swap(a_log=lambda a: a.view(np.int32)), TypeError,
     "a_log: dtype I32 is not allowed"),
    ("dtype_the_state_does_not_take", swap(state=lambda a: a.view(np.int32)), TypeError,
     "state: dtype I32"),
    ("scalar_must_be_a_float", swap(eps=lambda a: "small"), TypeError, "eps", "float"),
    ("scalar_contract_scale", swap(scale=lambda a: float("nan")), ValueError,
     "scale = NaN must be finite"),
    ("scalar_contract_eps", swap(eps=lambda a: -1.0), ValueError,
     "eps = -1 must be finite and >= 0"),
    ("wrong_shape", swap(beta=lambda a: a[:, :1]), ValueError, "beta: shape [4, 1]"),
    # x has B*T rows, B from slots.
    ("wrong_rows", swap(x=lambda a: a[:3]), ValueError, "x: shape", "requests * tokens"),
    # tokens = 2 needs T + 2 = 4 columns
    ("conv_width_follows_tokens", swap(conv_state=lambda a: a[:, :, :3]), ValueError,
     "conv_state: shape", ">=4"),
    ("state_must_be_key_contiguous", swap(state=key_strided), ValueError, "state", "contiguous"),
    ("negative_stride", swap(z=lambda a: a[::-1]), ValueError, "z", "negative"),
    ("misaligned_state", swap(state=misaligned_copy), ValueError, "state", "16-byte"),
    ("read_only_output", swap(output=read_only), ValueError, "output", "read-only"),
    ("overlapping_output", swap(output=overlapping), ValueError, "output", "overlap"),
    ("accepted_out_of_range", accepted_out_of_range, ValueError, "accepted[1] = 0"),
    ("shared_slot", shared_slot, ValueError, "slots", "active requests must own distinct slots"),
    ("slot_outside_the_state", slot_outside_the_state, ValueError, "slots[0, 0]", "outside"),
    ("several_violations_are_listed", swap(beta=lambda a: a[:, :1], z=lambda a: a[:1]),
     ValueError, "beta", "z:", "invalid arguments"),
]


@pytest.mark.parametrize("edit, exc, words", bad_calls(BAD_CALLS))
def test_bad_call(call, edit, exc, words):
    check_bad_call(call, edit, exc, words)


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
    check_bad_configuration(kda.GdnDecode, kwargs, words)
