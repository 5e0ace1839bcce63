"""The HGRN-2 decode step in NumPy, float64: the reference a Python test of
the template's binding checks the kernel against (the math: `src/lib.rs`,
"The math"; the same formulas as `Problem::reference` in `src/host.rs`).

Convert bf16 tensors to float32 first (`x.float().numpy()` in torch); the
kernel reads them exactly, so the reference sees the same values.
"""

import numpy as np


def hgrn2_decode_ref(q, f, v, state, scale=None, lower_bound=None):
    """One launch of `hgrn2_decode`: T tokens of each request, in order.

    q, f: [B, T, H, K] (f: the raw forget logits); v: [B, T, H, V];
    state: [B, H, K, V], the state before token 0 (not modified);
    scale: the query scale, K ** -0.5 by default;
    lower_bound: [H, K] in [0, 1), or None for no bound (fla's first layer).

    Returns (o [B, T, H, V], new_state [B, H, K, V]), both float64.
    """
    q, f, v = (np.asarray(x, dtype=np.float64) for x in (q, f, v))
    s = np.array(state, dtype=np.float64)
    if scale is None:
        scale = q.shape[-1] ** -0.5
    lb = 0.0 if lower_bound is None else np.asarray(lower_bound, dtype=np.float64)
    a = lb + (1.0 - lb) * 0.5 * (1.0 + np.tanh(0.5 * f))  # lb + (1 - lb) * sigmoid(f)
    o = np.empty(v.shape)
    for t in range(q.shape[1]):
        a_t = a[:, t, :, :, None]  # [B, H, K, 1]
        s = a_t * s + (1.0 - a_t) * v[:, t, :, None, :]
        o[:, t] = scale * np.einsum("bhk,bhkv->bhv", q[:, t], s)
    return o, s


if __name__ == "__main__":
    # A launch of T tokens is T launches of one token.
    rng = np.random.default_rng(0)
    B, T, H, K, V = 2, 3, 2, 8, 4
    q, f = rng.normal(size=(B, T, H, K)), rng.normal(1.0, 2.0, size=(B, T, H, K))
    v, s0 = rng.normal(size=(B, T, H, V)), rng.normal(size=(B, H, K, V))
    lb = rng.uniform(0.0, 0.9, size=(H, K))
    o, s = hgrn2_decode_ref(q, f, v, s0, lower_bound=lb)
    step = s0
    for t in range(T):
        o_t, step = hgrn2_decode_ref(q[:, t:t + 1], f[:, t:t + 1], v[:, t:t + 1], step,
                                     lower_bound=lb)
        assert np.allclose(o_t[:, 0], o[:, t])
    assert np.allclose(step, s)
    print("ok")
