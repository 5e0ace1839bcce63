"""The template's binding on the GPU (skipped without torch and CUDA): the
kernel against fla's `fused_recurrent_gla` on shared inputs (HGRN-2's call
of it), both timed in one process, and `torch.compile` of a function
calling two kda ops with no graph break."""

import os

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import hgrn2_decode  # noqa: E402


def inputs(B, T, H, K, V, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    r = lambda *s, m=0.0, sd=1.0: (torch.randn(*s, generator=g, device="cuda") * sd + m)  # noqa: E731
    q = r(B, T, H, K).bfloat16()
    f = r(B, T, H, K, m=1.0, sd=2.0).bfloat16()
    v = r(B, T, H, V).bfloat16()
    s0 = r(B, H, K, V, sd=0.5).float()
    return q, f, v, s0


def ours(k, q, f, v, s0, scale):
    s = s0.clone()
    o = torch.empty(v.shape, dtype=torch.bfloat16, device="cuda")
    k(q, f, v, s, o, scale)
    return o, s


def rel(a, b):
    return ((a.float() - b.float()).norm() / b.float().norm()).item()


@pytest.mark.parametrize("B,T,H", [(8, 1, 16), (64, 1, 16), (16, 4, 8)])
def test_matches_fla_fused_recurrent_gla(B, T, H):
    gla = pytest.importorskip("fla.ops.gla")
    K = V = 128
    q, f, v, s0 = inputs(B, T, H, K, V)
    scale = K ** -0.5
    o, s = ours(hgrn2_decode.Hgrn2Decode(K, V, T), q, f, v, s0, scale)
    # HGRN-2 through fla: g = logsigmoid(f), k = 1 - exp(g).
    gk = torch.nn.functional.logsigmoid(f.float())
    k_in = (1 - gk.exp()).bfloat16()
    o_fla, s_fla = gla.fused_recurrent_gla(q, k_in, v, gk=gk, scale=scale, initial_state=s0,
                                           output_final_state=True)
    # fla rounds k to bf16 (the kernel keeps it in f32): bf16-level agreement.
    print(f"B {B} T {T} H {H}: rel o {rel(o, o_fla):.2e}, state {rel(s, s_fla):.2e}")
    assert rel(o, o_fla) < 1e-2 and rel(s, s_fla) < 1e-2


def timed(fn, reps=50):
    graph = torch.cuda.CUDAGraph()
    fn()
    torch.cuda.synchronize()
    with torch.cuda.graph(graph):
        for _ in range(reps):
            fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(5):
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / reps)
    return sorted(times)[len(times) // 2]


def test_time_against_fla():
    gla = pytest.importorskip("fla.ops.gla")
    K = V = 128
    for B, T, H in [(1, 1, 16), (64, 1, 16), (256, 1, 16)]:
        q, f, v, s0 = inputs(B, T, H, K, V)
        k = hgrn2_decode.Hgrn2Decode(K, V, T)
        s, o = s0.clone(), torch.empty(v.shape, dtype=torch.bfloat16, device="cuda")
        gk = torch.nn.functional.logsigmoid(f.float())
        k_in = (1 - gk.exp()).bfloat16()
        t_ours = timed(lambda: k(q, f, v, s, o, K ** -0.5))
        t_fla = timed(lambda: gla.fused_recurrent_gla(q, k_in, v, gk=gk, scale=K ** -0.5,
                                                      initial_state=s0,
                                                      output_final_state=True))
        state_bytes = 2 * B * H * K * V * 4
        print(f"B {B} T {T} H {H}: kda {t_ours:.2f} us ({state_bytes / t_ours / 1e6:.2f} TB/s "
              f"state), fla fused_recurrent_gla {t_fla:.2f} us, speed-up {t_fla / t_ours:.2f}x")


def test_torch_compile_two_ops_without_graph_break():
    K = V = 128
    first = hgrn2_decode.Hgrn2Decode(K, V, 1).torch_op("hgrn2_test::first")
    second = hgrn2_decode.Hgrn2Decode(K, V, 1, True).torch_op("hgrn2_test::second")
    q, f, v, s0 = inputs(4, 1, 8, K, V)
    lb = torch.rand(8, K, device="cuda") * 0.9

    def step(s1, s2, o1, o2):
        first(q, f, v, s1, o1, K ** -0.5)
        second(q, f, v, s2, o2, K ** -0.5, lb)
        return o1.float() + o2.float()

    bufs = lambda: (s0.clone(), s0.clone(), torch.empty_like(v), torch.empty_like(v))  # noqa: E731
    explain = torch._dynamo.explain(step)(*bufs())
    print(f"graphs {explain.graph_count}, graph breaks {explain.graph_break_count}")
    assert explain.graph_break_count == 0
    compiled = torch.compile(step, fullgraph=True)
    eager, comp = bufs(), bufs()
    want, got = step(*eager), compiled(*comp)
    torch.cuda.synchronize()
    assert torch.equal(want, got) and torch.equal(eager[0], comp[0])


@pytest.mark.skipif(not os.environ.get("KDA_CACHE_PROBE"), reason="run by the staged suite")
def test_first_call_time():
    import time
    K = V = 128
    q, f, v, s0 = inputs(4, 1, 8, K, V)
    k = hgrn2_decode.Hgrn2Decode(K, V, 1)
    t0 = time.perf_counter()
    ours(k, q, f, v, s0, K ** -0.5)
    torch.cuda.synchronize()
    print(f"first call {1e3 * (time.perf_counter() - t0):.1f} ms")
