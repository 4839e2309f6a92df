"""The panels under the ZeRO deck: Table 1 for N_d = 1 … 1024, memory over the step, the step
timeline with offload, and the numbers the page quotes."""

from __future__ import annotations

import math

from app.sim.memory import model_states
from app.sim.zero.simulate import ZeroTrace
from app.draw.lanes import lane_chart, lane_svg
from app.humanize import human_bytes
from app.draw.plot import line_chart

GB = 1e9
PARAM_COUNTS = [(125_000_000, "125 M"), (1_500_000_000, "1.5 B"),
                (7_500_000_000, "7.5 B (ZeRO's example)"), (13_000_000_000, "13 B"),
                (70_000_000_000, "70 B"), (128_000_000_000, "128 B"), (175_000_000_000, "175 B"),
                (1_000_000_000_000, "1 T")]


def human_gb(n: float) -> str:
    if n >= 1e12:
        return f"{n / 1e12:.3g} TB"
    if n >= 1e9:
        return f"{n / 1e9:.3g} GB"
    if n >= 1e6:
        return f"{n / 1e6:.3g} MB"
    return f"{n / 1e3:.3g} kB" if n >= 1e3 else f"{n:.0f} B"


def human_count(n: float) -> str:
    for unit, size in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n:.0f}"


TABLE1_DP = (1, 4, 16, 64, 1024)


def panels(trace: ZeroTrace) -> dict:
    p = trace.params
    psi = p.param_count
    rows = sorted(set(TABLE1_DP) | {p.dp})
    table = [(n, [model_states.per_gpu(psi, dp=n, zero=z).total for z in range(4)]) for n in rows]
    memory = trace.memory
    chart = line_chart(
        [(name, list(range(len(memory))), [getattr(m, attr) / GB for m in memory])
         for name, attr in (("params", "params"), ("grads", "grads"), ("Adam", "optimizer"),
                            ("total", "total"))],
        x_label="phase of the step (the deck's steps)", y_label="GB on one GPU",
        title=f"Memory of one GPU through the step · Ψ = {human_count(psi)}")
    step = trace.step
    lanes = tuple(lane for lane in ("GPU compute", "network", "PCIe", "NVMe", "CPU")
                  if step.busy_us[lane] > 0)
    timeline = lane_chart(step.spans, lanes, title=f"One step of the Ψ = {human_count(psi)} model "
                          f"on {p.dp} GPUs, offload {p.offload}", width=1200, left=130)
    shard = math.ceil(psi / p.dp)
    return {"table1": table, "memory_chart": chart, "timeline": lane_svg(timeline),
            "comm_bytes": trace.comm_elements * 2, "shard_elements": shard,
            "tiny_sent": int(trace.training.sent[-1].max()),
            "tiny_shard": sum(u.shard for u in trace.training.units),
            "final_preview": [f"{v:.6f}" for v in trace.training.final_params[:12]],
            "human_gb": human_gb, "human_count": human_count, "human_bytes": human_bytes,
            "critical": sorted(((lane, us) for lane, us in step.critical_us.items() if us > 0),
                               key=lambda item: -item[1])}
