"""The compiled kernels are the process's: equal instances of a class share
them (the first call of one compiles, the other's finds it), on the
simulator with NumPy arrays."""

import pytest

import kda
from kda import _kda

from cases import numpy_case

# Configurations no other simulator test uses, so that the first call
# compiles whatever ran before.
FRESH = [
    (kda.KdaSplit, dict(heads=3, gate_mode=1), 2),
    (kda.GdnDecode, dict(num_k_heads=2, num_v_heads=4, tokens=1, lanes=32), 2),
    (kda.Mamba2Decode, dict(heads=2, head_dim=32, d_state=16), 3),
]


@pytest.mark.parametrize("cls, config, requests", FRESH, ids=lambda v: getattr(v, "__name__", ""))
def test_equal_instances_share_the_compiled_kernel(cls, config, requests):
    first, second = cls(**config), cls(**config)
    before = _kda._compilations()
    args, _ = numpy_case(first, requests, seed=1, run=False)
    first(*args)
    assert _kda._compilations() == before + 1
    assert first.info()["process_compilations"] == before + 1
    args, _ = numpy_case(second, requests, seed=2, run=False)
    second(*args)
    assert _kda._compilations() == before + 1, "an equal instance compiled again"
    assert second.info()["cached_kernels"] == 1
    assert second.ptx() == first.ptx()
