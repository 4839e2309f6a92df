"""Run the optimizer scene with torch.optim, its state sharded over the ranks as ZeRO stage 1 does.

    torchrun --standalone --nproc-per-node 4 workers/optimizer.py --optimizer adamw \
        --precision mixed --size 6 --steps 3 --lr 0.1 --out report.json

Every rank holds the whole model (bf16 in mixed precision) and computes the whole gradient
g = a ⊙ (w − c) of the scene's quadratic — the same numbers, from the same seeded problem
(app.sim.optimizer.simulate.make_problem). The optimizer's part is sharded: rank r owns a contiguous
slice of the parameters (np.array_split, so the slices may differ by one), keeps the fp32
master copy and torch.optim's states (momentum_buffer, exp_avg, exp_avg_sq) of that slice only,
steps it with torch.optim.SGD / Adam / AdamW, and an all_gather reassembles the updated
parameters on every rank. Rank 0 also steps an unsharded torch.optim on the whole vector, the
single-GPU reference. Rank 0 writes every rank's slice after every step, the reference run and
the bytes each rank's optimizer state takes, as JSON; app/scenes/optimizer/check.py compares them
with the simulation.

The gradient is the scene's formula written out (not autograd), evaluated in fp32 and, in
mixed precision, rounded to bf16, so both runs feed the optimizer identical gradients and the
comparison measures torch.optim alone.
"""

from __future__ import annotations


from common import add_fields, arguments, finish, gather, start  # noqa: I001 (workers/ on path)

import numpy as np
import torch
import torch.distributed as dist

from app.sim.optimizer.params import OptimizerParams
from app.sim.optimizer.simulate import SIMULATED, make_problem


def make_optimizer(name: str, params: list[torch.Tensor], args) -> torch.optim.Optimizer:
    """torch.optim's optimizer for the scene's name; foreach=False: the plain per-tensor path."""
    if name == "sgd":
        return torch.optim.SGD(params, lr=args.lr, weight_decay=args.weight_decay, foreach=False)
    if name == "momentum":
        return torch.optim.SGD(params, lr=args.lr, momentum=args.momentum,
                               weight_decay=args.weight_decay, foreach=False)
    cls = torch.optim.AdamW if name == "adamw" else torch.optim.Adam
    return cls(params, lr=args.lr, betas=(args.beta1, args.beta2), eps=args.eps,
               weight_decay=args.weight_decay, foreach=False)


def model_copy(master: torch.Tensor, precision: str) -> torch.Tensor:
    """What the model computes with: bf16 in mixed precision (held as fp32 values)."""
    w = master.detach()
    return w.bfloat16().float() if precision == "mixed" else w.clone()


def gradient(model: torch.Tensor, a: torch.Tensor, c: torch.Tensor, precision: str):
    g = a * (model - c)
    return g.bfloat16().float() if precision == "mixed" else g


def states_of(optimizer: torch.optim.Optimizer, param: torch.Tensor) -> dict[str, list[float]]:
    state = optimizer.state.get(param, {})
    return {k: v.tolist() for k, v in state.items()
            if k in ("momentum_buffer", "exp_avg", "exp_avg_sq") and v is not None}


def state_bytes(optimizer: torch.optim.Optimizer, param: torch.Tensor, precision: str) -> int:
    """Bytes this rank's optimizer keeps: its states, plus the fp32 master in mixed precision
    (the per-step counter ``step`` is a scalar and not counted, as in ZeRO's K)."""
    state = optimizer.state.get(param, {})
    kept = sum(v.numel() * v.element_size() for k, v in state.items()
               if k != "step" and isinstance(v, torch.Tensor))
    if precision == "mixed":
        kept += param.numel() * param.element_size()
    return kept


def parser():
    """The command line: the scene's fields (app.sim.optimizer.params), the optimizers the scene
    animates."""
    out = arguments(__doc__.splitlines()[0])
    add_fields(out, OptimizerParams, ["optimizer", "precision", "size", "steps", "lr", "momentum",
                                      "beta1", "beta2", "eps", "weight_decay", "seed"],
               choices={"optimizer": SIMULATED})
    return out


def main() -> None:
    args = parser().parse_args()
    rank, world, device, backend = start(args)
    a_np, c_np, w0_np = make_problem(args.size, args.seed)
    a, c = torch.tensor(a_np, device=device), torch.tensor(c_np, device=device)
    slices = np.array_split(np.arange(args.size), world)
    bounds = [(int(s[0]), int(s[-1]) + 1) if len(s) else (0, 0) for s in slices]
    lo, hi = bounds[rank]
    longest = max(h - l for l, h in bounds)

    # 1. this rank's shard of the fp32 master weights and its optimizer
    shard = torch.tensor(w0_np[lo:hi].copy(), device=device, requires_grad=True)
    optimizer = make_optimizer(args.optimizer, [shard], args)
    model = model_copy(torch.tensor(w0_np.copy(), device=device), args.precision)
    history = []
    for _ in range(args.steps):
        # 2. every rank: the whole gradient; the optimizer sees this rank's slice of it
        g = gradient(model, a, c, args.precision)
        shard.grad = g[lo:hi].clone()
        optimizer.step()
        # 3. ZeRO-1: all-gather the updated (model-precision) parameters
        piece = torch.zeros(longest, device=device)
        piece[:hi - lo] = model_copy(shard, args.precision)
        pieces = [torch.empty_like(piece) for _ in range(world)]
        dist.all_gather(pieces, piece)
        model = torch.cat([pieces[r][:h - l] for r, (l, h) in enumerate(bounds)])
        history.append({"params": shard.detach().cpu().tolist(),
                        "states": states_of(optimizer, shard)})

    # 4. rank 0: the unsharded reference, one torch.optim over the whole vector
    reference = None
    if rank == 0:
        full = torch.tensor(w0_np.copy(), device=device, requires_grad=True)
        ref_optimizer = make_optimizer(args.optimizer, [full], args)
        ref_model = model_copy(full, args.precision)
        reference = []
        for _ in range(args.steps):
            full.grad = gradient(ref_model, a, c, args.precision)
            ref_optimizer.step()
            ref_model = model_copy(full, args.precision)
            reference.append({"params": full.detach().cpu().tolist(),
                              "model_params": ref_model.cpu().tolist(),
                              "states": states_of(ref_optimizer, full)})

    mine = {"bounds": [lo, hi], "history": history,
            "state_bytes": state_bytes(optimizer, shard, args.precision),
            "model_params": model.cpu().tolist()}
    everyone = gather(mine, rank, world)
    report = None
    if rank == 0:
        report = {"backend": backend, "world": world, "optimizer": args.optimizer,
                  "precision": args.precision, "size": args.size, "steps": args.steps,
                  "torch": torch.__version__, "ranks": everyone, "reference": reference}
    finish(report, rank, args.out)


if __name__ == "__main__":
    main()
