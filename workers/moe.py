"""Run one mixture-of-experts layer for real with expert parallelism, one rank per EP rank.

    torchrun --standalone --nproc-per-node 2 workers/moe.py --tokens 16 --experts 8 \
        --top-k 2 --capacity-factor 1 --drop-policy probs --router softmax_topk --out report.json

Every rank builds the scene's seeded numbers (app.sim.moe.router.make_inputs, the very function
the simulation uses), routes its own T/ep tokens in torch (softmax, a stable sort for the top-k
— torch.topk does not order ties — and Megatron-LM's get_capacity on its own assignments), then
runs Megatron's all-to-all token dispatcher: an all_to_all_single of the per-expert counts so
that every rank can size its buffers, an all_to_all_single of the token vectors with uneven
splits, its own experts, and the combine all_to_all_single back. The losses are reduced over
the ranks. Rank 0 also computes the layer densely in one process and writes everything as JSON;
app/scenes/moe/check.py compares it with the simulation.

gloo implements all_to_all_single with uneven splits on CPU in torch 2.13; should a backend
refuse it, the exchange falls back to isend/irecv pairs (``--p2p`` forces that path).
"""

from __future__ import annotations

import argparse
import math

from common import add_fields, arguments, finish, gather, run_config, start  # noqa: I001 (workers/ on path)

import torch
import torch.distributed as dist

from app.sim.moe.capacity import WEIGHT_GRID
from app.sim.moe.params import MoeParams
from app.sim.moe.router import make_inputs

F = torch.nn.functional


def exchange(send: torch.Tensor, send_splits: list[int], recv_splits: list[int],
             p2p: bool) -> tuple[torch.Tensor, str]:
    """all_to_all_single with uneven splits along dim 0, or the same with isend/irecv."""
    out = send.new_empty((sum(recv_splits), *send.shape[1:]))
    if not p2p:
        try:
            dist.all_to_all_single(out, send.contiguous(), recv_splits, send_splits)
            return out, "all_to_all_single"
        except RuntimeError:
            pass
    rank, world = dist.get_rank(), dist.get_world_size()
    sends = torch.split(send, send_splits)
    recvs = [send.new_empty((n, *send.shape[1:])) for n in recv_splits]
    recvs[rank] = sends[rank].clone()
    ops = [dist.P2POp(dist.isend, sends[peer].contiguous(), peer)
           for peer in range(world) if peer != rank and send_splits[peer]]
    ops += [dist.P2POp(dist.irecv, recvs[peer], peer)
            for peer in range(world) if peer != rank and recv_splits[peer]]
    if ops:
        for request in dist.batch_isend_irecv(ops):
            request.wait()
    return torch.cat(recvs), "isend/irecv"


def expert(x: torch.Tensor, w_in: torch.Tensor, w_out: torch.Tensor) -> torch.Tensor:
    return F.silu(x @ w_in) @ w_out


def route(logits: torch.Tensor, top_k: int, router: str):
    """(probs over all experts, chosen experts (T, k), gate weights (T, k))."""
    probs = torch.softmax(logits, dim=-1)
    chosen = torch.sort(logits, dim=-1, descending=True, stable=True).indices[:, :top_k]
    if router == "softmax_topk":
        weights = probs.gather(1, chosen)
    else:
        weights = torch.softmax(logits.gather(1, chosen), dim=-1)
    return probs, chosen, weights


def keep_mask(chosen, weights, num_experts: int, capacity: int | None, policy: str):
    """(T, k) bool: the assignments each expert keeps of this rank's, at most ``capacity``."""
    tokens, top_k = chosen.shape
    kept = torch.ones(tokens * top_k, dtype=torch.bool)
    if capacity is None:
        return kept.view(tokens, top_k)
    flat_e = chosen.reshape(-1)
    flat_w = torch.round(weights.reshape(-1) * WEIGHT_GRID)
    for e in range(num_experts):
        idx = torch.nonzero(flat_e == e).flatten()           # token order
        if idx.numel() <= capacity:
            continue
        if policy == "probs":                                 # highest weight first, ties earlier
            idx = idx[torch.sort(flat_w[idx], descending=True, stable=True).indices]
        kept[idx[capacity:]] = False
    return kept.view(tokens, top_k)


MODEL_FIELDS = ("tokens", "experts", "top_k", "capacity_factor", "drop_policy", "router",
                "aux_loss_coeff", "z_loss_coeff", "skew", "token_width", "seed")
"""The options that are the MoE scene's parameters (app/sim/moe/params.py)."""


def parser() -> argparse.ArgumentParser:
    """The worker's options: the scene's fields from its params model, and how to exchange."""
    p = arguments(__doc__.splitlines()[0])
    add_fields(p, MoeParams, MODEL_FIELDS)
    p.add_argument("--p2p", action="store_true", help="exchange with isend/irecv")
    return p


def main() -> None:
    parser_ = parser()
    args = parser_.parse_args()
    rank, world, device, backend = start(args, "gloo" if args.backend == "auto" else None)
    T, E, k, h = args.tokens, args.experts, args.top_k, args.token_width
    per_rank, per_ep = T // world, E // world
    inp = make_inputs(T, E, h, args.seed)
    x_all = torch.tensor(inp.x)
    w_in, w_out = torch.tensor(inp.w_in), torch.tensor(inp.w_out)
    first = rank * per_rank
    x = x_all[first:first + per_rank]
    # 1. route this rank's tokens
    logits = x @ torch.tensor(inp.w_router) + args.skew * torch.tensor(inp.bias)
    probs, chosen, weights = route(logits, k, args.router)
    capacity = (None if args.capacity_factor == 0 else
                math.ceil(((per_rank * k) / E) * args.capacity_factor))   # Megatron get_capacity
    kept = keep_mask(chosen, weights, E, capacity, args.drop_policy)
    # 2. losses over all ranks: counts before dropping, summed probabilities, lse²
    counts = torch.bincount(chosen.reshape(-1), minlength=E).to(torch.float64)
    prob_sum = probs.sum(dim=0)
    lse_sq = torch.logsumexp(logits, dim=-1).square().sum().reshape(1)
    for t in (counts, prob_sum, lse_sq):
        dist.all_reduce(t)
    aux = float(torch.sum(prob_sum * counts) * (E * args.aux_loss_coeff / (k * T * T)))
    z = float(lse_sq[0] / T * args.z_loss_coeff)
    # 3. permute kept assignments by expert (token order within), count per expert
    t_idx, slot = torch.nonzero(kept, as_tuple=True)
    e_idx = chosen[t_idx, slot]
    order = torch.sort(e_idx, stable=True).indices
    t_idx, slot, e_idx = t_idx[order], slot[order], e_idx[order]
    per_expert = torch.bincount(e_idx, minlength=E)                      # (E,) rows I send
    # 4. split sizes first: rank j learns how many rows of each of its experts every rank sends
    recv_per_expert = torch.empty(world * per_ep, dtype=per_expert.dtype)
    dist.all_to_all_single(recv_per_expert, per_expert)
    send_splits = per_expert.view(world, per_ep).sum(dim=1).tolist()
    recv_table = recv_per_expert.view(world, per_ep)                     # [src, local expert]
    recv_splits = recv_table.sum(dim=1).tolist()
    # 5. dispatch the token vectors, run my experts, combine back
    received, how = exchange(x[t_idx], send_splits, recv_splits, args.p2p)
    out = torch.empty_like(received)
    row = 0
    for src in range(world):
        for local in range(per_ep):
            n = int(recv_table[src, local])
            e = rank * per_ep + local
            out[row:row + n] = expert(received[row:row + n], w_in[e], w_out[e])
            row += n
    returned, _ = exchange(out, recv_splits, send_splits, args.p2p)
    y = torch.zeros_like(x)
    y.index_add_(0, t_idx, weights[t_idx, slot][:, None] * returned)
    dropped = [[first + int(t), int(chosen[t, s])] for t, s in torch.nonzero(~kept).tolist()]
    mine = {"experts": chosen.tolist(), "weights": weights.tolist(), "kept": kept.tolist(),
            "dropped": dropped, "kept_per_expert": torch.bincount(
                chosen[kept], minlength=E).tolist(), "dispatch_row": send_splits,
            "output": y.tolist(), "rows_computed": int(sum(recv_splits)), "exchange": how}
    everyone = gather(mine, rank, world)
    report = None
    if rank == 0:
        # 6. the dense layer in one process: every expert on every token, masked by the gates
        gate = torch.zeros(T, E, dtype=torch.float64)
        for r, part in enumerate(everyone):
            for i, (es, ws, ks) in enumerate(zip(part["experts"], part["weights"], part["kept"])):
                for e, w, keep in zip(es, ws, ks):
                    if keep:
                        gate[r * per_rank + i, e] += w
        dense = sum(gate[:, e:e + 1] * expert(x_all, w_in[e], w_out[e]) for e in range(E))
        report = {"world": world, "backend": backend, "config": run_config(args),
                  "capacity": capacity, "aux_loss": aux, "z_loss": z,
                  "experts": [e for p in everyone for e in p["experts"]],
                  "weights": [w for p in everyone for w in p["weights"]],
                  "kept": [q for p in everyone for q in p["kept"]],
                  "dropped": [d for p in everyone for d in p["dropped"]],
                  "expert_tokens": torch.tensor([p["kept_per_expert"] for p in everyone]
                                                ).sum(dim=0).tolist(),
                  "dispatch": [p["dispatch_row"] for p in everyone],
                  "output": [y for p in everyone for y in p["output"]],
                  "dense_output": dense.tolist(),
                  "rows_computed": [p["rows_computed"] for p in everyone],
                  "exchange": everyone[0]["exchange"]}
    finish(report, rank, args.out)


if __name__ == "__main__":
    main()
