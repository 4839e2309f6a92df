"""Run the mixed-precision scene's three claims with torch's own formats, casts and GradScaler.

    torchrun --standalone --nproc-per-node 2 workers/precision.py --value=0.1 \
        --grad-center=-4.5 --grad-spread=1.2 --steps 24 --init-scale-log2 16 \
        --growth-interval 4 --seed 0 --fp8-margin 0 --out report.json

Every rank:

1. **Rounds the typed value** with torch's casts to float32, float16, bfloat16, float8_e4m3fn
   and float8_e5m2, and reads each result's bits (the tensor viewed as an integer dtype).
   TF32 has no dtype: only a CUDA GPU's tensor cores round to it, so where one exists the
   value is multiplied by an identity matrix with ``torch.backends.cuda.matmul.allow_tf32``
   (each product is the TF32-rounded input times 1, summed exactly in FP32); on a CPU it is
   reported as not measurable, not re-implemented.
2. **Scales the loss dynamically** with ``torch.amp.GradScaler`` (Micikevicius et al. 2018,
   "Mixed Precision Training" §3.2), on the ranks' own device: GradScaler("cpu") runs on a CPU
   (checked with torch 2.13), through the same ``torch._amp_foreach_non_finite_check_and_unscale_``
   and ``torch._amp_update_scale_`` kernels as on a GPU.
   The gradients are the simulation's (:func:`app.sim.precision.simulate.make_gradients`, same seed),
   split into one contiguous shard per rank. Each step a rank's backward produces
   ``scaler.scale(g)`` on its shard rounded to float16 — inf past 65504, 0 below 2^-25 — handed
   to the fp32 parameter's ``.grad`` as autocast's fp16 backward does, zeros elsewhere; a SUM
   all-reduce (as DDP's) gives every rank the whole gradient, so every rank finds the same
   infs. Then ``scaler.step(optimizer)`` (skipped on inf: a step hook records whether SGD ran)
   and ``scaler.update()``. Recorded per step: the scale used, whether the step was skipped,
   the shares of non-zero gradients that flushed to 0 or are FP16 subnormals, the next scale
   and GradScaler's clean-step counter.
3. **Quantises to FP8 with per-tensor scaling** (Micikevicius et al. 2022, "FP8 Formats for
   Deep Learning" §4.3; NVIDIA Transformer Engine): step 1's gradients, sharded as above, amax
   all-reduced with MAX over the ranks (Transformer Engine's amax reduction group), scale
   s = (max / amax) / 2^margin with torch.finfo's max, q = float8(x·s) by torch's cast,
   dequantised q / s. The counts and the sum of squared relative errors are all-reduced.

torch rounds a float64 through float32 on its way to a 16- or 8-bit format, and its
float8_e4m3fn cast saturates past 448 (to ±448) where ml_dtypes gives NaN: overflow is
therefore read off torch's own rounding one binade lower (:func:`past_largest`). Rank 0 writes
every rank's results as JSON; app/scenes/precision/check.py compares them with the simulation.
"""

from __future__ import annotations


from common import add_fields, arguments, finish, gather, start  # noqa: I001 (workers/ on path)

import numpy as np
import torch
import torch.distributed as dist

from app.sim.precision.params import PrecisionParams
from app.sim.precision.simulate import SAMPLES, make_gradients

DTYPES = {"fp32": (torch.float32, torch.int32), "fp16": (torch.float16, torch.int16),
          "bf16": (torch.bfloat16, torch.int16),
          "fp8_e4m3": (torch.float8_e4m3fn, torch.uint8),
          "fp8_e5m2": (torch.float8_e5m2, torch.uint8)}
"""The scene's formats that torch has a dtype for, and the integer dtype to read their bits."""
FP8_CASES = [(key, scaling) for key in ("fp8_e4m3", "fp8_e5m2")
             for scaling in ("none", "per_tensor")]
"""The simulation's FP8 results, in its order."""


def past_largest(v: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Whether each float64 value rounds past ``dtype``'s largest finite value.

    A cast to a format with infinities says so itself (±inf), but torch's float8_e4m3fn has
    none and saturates (500 → 448). Halving is exact and moves the value one binade down,
    where the format's next value up still exists: v rounds past the largest value exactly
    when torch's rounding of v/2, doubled, is past it."""
    doubled = (v / 2).to(dtype).to(torch.float64) * 2
    return doubled.abs() > torch.finfo(dtype).max


def bits_of(q: torch.Tensor, as_int: torch.dtype) -> str:
    width = torch.finfo(q.dtype).bits
    return format(int(q.view(as_int).item()) & (2**width - 1), f"0{width}b")


def round_value(value: float, key: str, device: torch.device) -> dict:
    """The typed value through torch's cast: the value it rounds to and its bits."""
    dtype, as_int = DTYPES[key]
    v = torch.tensor([value], dtype=torch.float64, device=device)
    q = v.to(dtype)
    if bool(past_largest(v, dtype)):
        wide = q.to(torch.float64)               # (float8 tensors have no isfinite)
        return {"measured": True, "overflow": True, "rounded": None, "bits": None,
                "saturated_to": wide.item() if bool(torch.isfinite(wide)) else None}
    return {"measured": True, "overflow": False, "rounded": q.double().item(),
            "bits": bits_of(q, as_int)}


def round_tf32(value: float) -> dict:
    """TF32 measured on a CUDA GPU: an all-``value`` matrix times the identity, in TF32."""
    if not torch.cuda.is_available():
        return {"measured": False, "why": "TF32 has no torch dtype and no CPU kernel: only a "
                                          "CUDA GPU's tensor cores round to it"}
    cuda = torch.device("cuda", torch.cuda.current_device())
    x = torch.tensor(value, dtype=torch.float64).to(torch.float32)
    a, identity = torch.full((64, 64), x.item(), device=cuda), torch.eye(64, device=cuda)
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True
    try:
        product = (a @ identity)[0, 0].cpu()
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before
    if not bool(torch.isfinite(product)):
        return {"measured": True, "overflow": True, "rounded": None, "bits": None}
    word = int(product.view(torch.int32).item()) & 0xFFFFFFFF
    return {"measured": True, "overflow": False, "rounded": product.double().item(),
            "bits": format(word >> 13, "019b"), "fp32_unchanged": product.item() == x.item()}


def rounding(value: float, device: torch.device) -> dict:
    out = {key: round_value(value, key, device) for key in DTYPES}
    out["tf32"] = round_tf32(value)
    return out


def loss_scaling(grads: np.ndarray, lo: int, hi: int, args, device: torch.device) -> list:
    """GradScaler over the steps, this rank producing the FP16 gradients of its shard."""
    param = torch.zeros(SAMPLES, device=device, requires_grad=True)
    optimizer = torch.optim.SGD([param], lr=1.0)
    applied = []
    optimizer.register_step_post_hook(lambda *_: applied.append(True))
    scaler = torch.amp.GradScaler(device.type, init_scale=2.0 ** args.init_scale_log2,
                                  growth_interval=args.growth_interval)
    tiny = torch.finfo(torch.float16).tiny          # FP16's smallest normal, 2^-14
    history = []
    for t, row in enumerate(grads, start=1):
        g = torch.from_numpy(row).to(device)        # float64: this step's unscaled gradient
        scale = scaler.get_scale()
        grad = torch.zeros(SAMPLES, device=device)
        # the fp16 backward of S·loss on this rank's shard, kept as the fp32 param's .grad
        grad[lo:hi] = scaler.scale(g[lo:hi]).to(torch.float16).to(torch.float32)
        dist.all_reduce(grad)                       # as DDP: every rank holds the whole sum
        param.grad = grad
        nonzero = g != 0
        n = max(1, int(nonzero.sum()))
        magnitude = grad.abs()
        flushed = int(((grad == 0) & nonzero).sum()) / n
        subnormal = int(((magnitude > 0) & (magnitude < tiny)).sum()) / n
        steps_before = len(applied)
        scaler.step(optimizer)                      # unscale; skipped if any inf or NaN
        scaler.update()
        history.append({"step": t, "scale": scale, "skipped": len(applied) == steps_before,
                        "underflow": flushed, "subnormal": subnormal,
                        "scale_after": scaler.get_scale(),
                        "growth_tracker": scaler.state_dict()["_growth_tracker"]})
    return history


def fp8(first: np.ndarray, lo: int, hi: int, margin: int, device: torch.device) -> list:
    """Step 1's gradients in FP8, unscaled and with a per-tensor scale from the global amax."""
    x = torch.from_numpy(first[lo:hi]).to(device)
    amax = x.abs().max()
    dist.all_reduce(amax, op=dist.ReduceOp.MAX)
    amax = amax.item()
    nonzero = x != 0
    results = []
    for key, scaling in FP8_CASES:
        dtype = DTYPES[key][0]
        scale = torch.finfo(dtype).max / amax / 2.0 ** margin if scaling == "per_tensor" else 1.0
        v = x * scale
        q = v.to(dtype).to(torch.float64)
        over = past_largest(v, dtype)
        kept = ~over & (q != 0) & nonzero
        error = (q[kept] / scale - x[kept]) / x[kept]
        sums = torch.tensor([nonzero.sum().item(), ((q == 0) & nonzero).sum().item(),
                             over.sum().item(), torch.isfinite(q[over]).sum().item(),
                             kept.sum().item(), (error ** 2).sum().item()],
                            dtype=torch.float64, device=device)
        dist.all_reduce(sums)
        n, flushed, overflow, saturated, count, squares = sums.tolist()
        n = max(1.0, n)
        results.append({"format": key, "scaling": scaling, "scale": scale, "amax": amax,
                        "underflow": flushed / n, "overflow": overflow / n,
                        "saturated": int(saturated),
                        "rms_relative_error": (squares / count) ** 0.5 if count else 0.0})
    return results


def parser():
    """The command line: the scene's fields (app.sim.precision.params); a negative number goes
    as --value=-1e-05."""
    out = arguments(__doc__.splitlines()[0])
    add_fields(out, PrecisionParams, ["value", "grad_center", "grad_spread", "steps",
                                      "init_scale_log2", "growth_interval", "seed", "fp8_margin"])
    return out


def main() -> None:
    args = parser().parse_args()
    rank, world, device, backend = start(args)
    shards = np.array_split(np.arange(SAMPLES), world)
    lo, hi = int(shards[rank][0]), int(shards[rank][-1]) + 1
    grads = make_gradients(args.steps, args.grad_center, args.grad_spread, args.seed)
    mine = {"bounds": [lo, hi], "rounding": rounding(args.value, device),
            "scaling": loss_scaling(grads, lo, hi, args, device),
            "fp8": fp8(grads[0], lo, hi, args.fp8_margin, device)}
    everyone = gather(mine, rank, world)
    report = None
    if rank == 0:
        report = {"backend": backend, "world": world, "device": device.type,
                  "torch": torch.__version__, "value": args.value, "steps": args.steps,
                  "ranks": everyone}
    finish(report, rank, args.out)


if __name__ == "__main__":
    main()
