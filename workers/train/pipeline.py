"""Pipeline parallelism: one training step's forward and backward passes of every micro-batch on
this rank's stage, in the order of the schedule — the very order the simulation draws
(app.sim.pipeline.orders.build: GPipe, Huang et al. 2019; Megatron-LM's 1F1B, Narayanan et al.
2021 — warm-up min(p − r − 1, m) forwards, then one forward and one backward, then the rest).

    F of micro-batch i   receive the previous stage's activations (not on the first stage),
                         run the stage, send the output on (not on the last: it keeps the loss)
    B of micro-batch i   receive the gradient of that output (not on the last stage), run
                         autograd's backward through the stage, send the input's gradient back

Sends are ``isend``s that stay in flight (comm.Sends) and only receives wait, so no order the
simulation accepts can deadlock; the time a rank waits in a receive is its bubble (and the
transfer). Before the last micro-batch's backward, ``before_last_backward`` arms the gradient
buckets (data.py), so that their reduction starts while that backward still runs.
"""

from __future__ import annotations

import torch

from app.sim.pipeline.orders import build
from workers.train.comm import REC, Sends, recv


def orders(schedule: str, pp: int, microbatches: int):
    """Every rank's actions, ``Action(stage, kind, microbatch)``, as the simulation has them."""
    return build(schedule, pp, microbatches).orders


def run(model, order, batch, scale: float, before_last_backward) -> float:
    """One step of ``order`` on ``model`` (a StageModel); ``batch[i]`` = (ids, targets) of
    micro-batch i as this rank's tensors. Returns the loss summed over this rank's micro-batches
    (0 off the last stage)."""
    g = model.groups
    pp = g["pp"]
    inputs, outputs, sends, loss = {}, {}, Sends(), 0.0
    last_mb = len(batch) - 1
    for action in order:
        i = action.microbatch
        REC.where = {"microbatch": i, "stage": action.stage}
        if action.kind == "F":
            if model.first:
                x = batch[i][0]
            else:
                x = recv(model.activation_shape, model.dtype, g.pp_prev_rank, pp, "recv")
                x.requires_grad_(True)
            with REC.span("compute", "F"):
                out = model.forward(x, batch[i][1] if model.last else None, scale, i)
            if model.last:
                loss += float(out.detach())
            else:
                sends.send(out, g.pp_next_rank, pp, "send")
            inputs[i], outputs[i] = x, out
        else:
            if i == last_mb:
                before_last_backward()
            grad = (None if model.last else
                    recv(model.activation_shape, model.dtype, g.pp_next_rank, pp, "recv"))
            with REC.span("compute", "B"):
                torch.autograd.backward(outputs.pop(i), grad)
            x = inputs.pop(i)
            if not model.first:
                sends.send(x.grad, g.pp_prev_rank, pp, "send")
    REC.where = {}
    sends.wait()
    return loss
