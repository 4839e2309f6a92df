"""Run context-parallel attention for real and count what every rank sends.

    torchrun --standalone --nproc-per-node 4 workers/context_parallel.py --method ring \
        --example-seq 16 --heads 4 --kv-heads 2 --head-dim 4 --causal true --balance zigzag --seed 0 \
        --out report.json

Each rank takes the scene's seeded Q, K, V (app.sim.context_parallel.inputs.make_inputs, the
very numbers of the simulation), keeps the tokens the scene's layout gives it
(app.sim.context_parallel.layout: contiguous or zigzag; the hybrid's all-to-all groups and
rings come from the same mesh), and computes its rows of the attention output in float64 with
real torch.distributed communication (gloo on CPU, NCCL with GPUs):

    ring        K/V blocks go round the ring with batch_isend_irecv, the next block in flight
                while the current one is attended to; blocks wholly above the causal diagonal
                are skipped, as Megatron-LM does
    all_gather  one all_gather_into_tensor of the packed K/V, then attention over all of it
    ulysses     all_to_all_single of Q, K and V (sequence → heads), attention on the rank's
                heads over the whole sequence, all_to_all_single of the output back (gloo
                implements all_to_all_single on CPU: checked with torch 2.13, no emulation)
    hybrid      all_to_all_single inside process groups of ``ulysses`` consecutive ranks,
                then the ring over the cp/ulysses groups with isend/irecv

The arithmetic is the workers' own (workers/attention_blocks.py, shared with the training
framework's ring): each block gives a partial output and its logsumexp, and partials merge the
way FlashAttention / Transformer Engine combine them, lse = logaddexp(lse_a, lse_b),
O = e^{lse_a − lse}·O_a + e^{lse_b − lse}·O_b — not the simulation's running max and sum. Rank 0 also computes the whole sequence with torch's
scaled_dot_product_attention (enable_gqa) as a reference.

Counting: every send call records the elements it puts on the wire: an isend its tensor, an
all_to_all_single all but the rank's own slice. An all-gather is one collective call; what it
sends is what a ring all-gather sends (gloo's and NCCL's are rings): (world − 1) × the input.
"""

from __future__ import annotations

from common import add_fields, arguments, finish, gather, start  # noqa: I001 (workers/ on path)

import math

import torch
import torch.distributed as dist
import torch.nn.functional as F

from app.sim.context_parallel.inputs import make_inputs
from app.sim.context_parallel.layout import a2a_groups, ring_groups, tokens_table
from app.sim.context_parallel.params import STAGE_FIELDS as STAGE
from app.sim.context_parallel.params import ContextParallelParams
from workers.attention_blocks import merge, partial, skip

ALL_GATHER = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor

SUITE = (
    {"method": "ring", "balance": "none", "causal": True},
    {"method": "ring", "balance": "zigzag", "causal": True},
    {"method": "ring", "balance": "none", "causal": False},
    {"method": "all_gather", "balance": "zigzag", "causal": True},
    {"method": "ulysses", "balance": "none", "causal": True},
    {"method": "hybrid", "balance": "zigzag", "causal": True, "ulysses": 2},
)
"""--suite: every method in one job (the tests use it; hybrid needs 4 ranks or more)."""


class Tally:
    """What this rank puts on the wire, counted at the calls (and which ring steps it
    computed)."""

    def __init__(self) -> None:
        self.elements = 0
        self.calls: list[dict] = []
        self.computed_steps: list[int] = []     # ring steps whose block was attended to

    def add(self, op: str, elements: int) -> None:
        self.elements += elements
        self.calls.append({"op": op, "elements": elements})


# --- the methods ------------------------------------------------------------------------------

def ring_attention(q, kv, q_pos, ring: list[int], positions, causal, group, tally: Tally):
    """q (nq, h, d) stays; kv (2, nk, h_kv, d) travels round ``ring`` (global ranks), the next
    block received while the current one is attended to. ``positions(i)`` are the key positions
    of the block that started at ring member i."""
    me = ring.index(dist.get_rank())
    size = len(ring)
    out = torch.zeros_like(q)
    lse = torch.full(q.shape[:2], -math.inf, dtype=q.dtype, device=q.device)
    for s in range(size):
        pending, incoming = [], None
        if s < size - 1:
            incoming = torch.empty_like(kv)
            ops = [dist.P2POp(dist.isend, kv, ring[(me + 1) % size]),
                   dist.P2POp(dist.irecv, incoming, ring[(me - 1) % size])]
            tally.add("isend", kv.numel())
            pending = dist.batch_isend_irecv(ops)
        k_pos = positions((me - s) % size)
        if not skip(q_pos, k_pos, causal):
            out_b, lse_b = partial(q, kv[0], kv[1], q_pos, k_pos, group, causal)
            out, lse = merge(out, lse, out_b, lse_b)
            tally.computed_steps.append(s)
        for req in pending:
            req.wait()
        if incoming is not None:
            kv = incoming
    return out


def seq_to_heads(x, world: int, group, tally: Tally):
    """all_to_all_single: my n tokens × all heads → the group's tokens × my heads/world."""
    n, h, d = x.shape
    send = x.reshape(n, world, h // world, d).permute(1, 0, 2, 3).contiguous()  # (dst, n, h/w, d)
    recv = torch.empty_like(send)                                                # (src, n, h/w, d)
    dist.all_to_all_single(recv, send, group=group)
    tally.add("all_to_all_single", send.numel() * (world - 1) // world)
    return recv.reshape(world * n, h // world, d)


def heads_to_seq(y, world: int, group, tally: Tally):
    """The way back: the group's tokens × my heads → my tokens × every head."""
    wn, hw, d = y.shape
    n = wn // world
    send = y.reshape(world, n, hw, d).contiguous()                 # (token owner, n, h/w, d)
    recv = torch.empty_like(send)                                  # (head owner, n, h/w, d)
    dist.all_to_all_single(recv, send, group=group)
    tally.add("all_to_all_single", send.numel() * (world - 1) // world)
    return recv.permute(1, 0, 2, 3).reshape(n, world * hw, d)


def run(cfg: dict, device) -> dict:
    rank, world = dist.get_rank(), dist.get_world_size()
    p = ContextParallelParams(cp=world, **cfg)           # the scene's own checks and messages
    q, k, v = (torch.tensor(a, dtype=torch.float64, device=device)
               for a in make_inputs(p.example_tokens, p.heads, p.kv_heads, p.head_dim, p.seed))
    table = torch.tensor(tokens_table(p.example_tokens, world, p.balance), device=device)  # (cp, n)
    mine = table[rank]
    group = p.heads // p.kv_heads
    tally = Tally()
    if p.method == "ring":
        kv = torch.stack([k[mine], v[mine]]).contiguous()
        out = ring_attention(q[mine], kv, mine, list(range(world)), lambda i: table[i],
                             p.causal, group, tally)
    elif p.method == "all_gather":
        kv = torch.stack([k[mine], v[mine]]).contiguous()               # (2, n, h_kv, d)
        everything = torch.empty((world * 2, *kv.shape[1:]), dtype=kv.dtype, device=device)
        ALL_GATHER(everything, kv)                                      # concatenated on dim 0
        everything = everything.view(world, *kv.shape)                  # (rank, K|V, n, h_kv, d)
        tally.add("all_gather", (world - 1) * kv.numel())
        k_all = everything[:, 0].reshape(-1, *kv.shape[2:])             # blocks in rank order
        v_all = everything[:, 1].reshape(-1, *kv.shape[2:])
        out, _ = partial(q[mine], k_all, v_all, mine, table.reshape(-1), group, p.causal)
    else:
        u = world if p.method == "ulysses" else p.ulysses
        a2a = _groups(a2a_groups(world, u))
        rings = ring_groups(world, u)
        my_a2a = next(g for g in a2a_groups(world, u) if rank in g)
        my_ring = next(list(r) for r in rings if rank in r)
        pg = a2a[my_a2a] if u > 1 else None
        if u > 1:
            ql, kl, vl = (seq_to_heads(x[mine].contiguous(), u, pg, tally) for x in (q, k, v))
        else:
            ql, kl, vl = q[mine], k[mine], v[mine]

        def group_positions(i: int):           # the tokens of ring member i's a2a group
            member = my_ring[i]
            return table[list(next(g for g in a2a_groups(world, u) if member in g))].reshape(-1)

        q_pos = group_positions(my_ring.index(rank))
        kv = torch.stack([kl, vl]).contiguous()
        if len(my_ring) > 1:
            part = ring_attention(ql, kv, q_pos, my_ring, group_positions, p.causal, group, tally)
        else:
            part, _ = partial(ql, kl, vl, q_pos, q_pos, group, p.causal)
        out = heads_to_seq(part, u, pg, tally) if u > 1 else part
    return {"rank": rank, "tokens": mine.tolist(), "output": out.cpu().tolist(),
            "elements_sent": tally.elements, "calls": tally.calls,
            "computed_steps": tally.computed_steps}


_GROUPS: dict = {}


def _groups(groups: list[tuple[int, ...]]) -> dict:
    """Process groups for ``groups``, made once: every rank must create every group, in the
    same order, whether or not it belongs to it."""
    out = {}
    for g in groups:
        if g not in _GROUPS:
            _GROUPS[g] = dist.new_group(list(g))
        out[g] = _GROUPS[g]
    return out


def reference(cfg: dict, world: int, device) -> list:
    """torch's own attention on the whole sequence (rank 0)."""
    p = ContextParallelParams(cp=world, **cfg)
    q, k, v = (torch.tensor(a, dtype=torch.float64, device=device).transpose(0, 1)[None]
               for a in make_inputs(p.example_tokens, p.heads, p.kv_heads, p.head_dim, p.seed))
    out = F.scaled_dot_product_attention(q, k, v, is_causal=p.causal, enable_gqa=True)
    return out[0].transpose(0, 1).cpu().tolist()                        # (seq, heads, d)


def parser():
    """The command line: the worked example's fields (STAGE_FIELDS of
    app.sim.context_parallel.params, from the params model; cp is the world size) and --suite."""
    out = arguments(__doc__.splitlines()[0])
    add_fields(out, ContextParallelParams, STAGE)
    out.add_argument("--suite", action="store_true",
                     help="run every method of SUITE on this job's sizes, the report lists "
                          "them under 'suite' (the tests use this)")
    return out


def main() -> None:
    args = parser().parse_args()
    rank, world, device, backend = start(args)
    base = {name: getattr(args, name) for name in STAGE}
    configs = [{**base, **c} for c in SUITE if c["method"] != "hybrid" or
               (world % c["ulysses"] == 0 and world > c["ulysses"])] if args.suite else [base]
    runs = []
    for cfg in configs:
        results = gather(run(cfg, device), rank, world)
        if rank == 0:
            runs.append({**{k: cfg[k] for k in STAGE}, "world": world, "ranks": results,
                         "reference": reference(cfg, world, device)})
    report = None
    if rank == 0:
        report = {"backend": backend, **runs[0]}
        if args.suite:
            report["suite"] = runs
    finish(report, rank, args.out)


if __name__ == "__main__":
    main()
