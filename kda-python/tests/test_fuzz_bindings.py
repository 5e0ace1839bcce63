"""Property tests of the binding layer (kda-bind) on the simulator: any
argument a caller can pass — arrays of any dtype, shape and strides
(negative, zero, overlapping, views into other arguments), read-only
arrays, foreign array-interface objects with NULL or odd pointers, non-array
objects, NaN/inf/huge/wrong-typed scalars, wrong argument counts — either
runs or raises TypeError/ValueError before anything is written. Nothing
may crash the interpreter or raise another exception type."""

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import kda  # noqa: E402
from cases import numpy_case  # noqa: E402

ALLOWED = (TypeError, ValueError)


class Foreign:
    """An object with only a hand-written `__array_interface__`."""

    def __init__(self, ptr, shape, typestr, strides=None, readonly=False):
        self.__array_interface__ = {
            "version": 3, "shape": tuple(shape), "typestr": typestr,
            "data": (ptr, readonly), "strides": strides,
        }


def mutate(rng_choice, arr):
    """One damaged version of an argument."""
    kind, arg = rng_choice
    if not isinstance(arr, np.ndarray):
        return [None, "x", float("nan"), float("inf"), -1e39, 1 << 70, True, [1.0], np.float64(2.0)][arg % 9]
    options = [
        lambda: arr.astype(np.float64),
        lambda: arr.astype(np.int8),
        lambda: arr[..., :1],
        lambda: arr.reshape(-1),
        lambda: arr[::-1] if arr.ndim else arr,
        lambda: np.lib.stride_tricks.as_strided(arr, strides=(0,) * arr.ndim),
        lambda: arr.T,
        lambda: np.broadcast_to(arr, arr.shape),
        lambda: Foreign(0, arr.shape, arr.__array_interface__["typestr"]),
        lambda: Foreign(8, arr.shape, arr.__array_interface__["typestr"]),
        lambda: Foreign(arr.ctypes.data, arr.shape, "<c8"),
        lambda: object(),
        lambda: np.zeros((0,) + arr.shape[1:], arr.dtype),
        lambda: np.zeros(arr.shape + (2,), arr.dtype),
    ]
    return options[kind % len(options)]()


CLASSES = [
    (lambda: kda.GdnDecode(1, 2), 2),
    (lambda: kda.Mamba2Decode(4), 2),
    (lambda: kda.KdaSplit(1), 2),
]


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(which=st.integers(0, len(CLASSES) - 1),
       edits=st.lists(st.tuples(st.integers(0, 40), st.integers(0, 40), st.integers(0, 40)),
                      min_size=1, max_size=3),
       drop=st.booleans(), alias=st.booleans())
def test_damaged_calls_run_or_raise_type_or_value_errors(which, edits, drop, alias):
    make, requests = CLASSES[which]
    k = make()
    args, _ = numpy_case(k, requests, run=False, seed=1)
    for position, kind, arg in edits:
        i = position % len(args)
        args[i] = mutate((kind, arg), args[i])
    if alias:
        # A written tensor's memory passed again as another argument.
        arrays = [i for i, a in enumerate(args) if isinstance(a, np.ndarray)]
        if len(arrays) >= 2:
            a, b = arrays[0], arrays[-1]
            if args[a].dtype == args[b].dtype:
                args[a] = args[b]
    if drop:
        args = args[:-1]
    try:
        k(*args)
    except ALLOWED:
        pass


@pytest.mark.parametrize("ptr", [8, 4096, 1 << 46])
def test_a_foreign_array_with_a_bogus_pointer_raises(ptr):
    """Memory behind a foreign `__array_interface__` is read and written
    through the kernel's checked copies: an unmapped range is a ValueError,
    not a segfault (issue 32 item 5)."""
    k = kda.GdnDecode(1, 2)
    args, _ = numpy_case(k, 2, run=False, seed=1)
    a = args[0]
    args[0] = Foreign(ptr, a.shape, a.__array_interface__["typestr"])
    with pytest.raises(ValueError, match="cannot be read"):
        k(*args)


def test_a_foreign_written_array_on_read_only_memory_raises():
    """A written tensor whose interface says writable but whose pages are
    read-only: the write-back fails with a ValueError, not a crash."""
    import mmap
    k = kda.GdnDecode(1, 2)
    args, _ = numpy_case(k, 2, run=False, seed=1)
    i = list(k.params).index("output")
    out = args[i]
    page = mmap.mmap(-1, max(out.nbytes, 4096), prot=mmap.PROT_READ)
    ptr = np.frombuffer(page, dtype=np.uint8).ctypes.data
    args[i] = Foreign(ptr, out.shape, out.__array_interface__["typestr"])
    with pytest.raises(ValueError, match="cannot be written"):
        k(*args)
