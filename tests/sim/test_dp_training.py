"""The tiny model and its data-parallel training, checked against independent references:
finite differences for the gradients, the chapter-2 schedules executed element by element for
the ring sums, and one process training on the whole batch for the result."""

from __future__ import annotations

import numpy as np
import pytest

from app.sim.data_parallel import sharding
from app.sim.collectives.schedules import build
from app.sim.collectives.simulate import execute
from app.sim.data_parallel.training import ALGORITHMS, sent_per_step, too_much, train
from app.sim.tiny_mlp import (BETA1, BETA2, EPS, LR, TinyMLP, adam_init, adam_update, batch,
                              forward_backward, init_params, unflatten)


def loss_of(model, flat, x, y):
    """Plain forward pass of one rank, written out layer by layer."""
    h = x
    for l, (w, b) in enumerate(unflatten(model, flat)):
        h = h @ w.T + b
        if l < model.layers - 1:
            h = np.tanh(h)
    return ((h - y) ** 2).mean()


@pytest.mark.parametrize("layers,width,micro_batch", [(1, 1, 1), (2, 3, 2), (3, 2, 5), (4, 5, 3)])
def test_gradients_match_finite_differences(layers, width, micro_batch):
    model = TinyMLP(layers, width)
    flat = init_params(model, seed=3)
    x, y = batch(model, seed=3, step=0, dp=2, micro_batch=micro_batch)
    losses, grads = forward_backward(model, flat, x, y)
    for r in range(2):
        assert losses[r] == pytest.approx(loss_of(model, flat, x[r], y[r]), rel=1e-12)
        numeric = np.empty_like(flat)
        for i in range(flat.size):
            step = np.zeros_like(flat)
            step[i] = 1e-6
            numeric[i] = (loss_of(model, flat + step, x[r], y[r])
                          - loss_of(model, flat - step, x[r], y[r])) / 2e-6
        np.testing.assert_allclose(grads[r], numeric, rtol=1e-6, atol=1e-9)


def test_adam_is_the_textbook_update():
    """Kingma & Ba's Adam with bias correction, step by step."""
    rng = np.random.default_rng(0)
    p = rng.standard_normal(7)
    state = adam_init(7)
    m = v = np.zeros(7)
    reference = p.copy()
    for t in range(1, 6):
        g = rng.standard_normal(7)
        p, state = adam_update(p, g, state)
        m = BETA1 * m + (1 - BETA1) * g
        v = BETA2 * v + (1 - BETA2) * g * g
        m_hat, v_hat = m / (1 - BETA1 ** t), v / (1 - BETA2 ** t)
        reference = reference - LR * m_hat / (np.sqrt(v_hat) + EPS)
        np.testing.assert_allclose(p, reference, rtol=1e-13, atol=1e-15)


def test_adam_matches_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    p = torch.tensor(rng.standard_normal(5), requires_grad=True)
    opt = torch.optim.Adam([p], lr=LR, betas=(BETA1, BETA2), eps=EPS)
    mine, state = p.detach().numpy().copy(), adam_init(5)
    for _ in range(4):
        g = rng.standard_normal(5)
        p.grad = torch.tensor(g)
        opt.step()
        mine, state = adam_update(mine, g, state)
    np.testing.assert_allclose(mine, p.detach().numpy(), rtol=1e-12)


# --- padding and the ring sums ---------------------------------------------------------------

@pytest.mark.parametrize("numel,dp,shard,padding", [
    (6, 4, 2, 2), (6, 3, 2, 0), (12, 5, 3, 3), (72, 7, 11, 5), (6, 1, 6, 0), (6, 8, 1, 2),
    (6, 1024, 1, 1018), (1, 2, 1, 1)])
def test_units_pad_to_a_multiple_of_dp(numel, dp, shard, padding):
    (unit,) = sharding.units((numel,), dp)
    assert (unit.shard, unit.padding, unit.padded) == (shard, padding, shard * dp)
    real = [int(unit.real_in_shard(r)) for r in range(dp)]
    assert sum(real) == numel and all(0 <= k <= shard for k in real)
    assert real == sorted(real, reverse=True)          # padding sits at the end


@pytest.mark.parametrize("dp", [2, 3, 4, 5, 8])
@pytest.mark.parametrize("shard", [1, 3])
def test_ring_reduce_scatter_is_the_schedule_bit_for_bit(dp, shard):
    rng = np.random.default_rng(dp * 10 + shard)
    g = rng.standard_normal((dp, dp * shard)) * 10.0 ** rng.uniform(-4, 4, (dp, dp * shard))
    values = execute(build("reduce_scatter", "ring", dp, dp * shard), tuple(g))[0][-1]
    expected = np.stack([values[r, r * shard:(r + 1) * shard] for r in range(dp)])
    assert np.array_equal(sharding.ring_reduce_scatter(g), expected)


@pytest.mark.parametrize("dp,count", [(2, 1), (3, 5), (4, 13), (5, 16), (7, 3)])
def test_ring_all_reduce_and_chain_reduce_are_the_schedules(dp, count):
    rng = np.random.default_rng(count)
    g = rng.standard_normal((dp, count)) * 10.0 ** rng.uniform(-4, 4, (dp, count))
    values = execute(build("all_reduce", "ring", dp, count), tuple(g))[0][-1]
    assert all(np.array_equal(values[r], sharding.ring_all_reduce(g)) for r in range(dp))
    for root in range(dp):
        values = execute(build("reduce", "ring", dp, count, root), tuple(g))[0][-1]
        assert np.array_equal(values[root], sharding.chain_reduce(g, root))


@pytest.mark.parametrize("dp,count", [(2, 4), (3, 7), (4, 13), (6, 6), (5, 2)])
def test_sends_are_what_the_schedules_send(dp, count):
    def counted(op, root=0):
        schedule = build(op, "ring", dp, count, root)
        return [sum(m.length for s in schedule.steps for m in s.moves if m.src == r and not m.local)
                for r in range(dp)]
    assert sharding.all_reduce_sends(count, dp).tolist() == counted("all_reduce")
    for root in (0, dp - 1):
        assert sharding.chain_sends(count, dp, root, True).tolist() == counted("reduce", root)
        assert sharding.chain_sends(count, dp, root, False).tolist() == counted("broadcast", root)
    if count % dp == 0:
        unit = sharding.Unit(0, 0, count, dp)
        assert counted("reduce_scatter") == [sharding.sharded_sends(unit)] * dp


# --- training --------------------------------------------------------------------------------

CASES = [(2, 2, 4, 2, 3, 0), (3, 2, 4, 2, 3, 1), (1, 3, 3, 1, 2, 7), (3, 3, 5, 3, 4, 2),
         (2, 5, 1, 4, 2, 4), (2, 2, 7, 1, 5, 9)]


def ddp_buckets_one(model, steps):
    return (((tuple(range(2 * model.layers))),),) * steps


@pytest.mark.parametrize("layers,width,dp,micro_batch,steps,seed", CASES)
def test_zero_stages_agree_bit_for_bit_and_match_one_process(layers, width, dp, micro_batch,
                                                             steps, seed):
    model = TinyMLP(layers, width)
    runs = {a: train(model, a, dp, micro_batch, steps, seed,
                     ddp_buckets_one(model, steps) if a == "ddp" else ()) for a in ALGORITHMS}
    zero = runs["zero0"].final_params
    for stage in (1, 2, 3):
        assert np.array_equal(runs[f"zero{stage}"].final_params, zero)
    for other in ("dp", "ddp"):
        np.testing.assert_allclose(runs[other].final_params, zero, rtol=0, atol=1e-13)
    # reference: one process on the whole global batch, Adam on every parameter
    flat, state = init_params(model, seed), adam_init(model.param_count)
    for k in range(steps):
        x, y = batch(model, seed, k, dp, micro_batch)
        _, grads = forward_backward(model, flat, x.reshape(1, dp * micro_batch, width),
                                    y.reshape(1, dp * micro_batch, width))
        flat, state = adam_update(flat, grads[0], state)
    np.testing.assert_allclose(zero, flat, rtol=0, atol=1e-12)


@pytest.mark.parametrize("layers,width,dp", [(2, 2, 4), (3, 3, 5), (1, 4, 7), (2, 1, 3)])
def test_elements_sent_per_step(layers, width, dp):
    model = TinyMLP(layers, width)
    shard = -(-model.unit_size // dp)
    for stage, factor in ((0, 2), (1, 2), (2, 2), (3, 3)):
        assert sent_per_step(f"zero{stage}", model, dp, 2).tolist() == [factor * layers * (dp - 1) * shard] * dp
    # DataParallel: rank 0 scatters inputs and output gradients and heads the broadcast chain;
    # the others send their outputs and pass the parameters and gradients on
    sends = sent_per_step("dp", model, dp, 2)
    activations = 2 * width
    assert sends[0] == 2 * (dp - 1) * activations + model.param_count
    assert sends[-1] == activations + model.param_count
    assert sends[1:-1].tolist() == [activations + 2 * model.param_count] * (dp - 2)


def test_one_rank_sends_nothing():
    model = TinyMLP(2, 2)
    for algorithm in ALGORITHMS:
        buckets = ddp_buckets_one(model, 2) if algorithm == "ddp" else ()
        assert train(model, algorithm, 1, 3, 2, 0, buckets).sent.sum() == 0


def test_work_bounds_name_the_parameter():
    assert too_much(TinyMLP(2, 2), 4, 2, 3) is None
    assert too_much(TinyMLP(2, 2), 1024, 8, 3)[0] == "micro_batch"
    param, message = too_much(TinyMLP(6, 8), 1024, 1, 10)
    assert param == "dp" and "4,423,680" in message
