"""What one piece of a training step costs on a machine: the calibration the cost model takes.

Compute: an op costs a fixed ``kernel_us`` (PyTorch's dispatch and a kernel launch — on a CPU
at the tiny model's sizes this dominates) plus its FLOPs at ``gflops``. The kernel counts are
read off the framework's code (workers/train/model.py, context.py, expert.py), per block.

Communication: Hockney's α–β model (a message of b bytes costs α + b/β) over the ring
algorithms gloo and NCCL run (Thakur et al. 2005), written with nccl-tests' bus-bandwidth
factor (app.sim.collectives.cost.busbw_factor): a collective of S bytes over n ranks takes
steps·α + factor·S/β, with 2(n − 1) steps for an all-reduce and n − 1 for an all-gather,
reduce-scatter or all-to-all; a point-to-point message takes α + S/β.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.sim.collectives.cost import busbw_factor

STEPS = {"all_reduce": lambda n: 2 * (n - 1), "all_gather": lambda n: n - 1,
         "reduce_scatter": lambda n: n - 1, "all_to_all": lambda n: n - 1}

KERNELS = {
    # ops the framework issues, forward (backward: ×BACKWARD), counted from its code
    "norm": 6,              # pow, mean, add, rsqrt, two multiplies
    "qkv": 6,               # three matmuls and their views
    "core": 9,              # scores, mask, softmax (3), probabilities × V, repeats
    "ring_block": 14,       # one ring step: scores, mask, logsumexp, exp, P·V, the merge
    "out": 3,               # output projection, residual add
    "mlp": 7,               # gate, up, SiLU, multiply, down, residual add
    "router": 12,           # logits, softmax, sort, gather, bincount, permutation
    "expert": 6,            # one expert's SwiGLU on its rows
    "moe_combine": 6,       # regroup, gates, index_add
    "aux_loss": 8,          # counts to f, P summed, f·P, scale, and the attach's two ops
    "embed": 5,             # mask, clamp, lookup, multiply
    "head": 16,             # norm, head matmul, the three reductions and the loss
    "adamw": 9,             # per bucket: decay, two moments, sqrt, divide, update, copies
}
BACKWARD = 2.0
"""A backward issues about twice the forward's ops and FLOPs (a matmul's gradient is two)."""


@dataclass(frozen=True)
class Machine:
    gflops: float
    kernel_us: float
    alpha_us: float
    link_gbs: float

    @classmethod
    def of(cls, p) -> Machine:
        return cls(p.gflops, p.kernel_us, p.alpha_us, p.link_gbs)

    def compute_s(self, flops: float, kernels: float) -> float:
        return kernels * self.kernel_us * 1e-6 + flops / (self.gflops * 1e9)

    def collective_s(self, op: str, size_bytes: float, n: int) -> float:
        """One collective of ``size_bytes`` (the whole tensor; the input of an all-reduce or
        reduce-scatter, the output of an all-gather) over ``n`` ranks."""
        if n <= 1:
            return 0.0
        return (STEPS[op](n) * self.alpha_us * 1e-6
                + busbw_factor(op, n) * size_bytes / (self.link_gbs * 1e9))

    def message_s(self, size_bytes: float) -> float:
        return self.alpha_us * 1e-6 + size_bytes / (self.link_gbs * 1e9)
