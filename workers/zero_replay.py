"""Hand-written data parallelism on torch.distributed, counting every byte a rank sends.

Each algorithm of :mod:`app.sim.data_parallel.training` runs here with real point-to-point sends: the ring
reduce-scatter, all-gather, all-reduce, broadcast and reduce schedules of chapter 2
(``app.sim.collectives.schedules.build``) replayed with ``isend``/``irecv``
(``workers/collective.replay``), plus DataParallel's scatter and gather as direct sends to and
from rank 0. :class:`ByteCounter` wraps ``torch.distributed``'s send calls and adds up the bytes
of every tensor a rank hands to them, so the report holds what was sent, not what should be.
Gradients come from torch's autograd; updates from ``torch.optim.Adam`` on each rank's shard.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn

from collective import replay  # noqa: I001 - workers/ is on the path
from app.sim.collectives.schedules import build
from app.sim.data_parallel.sharding import units as make_units
from app.sim.tiny_mlp import BETA1, BETA2, EPS, LR, TinyMLP


class ByteCounter:
    """Counts the bytes this rank sends: every ``isend`` in ``dist.batch_isend_irecv`` (how the
    schedule replay sends) and every :func:`send` (DataParallel's scatter and gather)."""

    active: ByteCounter | None = None

    def __init__(self):
        self.bytes = 0
        self._batch = dist.batch_isend_irecv

    def __enter__(self):
        def batch(ops):
            self.bytes += sum(op.tensor.numel() * op.tensor.element_size() for op in ops
                              if op.op is dist.isend)
            return self._batch(ops)

        dist.batch_isend_irecv = batch
        ByteCounter.active = self
        return self

    def __exit__(self, *exc):
        dist.batch_isend_irecv = self._batch
        ByteCounter.active = None


def send(tensor: torch.Tensor, dst: int) -> None:
    if ByteCounter.active is not None:
        ByteCounter.active.bytes += tensor.numel() * tensor.element_size()
    dist.isend(tensor, dst).wait()


def module(model: TinyMLP, flat: torch.Tensor) -> nn.Sequential:
    """The tiny MLP as torch modules (float64) holding ``flat``'s values."""
    layers: list[nn.Module] = []
    for l in range(model.layers):
        layers.append(nn.Linear(model.width, model.width, dtype=torch.float64))
        if l < model.layers - 1:
            layers.append(nn.Tanh())
    net = nn.Sequential(*layers)
    with torch.no_grad():
        torch.nn.utils.vector_to_parameters(flat.clone(), net.parameters())
    return net


def flat_params(net: nn.Module) -> torch.Tensor:
    return torch.nn.utils.parameters_to_vector([p.detach() for p in net.parameters()])


def local_grads(model, flat, x, y) -> tuple[float, torch.Tensor]:
    """This rank's loss and gradient of its own micro-batch (autograd)."""
    net = module(model, flat)
    loss = ((net(x) - y) ** 2).mean()
    loss.backward()
    return loss.item(), torch.cat([p.grad.reshape(-1) for p in net.parameters()])


def _ring(op: str, world: int, count: int, rank: int, x: torch.Tensor,
          root: int = 0) -> torch.Tensor:
    """Replay a chapter-2 ring schedule; returns this rank's work buffer at the end."""
    if world == 1:
        return x.clone()
    history = replay(build(op, "ring", world, count, root), rank, x)
    return torch.tensor(history[-1], dtype=x.dtype)


def adam(size: int) -> tuple[torch.Tensor, torch.optim.Adam]:
    shard = torch.zeros(size, dtype=torch.float64, requires_grad=True)
    return shard, torch.optim.Adam([shard], lr=LR, betas=(BETA1, BETA2), eps=EPS, foreach=False)


def step_zero(stage, model, state, x, y, rank, world):
    """One step of ZeRO stage 0–3 (``zero0`` … ``zero3``) on padded per-layer units."""
    units = make_units((model.unit_size,) * model.layers, world)
    flat = state["flat"]
    if stage == 3:                       # parameters live as shards: gather for the forward …
        flat = torch.cat([_ring("all_gather", world, u.padded, rank,
                                state["shards"][u.index].detach())[:u.numel] for u in units])
        with torch.no_grad():
            loss = ((module(model, flat)(x) - y) ** 2).mean().item()
        flat = torch.cat([_ring("all_gather", world, u.padded, rank,   # … and for the backward
                                state["shards"][u.index].detach())[:u.numel] for u in units])
    loss_b, grads = local_grads(model, flat, x, y)
    loss = loss_b if stage < 3 else loss
    grads = grads / world
    new_flat = []
    for u in units:
        padded = torch.zeros(u.padded, dtype=torch.float64)
        padded[:u.numel] = grads[u.start:u.start + u.numel]
        reduced = _ring("reduce_scatter", world, u.padded, rank, padded)
        mine = reduced[rank * u.shard:(rank + 1) * u.shard]
        shard, optimizer = state["optim"][u.index]
        if stage == 0:                   # DDP: the all-reduce's second half, Adam on everything
            mean = _ring("all_gather", world, u.padded, rank, mine)
            full, full_opt = state["full_optim"][u.index]
            full.grad = mean[:u.numel].clone()
            full_opt.step()
            new_flat.append(full.detach().clone())
            continue
        shard.grad = mine.clone()        # the shard holds this rank's master copy
        optimizer.step()
        if stage == 3:
            state["shards"][u.index] = shard
        else:                            # share the update: all-gather the new parameters
            new_flat.append(_ring("all_gather", world, u.padded, rank,
                                  shard.detach().clone())[:u.numel])
    if stage == 3:
        return loss
    state["flat"] = torch.cat(new_flat)
    return loss


def init_zero(stage, model, flat, rank, world) -> dict:
    units = make_units((model.unit_size,) * model.layers, world)
    state = {"flat": flat.clone(), "optim": {}, "full_optim": {}, "shards": {}}
    for u in units:
        shard, optimizer = adam(u.shard)
        padded = torch.zeros(u.padded, dtype=torch.float64)
        padded[:u.numel] = flat[u.start:u.start + u.numel]
        with torch.no_grad():
            shard.copy_(padded[rank * u.shard:(rank + 1) * u.shard])
        state["optim"][u.index] = (shard, optimizer)
        state["shards"][u.index] = shard
        if stage == 0:
            full, full_opt = adam(u.numel)
            with torch.no_grad():
                full.copy_(flat[u.start:u.start + u.numel])
            state["full_optim"][u.index] = (full, full_opt)
    return state


def final_zero(stage, model, state, rank, world) -> torch.Tensor:
    """The full parameters (ZeRO-3 gathers its shards once more, outside the counted steps)."""
    if stage < 3:
        return state["flat"]
    units = make_units((model.unit_size,) * model.layers, world)
    return torch.cat([_ring("all_gather", world, u.padded, rank,
                            state["shards"][u.index].detach())[:u.numel] for u in units])


def step_dp(model, state, x_all, y_all, rank, world, micro_batch):
    """torch.nn.DataParallel's data flow with rank 0 as device 0."""
    mine = state["flat"] if rank == 0 else torch.zeros(model.param_count, dtype=torch.float64)
    flat = _ring("broadcast", world, model.param_count, rank, mine)      # replicate
    x = _scatter(x_all, rank, world, micro_batch, model.width)
    net = module(model, flat)
    out = net(x)
    outs = _gather(out.detach(), rank, world)
    loss = 0.0
    if rank == 0:
        everything = torch.cat(outs).requires_grad_(True)
        full_loss = ((everything - y_all.reshape(-1, model.width)) ** 2).mean()
        full_loss.backward()
        loss = full_loss.item()
        grad_out = everything.grad
    else:
        grad_out = None
    grad_mine = _scatter(grad_out, rank, world, micro_batch, model.width)
    out.backward(grad_mine)
    grads = torch.cat([p.grad.reshape(-1) for p in net.parameters()])
    total = _ring("reduce", world, model.param_count, rank, grads)
    if rank == 0:
        param, optimizer = state["optim"]
        param.grad = total
        optimizer.step()
        state["flat"] = param.detach().clone()
    return loss


def _scatter(full, rank, world, rows, width):
    """Rank 0 sends rank r its ``rows`` rows; returns this rank's part."""
    if rank == 0:
        pieces = full.reshape(world, rows, width)
        for r in range(1, world):
            send(pieces[r].contiguous(), r)
        return pieces[0].clone()
    mine = torch.empty(rows, width, dtype=torch.float64)
    dist.irecv(mine, 0).wait()
    return mine


def _gather(mine, rank, world):
    if rank == 0:
        parts = [mine]
        for r in range(1, world):
            part = torch.empty_like(mine)
            dist.irecv(part, r).wait()
            parts.append(part)
        return parts
    send(mine.contiguous(), 0)
    return None
