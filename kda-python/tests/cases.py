"""Test cases as arrays: the crate's seeded generator (through the test-only
`kda._kda._kda_case`) turned into NumPy arrays with the generator's exact
strides, and into torch tensors for the GPU tests."""

import numpy as np

from kda import _kda

NP_DTYPES = {"BF16": np.uint16, "F32": np.float32, "I32": np.int32}


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
    items, rust = _kda._kda_case(k, requests, **options)
    args = [to_numpy(v) if kind == "tensor" else v for _, kind, v in items]
    return args, rust


def names(k):
    return list(k.params)


def results(k, args):
    """Row-major bytes of the written tensors."""
    by_name = dict(zip(names(k), args))
    return {
        n: np.ascontiguousarray(by_name[n]).tobytes() for n in ("output", "state", "conv_state")
    }
