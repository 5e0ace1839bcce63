"""Test cases as arrays: the crates' seeded generators (through the
test-only `kda._kda._kda_case`, `_gdn_case`, `_mamba2_case`) turned into
NumPy arrays with the generator's exact strides, the matching comparisons
with the f64 reference, and the helpers of the error tests."""

import numpy as np
import pytest

import kda
from kda import _kda

NP_DTYPES = {"BF16": np.uint16, "F32": np.float32, "I32": np.int32}

# Each class's generator and comparison.
CASE = {
    kda.KdaSplit: _kda._kda_case,
    kda.GdnDecode: _kda._gdn_case,
    kda.Mamba2Decode: _kda._mamba2_case,
}
COMPARE = {
    kda.KdaSplit: _kda._kda_compare,
    kda.GdnDecode: _kda._gdn_compare,
    kda.Mamba2Decode: _kda._mamba2_compare,
}

WRITTEN = ("output", "state", "conv_state")


def to_numpy(spec):
    """A writable array over a copy of the storage, viewed with the
    generator's shape and strides (bf16 as its uint16 bit patterns)."""
    dtype = np.dtype(NP_DTYPES[spec["dtype"]])
    storage = np.frombuffer(spec["storage"], dtype=dtype).copy()
    strides = [s * dtype.itemsize for s in spec["strides"]]
    return np.lib.stride_tricks.as_strided(
        storage, shape=spec["shape"], strides=strides, writeable=True
    )


def numpy_case(k, requests, **options):
    """(args, rust): positional arguments as arrays and floats, and the
    Rust path's results (row-major bytes) on the simulator, or None."""
    items, rust = CASE[type(k)](k, requests, **options)
    args = [to_numpy(v) if kind == "tensor" else v for _, kind, v in items]
    return args, rust


def compare(k, requests, got, **options):
    """(passed, report) of the written tensors `got` against the f64
    reference of the same case."""
    return COMPARE[type(k)](
        k, requests, got["output"], got["state"], got["conv_state"], **options
    )


def names(k):
    return list(k.params)


def results(k, args):
    """Row-major bytes of the written tensors."""
    by_name = dict(zip(names(k), args))
    return {n: np.ascontiguousarray(by_name[n]).tobytes() for n in WRITTEN}


def check_raises(k, args, exc, *words):
    """`k(*args)` raises `exc` with each of `words` in its message and
    leaves every array as it was."""
    before = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    with pytest.raises(exc) as e:
        k(*args)
    for w in words:
        assert w in str(e.value), (w, str(e.value))
    for a, b in zip(args, before):
        if isinstance(a, np.ndarray):
            assert np.array_equal(a, b), "an array was written by a failing call"
    return str(e.value)


def replace(k, args, name, value):
    out = list(args)
    out[names(k).index(name)] = value
    return out


def misaligned_copy(a):
    """`a`'s values in an array whose address is 4 bytes past a 16-byte
    boundary."""
    flat = np.zeros(a.size + 16, dtype=a.dtype)
    base = flat.ctypes.data
    start = next(i for i in range(16) if (base + i * a.itemsize) % 16 == 4)
    out = flat[start : start + a.size].reshape(a.shape)
    out[...] = a
    return out


def key_strided(state):
    """`state`'s values viewed through a buffer whose last dimension is not
    contiguous (the `[K, V]` layout a `[V, K]` kernel must refuse)."""
    t = np.ascontiguousarray(np.swapaxes(state, -1, -2))
    return np.swapaxes(t, -1, -2)
