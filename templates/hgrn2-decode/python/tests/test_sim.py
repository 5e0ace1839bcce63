"""The template's binding on the simulator (NumPy arrays): the kernel
against the float64 reference (`reference.py`), and bad input raising
Python exceptions that name the argument."""

import pathlib
import sys

import numpy as np
import pytest

import hgrn2_decode

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))
from reference import hgrn2_decode_ref  # noqa: E402

# The host program's limits (src/host.rs LIMITS): relative Frobenius errors.
O_LIMIT, STATE_LIMIT = 1e-2, 1e-5


def bf16(x):
    """Round to bfloat16 (nearest even): (bit pattern as uint16, values as float32)."""
    b = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    bits = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)
    return bits, (bits.astype(np.uint32) << 16).view(np.float32)


def rel(got, want):
    return np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30)


def problem(K, V, T, lb, B, H, seed=0):
    rng = np.random.default_rng(seed)
    q, f, v = (bf16(rng.normal(m, s, size=(B, T, H, d)))
               for m, s, d in ((0, 1, K), (1, 2, K), (0, 1, V)))
    state = rng.normal(0, 0.5, size=(B, H, K, V)).astype(np.float32)
    bound = rng.uniform(0, 0.9, size=(H, K)).astype(np.float32) if lb else None
    return q, f, v, state, bound, np.float32(K ** -0.5)


@pytest.mark.parametrize("K,V,T,lb,B,H", [(64, 64, 1, False, 2, 2), (32, 64, 3, True, 1, 3)])
def test_matches_the_float64_reference(K, V, T, lb, B, H):
    (qb, q), (fb, f), (vb, v), state, bound, scale = problem(K, V, T, lb, B, H)
    k = hgrn2_decode.Hgrn2Decode(K, V, T, lb)
    s, o = state.copy(), np.zeros((B, T, H, V), np.uint16)
    k(qb, fb, vb, s, o, float(scale), *([bound] if lb else []))
    want_o, want_s = hgrn2_decode_ref(q, f, v, state, scale, bound)
    assert rel((o.astype(np.uint32) << 16).view(np.float32), want_o) < O_LIMIT
    assert rel(s, want_s) < STATE_LIMIT


def test_params_ptx_and_info():
    k = hgrn2_decode.Hgrn2Decode(64, 64, 2, True)
    assert k.params == ["q", "f", "v", "state", "o", "scale", "lower_bound"]
    assert hgrn2_decode.Hgrn2Decode(64, 64).params[-1] == "scale"
    assert ".entry hgrn2_decode" in k.ptx()
    assert k.info()["block"] == 128


def call(k, **change):
    (qb, _), (fb, _), (vb, _), state, _, scale = problem(64, 64, 1, False, 1, 1)
    args = dict(q=qb, f=fb, v=vb, state=state, o=np.zeros((1, 1, 1, 64), np.uint16), scale=1.0)
    args.update(change)
    k(*args.values())


@pytest.mark.parametrize("change,error,words", [
    (dict(q=np.zeros((1, 1, 1, 64), np.float64)), TypeError, "q: dtype"),
    (dict(state=np.zeros((1, 1, 64, 64), np.uint16)), TypeError, "state"),
    (dict(v=np.zeros((1, 1, 1, 32), np.uint16)), ValueError, "v"),
    (dict(scale=float("nan")), ValueError, "scale = NaN must be finite"),
    (dict(scale="one"), TypeError, "scale"),
    (dict(q="not an array"), TypeError, "q"),
])
def test_bad_input_raises_naming_the_argument(change, error, words):
    with pytest.raises(error, match=words):
        call(hgrn2_decode.Hgrn2Decode(64, 64), **change)


def test_written_tensor_overlapping_an_input_is_refused():
    (qb, _), _, _, _, _, _ = problem(64, 64, 1, False, 1, 1)
    with pytest.raises(ValueError, match="shares memory"):
        call(hgrn2_decode.Hgrn2Decode(64, 64), q=qb, o=qb)


def test_read_only_output_is_refused():
    o = np.zeros((1, 1, 1, 64), np.uint16)
    o.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        call(hgrn2_decode.Hgrn2Decode(64, 64), o=o)


def test_lower_bound_outside_its_range_is_refused():
    (qb, _), (fb, _), (vb, _), state, bound, _ = problem(64, 64, 1, True, 1, 1)
    bound[0, 3] = 1.5
    with pytest.raises(ValueError, match="lower_bound: 1.5"):
        hgrn2_decode.Hgrn2Decode(64, 64, 1, True)(
            qb, fb, vb, state, np.zeros((1, 1, 1, 64), np.uint16), 1.0, bound)


def test_bad_configuration_raises():
    with pytest.raises(ValueError, match="key_dim"):
        hgrn2_decode.Hgrn2Decode(48, 64)
