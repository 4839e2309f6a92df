"""The panels under the tensor-parallel deck, as template data: this block's collectives and
errors, and the preset model at scale — activation memory (Korthikanti Table 2), what a layer
communicates, and its collectives' time over NVLink or InfiniBand next to its compute."""

from __future__ import annotations

from dataclasses import dataclass

from app.sim.tensor_parallel.scale import Scale, Variant
from app.humanize import human_bytes, human_time_us
from app.draw.plot import line_chart

OP_NAMES = {"all_reduce": "all-reduce", "all_gather": "all-gather",
            "reduce_scatter": "reduce-scatter"}


@dataclass(frozen=True)
class Bar:
    label: str
    value: str
    share: float          # of the longest bar, 0–1
    kind: str             # compute | nvlink | infiniband


def panels(p, trace) -> dict:
    s = trace.scale
    return {"comm_rows": block_comm(trace), "memory": memory(s),
            "layer_comm": [layer_comm(v) for v in (s.tp_only, s.tp_sp)],
            "time_bars": time_bars(s, p.sequence_parallel), "sweep_chart": sweep_chart(s, p),
            "heads_divide": s.model.heads % p.tp == 0,
            "reference_check": reference_check(s)}


def block_comm(trace) -> list[dict]:
    return [{"op": OP_NAMES[c.op] + (" (max)" if c.reduce_op == "max" else ""),
             "pass": c.pass_, "elements": c.elements, "purpose": c.purpose}
            for c in trace.comm]


def memory(s: Scale) -> dict:
    most = max(max(b, c) for _, _, _, b, c in s.terms) or 1.0   # bars compare TP with TP + SP
    rows = [{"name": name, "formula": formula, "none": human_bytes(a), "tp": human_bytes(b),
             "sp": human_bytes(c), "tp_share": b / most, "sp_share": c / most,
             "split_by_sp": c < b}
            for name, formula, a, b, c in s.terms]
    layers = s.model.layers
    return {"rows": rows, "none": human_bytes(s.no_parallelism_bytes),
            "tp": human_bytes(s.tp_only.activation_bytes),
            "sp": human_bytes(s.tp_sp.activation_bytes),
            "saving": 1 - s.tp_sp.activation_bytes / s.tp_only.activation_bytes,
            "model_tp": human_bytes(s.tp_only.activation_bytes * layers),
            "model_sp": human_bytes(s.tp_sp.activation_bytes * layers), "layers": layers}


def layer_comm(v: Variant) -> dict:
    return {"name": v.name,
            "rows": [{"op": OP_NAMES[c.op], "pass": c.pass_, "purpose": c.purpose,
                      "elements": c.elements, "sent": human_bytes(c.sent_bytes),
                      "nvlink": human_time_us(c.nvlink_us),
                      "infiniband": human_time_us(c.infiniband_us)} for c in v.collectives],
            "forward": human_bytes(v.total("sent_bytes", "forward")),
            "backward": human_bytes(v.total("sent_bytes", "backward")),
            "nvlink": human_time_us(v.total("nvlink_us")),
            "infiniband": human_time_us(v.total("infiniband_us"))}


def time_bars(s: Scale, sp: bool) -> list[Bar]:
    v = s.tp_sp if sp else s.tp_only
    items = [("compute: forward + backward", s.compute_us, "compute"),
             (f"{v.name} collectives inside a node (NVLink)", v.total("nvlink_us"), "nvlink"),
             (f"{v.name} collectives across nodes (InfiniBand)", v.total("infiniband_us"),
              "infiniband")]
    most = max(t for _, t, _ in items) or 1.0
    return [Bar(label, human_time_us(t), t / most, kind) for label, t, kind in items]


def sweep_chart(s: Scale, p):
    ts = [row[0] for row in s.sweep if row[0] > 1]
    if not ts:
        return None
    rows = [row for row in s.sweep if row[0] > 1]
    series = [("compute", ts, [r[1] for r in rows]),
              ("NVLink only", ts, [r[4] for r in rows]),
              (f"nodes of {p.gpus_per_node}", ts, [r[2] for r in rows]),
              ("InfiniBand only", ts, [r[3] for r in rows])]
    markers = [(p.tp, f"tp = {p.tp}")] if p.tp in ts else []
    if p.gpus_per_node in ts and p.gpus_per_node != p.tp:
        markers.append((p.gpus_per_node, "one node"))
    return line_chart(series, x_label="tensor-parallel size t",
                      y_label="time per layer, forward + backward",
                      title=f"{s.model.name}: one layer's compute and "
                            f"{'TP + SP' if p.sequence_parallel else 'TP'} communication",
                      x_log=True, y_log=True, x_format=lambda v: f"{v:g}",
                      y_format=human_time_us, x_tick_base=2, markers=markers)


def reference_check(s: Scale) -> str:
    """The published figure this panel reproduces, when the preset is the paper's."""
    if s.model.name != "gpt3-175b" or s.seq != 2048 or s.micro_batch != 1 or s.tp != 8:
        return ("Korthikanti et al. 2022 report, for GPT-3 175B at s = 2048, b = 1, t = 8: "
                "552 MiB per layer with TP and 342 MiB with TP + SP — choose that preset and "
                "tp = 8 to see this panel reproduce it.")
    return (f"Korthikanti et al. 2022 report 552 MiB per layer with TP and 342 MiB with TP + SP "
            f"for this configuration; this panel computes "
            f"{s.tp_only.activation_bytes / 2**20:.0f} MiB and "
            f"{s.tp_sp.activation_bytes / 2**20:.0f} MiB.")
