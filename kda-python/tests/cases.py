"""Test cases as arrays: the crates' seeded generators (through the
test-only `kda._kda._case`, one for every class) turned into NumPy arrays
with the generator's exact strides, the matching comparisons with the f64
reference (`_compare`), and the checks the three classes' simulator tests
share: the in-place path against the Rust path, the kernel cache, the
constructor's errors and the bad calls (each raising before anything is
written)."""

import numpy as np
import pytest

import kda
from kda import _kda

NP_DTYPES = {"BF16": np.uint16, "F32": np.float32, "I32": np.int32}

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
    items, rust = _kda._case(k, requests, **options)
    args = [to_numpy(v) if kind == "tensor" else v for _, kind, v in items]
    return args, rust


def compare(k, requests, got, **options):
    """(passed, report) of the written tensors `got` against the f64
    reference of the same case."""
    return _kda._compare(k, requests, got["output"], got["state"], got["conv_state"], **options)


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


def label(case):
    """A test id from a case's options."""
    return "-".join(f"{k}{v}" for k, v in case.items())


def check_in_place(k, requests, crate, **options):
    """The in-place call on a generated case writes what the crate's Rust
    path `crate` writes, bit for bit, within the f64 reference's
    tolerances."""
    args, rust = numpy_case(k, requests, **options)
    k(*args)
    got = results(k, args)
    for name in WRITTEN:
        assert got[name] == rust[name], f"{name} differs from {crate}"
    passed, report = compare(k, requests, got, **options)
    assert passed, report


def check_cached(k, same, other):
    """Calls on the cases `same` ((requests, options) each) load one
    kernel; the case `other` a second."""
    for requests, options in same:
        args, _ = numpy_case(k, requests, run=False, **options)
        k(*args)
    assert k.info()["cached_kernels"] == 1
    requests, options = other
    args, _ = numpy_case(k, requests, run=False, **options)
    k(*args)
    info = k.info()
    assert info["cached_kernels"] == 2
    # The second kernel names the part of the key that changed.
    assert "->" in info["recompile_reason"], info["recompile_reason"]


def check_bad_configuration(cls, kwargs, words, named=True):
    """The constructor raises `ValueError` saying `words` (and, with
    `named`, the class name)."""
    with pytest.raises(ValueError) as e:
        cls(**kwargs)
    assert words in str(e.value)
    if named:
        assert cls.__name__ in str(e.value)


def swap(**changes):
    """An edit of a call (see `bad_calls`): each named argument replaced by
    its change of the original."""
    return lambda by: {name: change(by[name]) for name, change in changes.items()}


def bad_calls(rows):
    """`(id, edit, exception, *words)` rows as the parameters of a test of
    `check_bad_call`."""
    return [pytest.param(edit, exc, words, id=name) for name, edit, exc, *words in rows]


def check_bad_call(call, edit, exc, words):
    """The fixture's call after `edit` (which changes arrays of the call in
    place, or returns replacements by argument name) raises `exc` naming
    `words`, and writes nothing."""
    k, args, by = call
    changes = edit(by) or {}
    return check_raises(k, [changes.get(n, a) for n, a in zip(names(k), args)], exc, *words)


def read_only(a):
    out = a.copy()
    out.setflags(write=False)
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
