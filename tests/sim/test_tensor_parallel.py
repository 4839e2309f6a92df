"""The tensor-parallel blocks against references that know nothing about sharding: plain numpy
written out here for the forward passes and the linear layers' gradients, torch's autograd for
the gradients of the MLP, attention and cross-entropy, and a table of the collectives Megatron-LM
calls (Shoeybi et al. 2019 §3, Korthikanti et al. 2022 §4.2.2)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.sim.tensor_parallel.simulate import simulate
from app.sim.tensor_parallel.inputs import PRIMARY_WEIGHT, make_inputs

AT_SCALE = dict(preset="gpt3-175b", seq=2048, micro_batch=1, alpha_us=5.0, intra_node_gbs=300.0,
                inter_node_gbs=50.0, gpus_per_node=8, gpu_tflops=160.0)
BLOCKS = ("column", "row", "mlp", "attention", "embedding")
TPS = (1, 2, 4, 8)


def params(block, tp, sp=False, tokens=8, hidden=16, ffn=32, heads=8, vocab=32, seed=0):
    return SimpleNamespace(block=block, tp=tp, sequence_parallel=sp, tokens=tokens, hidden=hidden,
                           ffn=ffn, heads=heads, vocab=vocab, seed=seed, **AT_SCALE)


# --- plain numpy forward references -----------------------------------------------------------

def np_layer_norm(x, g, b):
    mu = x.mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + 1e-5) * g + b


def np_gelu(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def np_attention(x, w_qkv, w_o, heads):
    n, h = x.shape
    d = h // heads
    out = np.zeros((n, h))
    for a in range(heads):
        cols = x @ w_qkv[:, a * 3 * d:(a + 1) * 3 * d]            # Megatron's per-head layout
        q, k, v = cols[:, :d], cols[:, d:2 * d], cols[:, 2 * d:]
        s = q @ k.T / math.sqrt(d)
        s[np.triu_indices(n, 1)] = -np.inf
        p = np.exp(s - s.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        out[:, a * d:(a + 1) * d] = p @ v
    return out @ w_o


def forward_reference(inp, heads):
    w = inp.weights
    if inp.block in ("column", "row"):
        return inp.x @ w["W"]
    if inp.block == "embedding":
        return w["E"][inp.ids]
    norm = np_layer_norm(inp.x, w["gamma"], w["beta"])
    core = (np_gelu(norm @ w["A"]) @ w["B"] if inp.block == "mlp"
            else np_attention(norm, w["W_qkv"], w["W_o"], heads))
    return inp.x + inp.mask * core


@pytest.mark.parametrize("sp", [False, True])
@pytest.mark.parametrize("tp", TPS)
@pytest.mark.parametrize("block", BLOCKS)
def test_forward_equals_unsharded_numpy(block, tp, sp):
    p = params(block, tp, sp)
    trace = simulate(p)
    expected = forward_reference(trace.inputs, p.heads)
    np.testing.assert_allclose(trace.result.output.values[0], expected, rtol=1e-12, atol=1e-12)
    assert trace.max_abs_error < 1e-12


@pytest.mark.parametrize("tp", TPS)
@pytest.mark.parametrize("sp", [False, True])
@pytest.mark.parametrize("block", ["column", "row"])
def test_linear_gradients_closed_form(block, tp, sp):
    """Y = XW: dW = Xᵀ dY and dX = dY Wᵀ, exactly (integer inputs)."""
    trace = simulate(params(block, tp, sp))
    inp = trace.inputs
    np.testing.assert_array_equal(trace.result.grads["W"], inp.x.T @ inp.dy)
    np.testing.assert_array_equal(trace.result.input_grad, inp.dy @ inp.weights["W"].T)
    assert trace.max_abs_error == 0          # small integers: every sum is exact


@pytest.mark.parametrize("tp,tokens,hidden,ffn", [(1, 3, 5, 7), (2, 5, 3, 6), (4, 7, 9, 12),
                                                  (8, 1, 1, 8), (8, 9, 11, 24)])
@pytest.mark.parametrize("block", ["column", "row", "mlp"])
def test_odd_sizes(block, tp, tokens, hidden, ffn):
    """Sizes that are not powers of two: only ffn must divide by tp (no sequence parallelism)."""
    p = params(block, tp, tokens=tokens, hidden=hidden, ffn=ffn)
    trace = simulate(p)
    np.testing.assert_allclose(trace.result.output.values[0],
                               forward_reference(trace.inputs, p.heads), atol=1e-12)


SPLIT_AXIS = {"A": 1, "W_qkv": 1, "B": 0, "W_o": 0, "E": 0, "gamma": None, "beta": None}


def torch_gradients(inp, heads):
    """Weight and input gradients from torch's autograd on the whole, unsharded block."""
    torch = pytest.importorskip("torch")
    import torch.nn.functional as F
    w = {k: torch.tensor(v, requires_grad=True) for k, v in inp.weights.items()}
    x = torch.tensor(inp.x, requires_grad=True)
    if inp.block == "embedding":
        e = w["E"]
        hidden = e[torch.tensor(inp.ids)]
        F.cross_entropy(hidden @ e.T, torch.tensor(inp.targets)).backward()
        return {k: v.grad.numpy() for k, v in w.items()}, None
    norm = F.layer_norm(x, (x.shape[1],), w["gamma"], w["beta"], eps=1e-5)
    if inp.block == "mlp":
        core = F.gelu(norm @ w["A"], approximate="tanh") @ w["B"]
    else:
        n, h = x.shape
        qkv = (norm @ w["W_qkv"]).reshape(n, heads, 3, h // heads)
        q, k, v = (qkv[:, :, i].transpose(0, 1) for i in range(3))
        context = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        core = context.transpose(0, 1).reshape(n, h) @ w["W_o"]
    (x + torch.tensor(inp.mask) * core).backward(torch.tensor(inp.dy))
    return {k: v.grad.numpy() for k, v in w.items()}, x.grad.numpy()


@pytest.mark.parametrize("sp", [False, True])
@pytest.mark.parametrize("tp", TPS)
@pytest.mark.parametrize("block", ["mlp", "attention", "embedding"])
def test_gradients_equal_torch_autograd(block, tp, sp):
    p = params(block, tp, sp)
    trace = simulate(p)
    grads, input_grad = torch_gradients(trace.inputs, p.heads)
    for name, expected in grads.items():
        np.testing.assert_allclose(trace.result.grads[name], expected, rtol=1e-9, atol=1e-12,
                                   err_msg=name)
        # each rank's shard is its slice of the whole gradient (γ, β: all of it)
        axis = SPLIT_AXIS[name]
        for rank, shard in enumerate(trace.result.shard_grads):
            want = expected if axis is None else np.split(expected, tp, axis=axis)[rank]
            np.testing.assert_allclose(shard[name], want, rtol=1e-9, atol=1e-12)
    if input_grad is not None:
        np.testing.assert_allclose(trace.result.input_grad, input_grad, rtol=1e-9, atol=1e-12)
    if block == "embedding":
        torch = pytest.importorskip("torch")
        import torch.nn.functional as F
        e = torch.tensor(trace.inputs.weights["E"])
        loss = F.cross_entropy(e[trace.inputs.ids] @ e.T, torch.tensor(trace.inputs.targets))
        assert float(trace.result.extras["loss"]) == pytest.approx(float(loss), rel=1e-12)


EXPECTED_COMM = {
    # (block, sp): [(op, pass, elements as a function of n, h, f)]
    ("column", False): [("all_gather", "forward", "nf"), ("all_reduce", "backward", "nh")],
    ("column", True): [("all_gather", "forward", "nh"), ("all_gather", "backward", "nh"),
                       ("reduce_scatter", "backward", "nh")],
    ("row", False): [("all_reduce", "forward", "nh"), ("all_gather", "backward", "nf")],
    ("row", True): [("reduce_scatter", "forward", "nh"), ("all_gather", "backward", "nh"),
                    ("all_gather", "backward", "nf")],
    ("mlp", False): [("all_reduce", "forward", "nh"), ("all_reduce", "backward", "nh")],
    ("mlp", True): [("all_gather", "forward", "nh"), ("reduce_scatter", "forward", "nh"),
                    ("all_gather", "backward", "nh"), ("all_gather", "backward", "nh"),
                    ("reduce_scatter", "backward", "nh"), ("all_reduce", "backward", "2h")],
    ("embedding", False): [("all_reduce", "forward", "nh"), ("all_reduce", "forward", "n"),
                           ("all_reduce", "forward", "n"), ("all_reduce", "forward", "n"),
                           ("all_reduce", "backward", "nh")],
    ("embedding", True): [("reduce_scatter", "forward", "nh"), ("all_gather", "forward", "nh"),
                          ("all_reduce", "forward", "n"), ("all_reduce", "forward", "n"),
                          ("all_reduce", "forward", "n"), ("all_gather", "backward", "nh"),
                          ("reduce_scatter", "backward", "nh"), ("all_gather", "backward", "nh")],
}
EXPECTED_COMM[("attention", False)] = EXPECTED_COMM[("mlp", False)]
EXPECTED_COMM[("attention", True)] = EXPECTED_COMM[("mlp", True)]


@pytest.mark.parametrize("sp", [False, True])
@pytest.mark.parametrize("tp", TPS)
@pytest.mark.parametrize("block", BLOCKS)
def test_collectives_are_megatrons(block, tp, sp):
    p = params(block, tp, sp, tokens=8, hidden=16, ffn=32)
    size = {"nh": 8 * 16, "nf": 8 * 32, "n": 8, "2h": 32}
    got = [(c.op, c.pass_, c.elements) for c in simulate(p).comm]
    expected = ([] if tp == 1 else
                [(op, pass_, size[e]) for op, pass_, e in EXPECTED_COMM[(block, sp)]])
    assert got == expected
    maxes = [c for c in simulate(p).comm if c.reduce_op == "max"]
    assert len(maxes) == (1 if block == "embedding" and tp > 1 else 0)


@pytest.mark.parametrize("tp", [1, 2, 4])
@pytest.mark.parametrize("block", BLOCKS)
def test_shards_are_the_weight_split_megatron_style(block, tp):
    trace = simulate(params(block, tp))
    full = trace.inputs.weights[PRIMARY_WEIGHT[block]]
    axis = 1 if block in ("column", "mlp", "attention") else 0
    for rank, shard in enumerate(trace.result.shard_weights):
        np.testing.assert_array_equal(shard[PRIMARY_WEIGHT[block]],
                                      np.split(full, tp, axis=axis)[rank])


@pytest.mark.parametrize("tp", [2, 4, 8])
def test_row_outputs_are_partial_sums(tp):
    trace = simulate(params("row", tp))
    parts = trace.result.shard_outputs
    np.testing.assert_array_equal(np.sum(parts, axis=0), trace.result.output.values[0])
    x, w = trace.inputs.x, trace.inputs.weights["W"]
    k = x.shape[1] // tp
    np.testing.assert_array_equal(parts[1], x[:, k:2 * k] @ w[k:2 * k])


@pytest.mark.parametrize("tp", [2, 4])
def test_column_outputs_are_column_blocks(tp):
    trace = simulate(params("column", tp))
    np.testing.assert_array_equal(np.concatenate(trace.result.shard_outputs, axis=1),
                                  trace.inputs.x @ trace.inputs.weights["W"])


def test_sequence_parallel_ranks_hold_their_rows():
    trace = simulate(params("mlp", 4, sp=True))
    results = trace.result.shard_results
    assert all(r.shape == (2, 16) for r in results)
    np.testing.assert_allclose(np.concatenate(results), trace.reference.output, atol=1e-12)


def test_embedding_partial_lookups_hold_only_owned_tokens():
    trace = simulate(params("embedding", 4))
    ids, per = trace.inputs.ids, 32 // 4
    for rank, partial in enumerate(trace.result.shard_outputs):
        owned = (ids // per) == rank
        assert np.all(partial[~owned] == 0)
        np.testing.assert_array_equal(partial[owned],
                                      trace.inputs.weights["E"][ids[owned]])


def test_every_step_has_a_caption_with_numbers():
    for block in BLOCKS:
        for step in simulate(params(block, 2, sp=True)).steps:
            assert step.caption and any(ch.isdigit() for ch in step.caption), step.title


@pytest.mark.parametrize("block", BLOCKS)
def test_inputs_are_seeded(block):
    a = make_inputs(block, 4, 8, 16, 4, 16, seed=7)
    b = make_inputs(block, 4, 8, 16, 4, 16, seed=7)
    c = make_inputs(block, 4, 8, 16, 4, 16, seed=8)
    np.testing.assert_array_equal(a.x, b.x)
    assert not all(np.array_equal(a.weights[k], c.weights[k]) for k in a.weights)


@settings(max_examples=25, deadline=None)
@given(block=st.sampled_from(BLOCKS), tp=st.sampled_from(TPS), sp=st.booleans(),
       seed=st.integers(0, 2**31 - 1), rows=st.integers(1, 3), mult=st.integers(1, 3))
def test_any_seed_and_size_matches_the_unsharded_block(block, tp, sp, seed, rows, mult):
    p = params(block, tp, sp, tokens=tp * rows, hidden=8 * mult, ffn=tp * 3 * mult,
               heads=tp, vocab=tp * 5, seed=seed)
    trace = simulate(p)
    assert trace.max_abs_error < 1e-9
    assert np.isfinite(trace.result.output.values[0]).all()


def test_largest_accepted_work_runs_and_stays_exact():
    """The params model caps every matrix at 16,384 numbers; the biggest accepted runs still
    match the unsharded computation (their time is measured by make bench)."""
    for p in (params("mlp", 16, sp=True, tokens=128, hidden=128, ffn=128),
              params("attention", 16, sp=True, tokens=32, hidden=64, heads=16)):
        trace = simulate(p)
        assert trace.max_abs_error < 1e-9
        assert np.isfinite(trace.result.output.values[0]).all()
