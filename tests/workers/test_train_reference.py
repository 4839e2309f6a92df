"""The framework's one-process run — the reference every layout is held to — against an
independent implementation of the same model in plain PyTorch: no workers/train code, no
torch.distributed; torch's own RMSNorm, scaled_dot_product_attention (with enable_gqa),
cross_entropy, AdamW and clip_grad_norm_, the batch as one (B, s) tensor, the experts computed
densely (every expert on every token, weighted by the gates where chosen), the load-balancing
loss from one-hot counts of each sequence's top-k (Switch Transformer eq. 4–6). Only the initial
values and the token stream are shared — they are data (app.sim.train.model, .data). The
load-balancing loss's value is also held to /moe's own definition (app.sim.moe.losses.aux_loss,
numpy) on the plain model's router logits."""

from __future__ import annotations

import pytest

from app.sim.train.data import sequences
from app.sim.train.model import Shape, initial_state
from app.sim.train.params import TrainParams

torch = pytest.importorskip("torch")
F = torch.nn.functional


def plain_loss(params: dict, s: Shape, ids, targets, aux_coeff: float = 0.0,
               router_logits: list | None = None):
    """(mean cross-entropy of the batch (B, seq) through the whole model, the load-balancing
    loss: α · E · Σᵢ fᵢPᵢ of each sequence and MoE layer — fᵢ its top-k assignments to i over
    S·k, Pᵢ its tokens' mean probability of i — averaged over the sequences, summed over the
    layers). ``router_logits`` collects each layer's (B, S, E) logits."""
    aux = 0.0
    x = params["embed"][ids]                                         # (B, S, h)
    B, S, h = x.shape
    d, group = s.head_dim, s.heads // s.kv_heads
    for l in range(s.layers):
        w = {k.split(".", 2)[2]: v for k, v in params.items() if k.startswith(f"layers.{l}.")}
        a = F.rms_norm(x, (h,), w["attn_norm"], eps=1e-6)
        q = (a @ w["wq"]).view(B, S, s.heads, d).transpose(1, 2)        # (B, heads, S, d)
        k = (a @ w["wk"]).view(B, S, s.kv_heads, d).transpose(1, 2)
        v = (a @ w["wv"]).view(B, S, s.kv_heads, d).transpose(1, 2)
        ctx = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=group > 1)
        x = x + ctx.transpose(1, 2).reshape(B, S, s.heads * d) @ w["wo"]
        m = F.rms_norm(x, (h,), w["mlp_norm"], eps=1e-6)
        if s.moe:
            logits = m @ w["router"]
            if router_logits is not None:
                router_logits.append(logits.detach().numpy())
            probs = torch.softmax(logits, dim=-1)                        # (B, S, E)
            top = torch.topk(probs, s.top_k, dim=-1).indices
            counts = F.one_hot(top, s.experts).sum(dim=(1, 2))           # (B, E), no gradient
            f = counts.to(probs.dtype) / (S * s.top_k)
            aux = aux + aux_coeff * s.experts * (f * probs.mean(dim=1)).sum(-1).mean()
            gate = torch.zeros_like(probs).scatter(-1, top, probs.gather(-1, top))
            y = sum(gate[..., e:e + 1] * (F.silu(m @ w["experts.w1"][e]) * (m @ w["experts.w3"][e])
                                          @ w["experts.w2"][e]) for e in range(s.experts))
        else:
            y = (F.silu(m @ w["w1"]) * (m @ w["w3"])) @ w["w2"]
        x = x + y
    logits = F.rms_norm(x, (h,), params["final_norm"], eps=1e-6) @ params["head"]
    return F.cross_entropy(logits.reshape(-1, s.vocab), targets.reshape(-1)), aux


def plain_training(p: TrainParams) -> tuple[list[float], list[float], dict]:
    s = Shape.of(p)
    params = {k: torch.tensor(v, requires_grad=True) for k, v in initial_state(s, p.seed).items()}
    adamw = torch.optim.AdamW(params.values(), lr=p.lr, betas=(0.9, 0.999), eps=1e-8,
                              weight_decay=p.weight_decay)
    losses, aux_losses = [], []
    for step in range(p.steps):
        ids, targets = (torch.from_numpy(a) for a in
                        sequences(p.vocab, p.seq, p.seed, step, range(p.batch)))
        adamw.zero_grad()
        loss, aux = plain_loss(params, s, ids, targets, p.aux_loss_coeff)
        (loss + aux).backward()
        torch.nn.utils.clip_grad_norm_(params.values(), p.clip)
        adamw.step()
        losses.append(loss.item())
        aux_losses.append(float(torch.as_tensor(aux).detach()))
    return losses, aux_losses, {k: v.detach().numpy() for k, v in params.items()}


CASES = [
    pytest.param(dict(experts=1, clip=0.05), id="dense-clipped"),
    pytest.param(dict(experts=4, top_k=2, clip=100.0), id="moe-unclipped"),
    pytest.param(dict(experts=4, top_k=1, heads=4, kv_heads=1, clip=0.3), id="moe-top1-mqa"),
    pytest.param(dict(experts=4, top_k=2, aux_loss_coeff=0.5, clip=100.0), id="moe-aux"),
    pytest.param(dict(experts=8, top_k=3, aux_loss_coeff=0.1, clip=0.3), id="moe-aux-top3-clipped"),
]


@pytest.mark.parametrize("overrides", CASES)
def test_the_reference_is_plain_pytorch(overrides):
    from workers.train import groups, loop
    p = TrainParams(tp=1, pp=1, dp=2, ep=1, microbatches=2, steps=3, layers=2, **overrides)
    run = loop.train(loop.reference_params(p), groups.solo())
    losses, aux_losses, params = plain_training(p)
    for ours, theirs in zip(run.losses, losses):
        assert abs(ours - theirs) <= 1e-12 * abs(theirs), (run.losses, losses)
    for ours, theirs in zip(run.aux_losses, aux_losses):
        assert abs(ours - theirs) <= 1e-12 * abs(theirs) if theirs else ours == 0.0, \
            (run.aux_losses, aux_losses)
    full = loop.assemble(Shape.of(p), [run.shards], 1, 1)
    for name, theirs in params.items():
        worst = abs(full[name] - theirs).max() / abs(theirs).max()
        assert worst <= 1e-10, (name, worst)
    clipped = [n > p.clip for n in run.norms]
    assert all(clipped) if p.clip < 1 else not any(clipped), run.norms   # the table covers both
    assert losses[-1] < losses[0]                                     # the model learns


def test_the_aux_loss_is_the_moe_scenes_definition():
    """Step 0's load-balancing loss, as the reference run adds it, is /moe's aux_loss (numpy:
    α · E · Σᵢ fᵢPᵢ, fᵢ over the T·k assignments) of each sequence's router logits, averaged
    over the sequences and summed over the layers — and a uniform router's value would be α
    per layer, so the number is not trivially that."""
    from app.sim.moe.losses import aux_loss
    from app.sim.moe.router import top_experts
    from workers.train import groups, loop
    p = TrainParams(tp=1, pp=1, dp=2, ep=1, microbatches=2, steps=1, layers=2, experts=4,
                    top_k=2, aux_loss_coeff=0.3)
    run = loop.train(loop.reference_params(p), groups.solo())
    s = Shape.of(p)
    params = {k: torch.tensor(v) for k, v in initial_state(s, p.seed).items()}
    ids, targets = (torch.from_numpy(a) for a in sequences(p.vocab, p.seq, p.seed, 0,
                                                            range(p.batch)))
    logits: list = []
    plain_loss(params, s, ids, targets, p.aux_loss_coeff, logits)
    want = sum(sum(aux_loss(layer[b], top_experts(layer[b], p.top_k), p.aux_loss_coeff)
                   for b in range(p.batch)) / p.batch for layer in logits)
    assert run.aux_losses[0] == pytest.approx(want, rel=1e-12)
    assert abs(want - p.aux_loss_coeff * p.layers) > 1e-6


def test_no_coefficient_no_aux_loss_and_the_same_training():
    """aux_loss_coeff 0 (the default) adds nothing: the losses and parameters are those of a
    run without the option."""
    from workers.train import groups, loop
    base = dict(tp=1, pp=1, dp=1, ep=1, microbatches=2, steps=2, layers=2, experts=4, top_k=2)
    off = loop.train(loop.reference_params(TrainParams(**base)), groups.solo())
    on = loop.train(loop.reference_params(TrainParams(**base, aux_loss_coeff=0.5)),
                    groups.solo())
    assert off.aux_losses == [0.0, 0.0] and all(a > 0 for a in on.aux_losses)
    assert off.losses[0] == on.losses[0]                # the first step's loss is before any update
    assert off.losses[1] != on.losses[1]                # the aux gradient changed the update
