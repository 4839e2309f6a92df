"""One FSDP training step (ZeRO-3, reshard after forward) as a timeline, with or without prefetch
(Zhao et al. 2023, "PyTorch FSDP: Experiences on Scaling Fully Sharded Data Parallel", VLDB).

Each transformer layer is one unit, plus a root unit (embeddings, final norm, head) that stays
gathered for the whole step. A layer is all-gathered before its forward and again before its
backward, freed after use, and its gradients are reduce-scattered after its backward. With
prefetch the next layer's all-gather is issued as the current layer starts computing (FSDP's
forward and backward prefetch), so it hides behind compute and one more layer is held gathered;
without, each layer waits for its own. All-gathers and reduce-scatters share one lane here: NCCL
runs them over the same links. Compute and collective costs come from
:class:`app.sim.data_parallel.step_timeline.Workload`.
"""

from __future__ import annotations

from app.sim import timeline
from app.sim.data_parallel.step_timeline import StepTimeline, Workload, measure
from app.sim.timeline import Task


def _units(tensors) -> list[tuple[str, list[int]]]:
    """FSDP units: one per transformer layer, plus the root (embeddings, final norm, head)."""
    layers: dict[int, list[int]] = {}
    root = []
    for t, (name, _) in enumerate(tensors):
        if name.startswith("h."):
            layers.setdefault(int(name.split(".")[1]), []).append(t)
        else:
            root.append(t)
    return [("root", root)] + [(f"layer {l}", layers[l]) for l in sorted(layers)]


def fsdp(w: Workload, prefetch: bool) -> StepTimeline:
    sizes = [n for _, n in w.tensors]
    backward = w.backward_us()
    units = _units(w.tensors)
    numel = {name: sum(sizes[t] for t in ts) for name, ts in units}
    layer_fwd = {name: sum(w.flops_us(2 * w.tokens * sizes[t]) for t in ts
                           if w.is_matmul(w.tensors[t][0], sizes[t]))
                 + (w.attention_us() if name != "root" else 0.0) for name, ts in units}
    layer_bwd = {name: sum(backward[t] for t in ts) for name, ts in units}
    order = [name for name, _ in units[1:]]
    tasks = [Task("all-gather root", "comm", w.collective_us("all_gather", numel["root"]), (), "all_gather",
                  "all-gather embeddings and head (kept until the end of backward)")]
    held = [("root", "all-gather root", None)]                    # (unit, gathered by, freed after)
    previous = "all-gather root"
    # 1. forward: gather, compute, free
    for k, name in enumerate(order):
        if k == 0 or not prefetch:
            tasks.append(Task(f"all-gather {name}", "comm", w.collective_us("all_gather", numel[name]),
                              () if k == 0 else (previous,), "all_gather", f"all-gather {name}"))
        if prefetch and k + 1 < len(order):               # issued as this layer starts
            nxt = order[k + 1]
            tasks.append(Task(f"all-gather {nxt}", "comm", w.collective_us("all_gather", numel[nxt]),
                              (previous,), "all_gather", f"all-gather {nxt} (prefetched)"))
        tasks.append(Task(f"forward {name}", "compute", layer_fwd[name],
                          (f"all-gather {name}", previous) if k else (f"all-gather {name}", "all-gather root"),
                          "forward", f"forward of {name}"))
        held.append((name, f"all-gather {name}", f"forward {name}"))
        previous = f"forward {name}"
    tasks.append(Task("head + loss", "compute", w.head_us() + layer_fwd["root"], (previous,),
                      "forward", "output head and loss"))
    tasks.append(Task("backward head", "compute", 2 * w.head_us(), ("head + loss",), "backward",
                      "backward of the output head"))
    previous = "backward head"
    # 2. backward: gather again, compute, reduce-scatter, free
    back = order[::-1]
    for k, name in enumerate(back):
        if k == 0 or not prefetch:
            tasks.append(Task(f"all-gather {name} again", "comm", w.collective_us("all_gather", numel[name]),
                              (previous,), "all_gather", f"all-gather {name} again"))
        if prefetch and k + 1 < len(back):
            nxt = back[k + 1]
            tasks.append(Task(f"all-gather {nxt} again", "comm", w.collective_us("all_gather", numel[nxt]),
                              (previous,), "all_gather", f"all-gather {nxt} (prefetched)"))
        tasks.append(Task(f"backward {name}", "compute", layer_bwd[name], (f"all-gather {name} again", previous),
                          "backward", f"backward of {name}"))
        tasks.append(Task(f"reduce-scatter {name}", "comm", w.collective_us("reduce_scatter", numel[name]),
                          (f"backward {name}",), "reduce_scatter", f"reduce-scatter {name}'s gradients"))
        held.append((name, f"all-gather {name} again", f"backward {name}"))
        previous = f"backward {name}"
    tasks.append(Task("backward embeddings", "compute", layer_bwd["root"], (previous,), "backward",
                      "backward of the embeddings"))
    tasks.append(Task("reduce-scatter root", "comm", w.collective_us("reduce_scatter", numel["root"]),
                      ("backward embeddings",), "reduce_scatter", "reduce-scatter the root's gradients"))
    tasks.append(Task("optimizer", "compute", w.optimizer_us(sum(sizes) / w.dp),
                      ("reduce-scatter root", "backward embeddings"), "optimizer", "Adam on this rank's shard"))
    spans = timeline.schedule(tasks)
    intervals = _gathered(spans, held, numel, w.dp)
    return measure("fsdp", spans, "compute", "comm", gathered=intervals,
                   peak_gathered_elements=_peak(intervals))


def _gathered(spans, held, numel, dp) -> tuple[tuple[float, float, int], ...]:
    """When each unit is held gathered, beyond this rank's own shard: from the start of its
    all-gather until the compute that used it ends (the root: the whole step)."""
    at = {s.name: s for s in spans}
    end = timeline.makespan(spans)
    return tuple((at[gathered].start_us, at[freed].end_us if freed else end,
                  numel[unit] - numel[unit] // dp) for unit, gathered, freed in held)


def _peak(intervals) -> int:
    """Most parameters gathered at once."""
    events = [e for lo, hi, n in intervals for e in ((lo, n), (hi, -n))]
    live = peak = 0
    for _, delta in sorted(events, key=lambda e: (e[0], e[1])):
        live += delta
        peak = max(peak, live)
    return peak
