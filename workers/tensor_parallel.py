"""Run a tensor-parallel block for real, forward and backward, and record every collective.

    torchrun --standalone --nproc-per-node 4 workers/tensor_parallel.py --block mlp \
        --tokens 4 --hidden 8 --ffn 16 --heads 4 --vocab 16 --seed 0 [--sequence-parallel] \
        --out report.json

Each rank takes the block's seeded matrices (app.sim.tensor_parallel.inputs.make_inputs, the same numbers as
the simulation), cuts out its own shard, and runs the block with torch autograd and
Megatron-LM's communication operators written as autograd functions around real
torch.distributed collectives (gloo on CPU, NCCL with GPUs): f and g, the sequence-parallel
all-gather / reduce-scatter pair, the column-parallel linear that all-gathers its input again in
backward, the vocab-parallel embedding and cross-entropy (the operators and the loss are
workers/tp_ops.py, shared with the training framework). Attention uses torch's own
scaled_dot_product_attention, GeLU and LayerNorm torch's own functions: nothing of the
simulation's arithmetic is reused. Every collective call is logged with its pass and size, and
rank 0 writes each rank's output, weight gradients, input gradient and log as JSON, in float64.
"""

from __future__ import annotations


from common import add_fields, arguments, finish, gather, start  # noqa: I001 (workers/ on path)

import torch
import torch.distributed as dist
import torch.nn.functional as F

from app.sim.tensor_parallel.inputs import BLOCKS, make_inputs
from app.sim.tensor_parallel.params import TensorParallelParams
from workers.tp_ops import Conjugate, VocabParallelCrossEntropy, same

# torch 2.13 renamed the single-tensor collectives; the old names still work, with a warning
ALL_GATHER = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
REDUCE_SCATTER = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor

LOG: list[dict] = []
PHASE = {"pass": "forward"}


# --- logged collectives ---------------------------------------------------------------------

def all_reduce(x: torch.Tensor, op: str = "sum") -> torch.Tensor:
    x = x.contiguous().clone()
    LOG.append({"op": "all_reduce", "pass": PHASE["pass"], "elements": x.numel(),
                "reduce_op": op})
    dist.all_reduce(x, op=dist.ReduceOp.MAX if op == "max" else dist.ReduceOp.SUM)
    return x


def all_gather(x: torch.Tensor, dim: int) -> torch.Tensor:
    world = dist.get_world_size()
    x = x.transpose(0, dim).contiguous()                         # gather along dim 0
    out = torch.empty((world * x.shape[0], *x.shape[1:]), dtype=x.dtype, device=x.device)
    LOG.append({"op": "all_gather", "pass": PHASE["pass"], "elements": out.numel(),
                "reduce_op": "sum"})
    ALL_GATHER(out, x)
    return out.transpose(0, dim).contiguous()


def reduce_scatter(x: torch.Tensor, dim: int) -> torch.Tensor:
    world = dist.get_world_size()
    x = x.transpose(0, dim).contiguous()
    out = torch.empty((x.shape[0] // world, *x.shape[1:]), dtype=x.dtype, device=x.device)
    LOG.append({"op": "reduce_scatter", "pass": PHASE["pass"], "elements": x.numel(),
                "reduce_op": "sum"})
    REDUCE_SCATTER(out, x)
    return out.transpose(0, dim).contiguous()


def own_chunk(x: torch.Tensor, dim: int) -> torch.Tensor:
    return x.chunk(dist.get_world_size(), dim=dim)[dist.get_rank()].contiguous()


def solo() -> bool:
    """Megatron-LM skips every collective when the group has one rank."""
    return dist.get_world_size() == 1


# --- Megatron-LM's operators: a forward and its conjugate backward (workers/tp_ops.py) ---------

def _unless_solo(op):
    """``op``, or a copy when the group has one rank (Megatron-LM skips such collectives)."""
    return lambda x: x.clone() if solo() else op(x)


def operator(forward_op, backward_op):
    """A communication operator from its two passes (workers.tp_ops.Conjugate)."""
    return lambda x: Conjugate.apply(x, forward_op, backward_op)


copy_to_tp = operator(lambda x: x.clone(), _unless_solo(all_reduce))
"""f: identity forward, all-reduce backward."""
reduce_from_tp = operator(_unless_solo(all_reduce), same)
"""g: all-reduce forward, identity backward."""
reduce_scatter_to_sp = operator(_unless_solo(lambda x: reduce_scatter(x, 0)),
                                _unless_solo(lambda g: all_gather(g, 0)))
"""Sequence parallelism's exit: reduce-scatter along the sequence, all-gather backward."""
gather_last_dim = operator(_unless_solo(lambda x: all_gather(x, 1)), lambda g: own_chunk(g, 1))
"""ColumnParallelLinear(gather_output=True): all-gather columns, split backward."""
scatter_last_dim = operator(lambda x: own_chunk(x, 1), _unless_solo(lambda g: all_gather(g, 1)))
"""RowParallelLinear(input_is_parallel=False): keep own columns, all-gather backward."""


class ColumnLinearSP(torch.autograd.Function):
    """Column-parallel linear under sequence parallelism (Megatron-LM's
    LinearWithGradAccumulationAndAsyncCommunication): all-gather the input's sequence shards,
    keep only the shard; backward gathers it again, reduce-scatters the input gradient."""
    @staticmethod
    def forward(ctx, x_shard, weight):
        ctx.save_for_backward(x_shard, weight)
        total = x_shard if solo() else all_gather(x_shard, 0)
        return total @ weight

    @staticmethod
    def backward(ctx, grad):
        x_shard, weight = ctx.saved_tensors
        total = x_shard if solo() else all_gather(x_shard, 0)
        grad_input = grad @ weight.T
        grad_input = grad_input if solo() else reduce_scatter(grad_input, 0)
        return grad_input, total.T @ grad


# --- the blocks -----------------------------------------------------------------------------

def run(block: str, inp, sp: bool, heads: int, device) -> dict:
    rank, tp = dist.get_rank(), dist.get_world_size()
    t = lambda a: torch.tensor(a, dtype=torch.float64, device=device)  # noqa: E731
    def leaf(a):
        return (a.detach().clone() if torch.is_tensor(a) else t(a)).requires_grad_(True)
    rows = lambda a: own_chunk(a, 0) if sp else a  # noqa: E731  this rank's rows under SP
    weights: dict[str, torch.Tensor] = {}
    x = None
    PHASE["pass"] = "forward"
    if block in ("column", "row"):
        if block == "column":
            weights["W"] = leaf(own_chunk(t(inp.weights["W"]), 1))
            x = leaf(rows(t(inp.x)))
            y = ColumnLinearSP.apply(x, weights["W"]) if sp else \
                gather_last_dim(copy_to_tp(x) @ weights["W"])
            dy = own_chunk(t(inp.dy), 1) if sp else t(inp.dy)
        else:
            weights["W"] = leaf(own_chunk(t(inp.weights["W"]), 0))
            x = leaf(t(inp.x))
            partial = scatter_last_dim(x) @ weights["W"]
            y = reduce_scatter_to_sp(partial) if sp else reduce_from_tp(partial)
            dy = rows(t(inp.dy))
        PHASE["pass"] = "backward"
        y.backward(dy)
    elif block in ("mlp", "attention"):
        x = leaf(rows(t(inp.x)))
        weights["gamma"], weights["beta"] = leaf(inp.weights["gamma"]), leaf(inp.weights["beta"])
        norm = F.layer_norm(x, (x.shape[1],), weights["gamma"], weights["beta"], eps=1e-5)
        first, second = ("A", "B") if block == "mlp" else ("W_qkv", "W_o")
        weights[first] = leaf(own_chunk(t(inp.weights[first]), 1))
        weights[second] = leaf(own_chunk(t(inp.weights[second]), 0))
        inner = ColumnLinearSP.apply(norm, weights[first]) if sp else \
            copy_to_tp(norm) @ weights[first]
        if block == "mlp":
            inner = F.gelu(inner, approximate="tanh")
        else:
            n, hr = inner.shape[0], heads // tp
            qkv = inner.reshape(n, hr, 3, -1)
            q, k, v = (qkv[:, :, i, :].transpose(0, 1) for i in range(3))
            context = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            inner = context.transpose(0, 1).reshape(n, -1)
        partial = inner @ weights[second]
        z = reduce_scatter_to_sp(partial) if sp else reduce_from_tp(partial)
        y = x + rows(t(inp.mask)) * z
        PHASE["pass"] = "backward"
        y.backward(rows(t(inp.dy)))
        if sp and not solo():     # Megatron-LM's finalize_model_grads: sum LayerNorm grads
            summed = all_reduce(torch.stack([weights["gamma"].grad, weights["beta"].grad]))
            weights["gamma"].grad, weights["beta"].grad = summed[0], summed[1]
    elif block == "embedding":
        e_shard = leaf(own_chunk(t(inp.weights["E"]), 0))
        weights["E"] = e_shard
        per = e_shard.shape[0]
        ids = torch.tensor(inp.ids, device=device)
        start = rank * per
        outside = (ids < start) | (ids >= start + per)
        looked_up = F.embedding((ids - start).clamp(0, per - 1), e_shard)
        partial = looked_up * (~outside)[:, None]
        hidden = reduce_scatter_to_sp(partial) if sp else reduce_from_tp(partial)
        logits = ColumnLinearSP.apply(hidden, e_shard.T) if sp else \
            copy_to_tp(hidden) @ e_shard.T
        targets = torch.tensor(inp.targets, device=device)
        losses = VocabParallelCrossEntropy.apply(logits, targets, start,
                                                  (lambda x, op: x) if solo() else all_reduce)
        y = hidden
        PHASE["pass"] = "backward"
        losses.mean().backward()
    else:
        raise ValueError(block)
    return {"output": y.detach().cpu().tolist(),
            "grads": {k: w.grad.detach().cpu().tolist() for k, w in weights.items()},
            "input_grad": None if x is None else x.grad.detach().cpu().tolist(),
            "comm": list(LOG)}


def parser():
    """The command line: the scene's block and sizes (app.sim.tensor_parallel.params)."""
    out = arguments(__doc__.splitlines()[0])
    add_fields(out, TensorParallelParams, ["block", "tokens", "hidden", "ffn", "heads", "vocab",
                                           "seed", "sequence_parallel"], choices={"block": BLOCKS})
    out.add_argument("--suite", action="store_true",
                     help="run every block with and without sequence parallelism in this one "
                          "job; the report lists them under 'suite' (the tests use this)")
    return out


def main() -> None:
    args = parser().parse_args()
    rank, world, device, backend = start(args)
    configs = ([(b, sp) for b in BLOCKS for sp in (False, True)] if args.suite
               else [(args.block, args.sequence_parallel)])
    runs = []
    for block, sp in configs:
        LOG.clear()
        inp = make_inputs(block, args.tokens, args.hidden, args.ffn, args.heads, args.vocab,
                          args.seed)
        results = gather(run(block, inp, sp, args.heads, device), rank, world)
        runs.append({"block": block, "sequence_parallel": sp, "ranks": results})
    report = None
    if rank == 0:
        report = {"backend": backend, "world": world, **runs[0]}
        if args.suite:
            report["suite"] = runs
    finish(report, rank, args.out)


if __name__ == "__main__":
    main()
