"""The MoE scene's frames: a step-by-step story of one layer's forward pass, each frame with a
caption in words and real numbers and the plain data a deck draws in it.

0 tokens and logits · 1 softmax · 2 top-k choice · 3 capacity and drops · 4 dispatch
all-to-all · 5 expert compute · 6 combine all-to-all · 7 output.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from app.sim.trace import Transfer


@dataclass(frozen=True)
class MoeFrame:
    step: int
    phase: str
    caption: str
    transfers: tuple[Transfer, ...] = ()
    data: dict = field(default_factory=dict)
    """plain JSON data the deck draws in this frame (bins, a matrix, per-rank rows)"""

    def to_dict(self) -> dict:
        return {"step": self.step, "phase": self.phase, "caption": self.caption,
                "transfers": [t.to_dict() for t in self.transfers], **self.data}


def num(value: float, digits: int = 3) -> str:
    return f"{value:.{digits}g}"


def human_bytes(n: float) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n:.0f} B"


def _range(lo: int, hi: int) -> str:
    return f"{lo}" if lo == hi else f"{lo}–{hi}"


def _transfers(matrix: np.ndarray, hidden: int, back: bool) -> tuple[Transfer, ...]:
    ep = matrix.shape[0]
    out = []
    for i in range(ep):
        for j in range(ep):
            rows = int(matrix[i, j])
            if i != j and rows:
                src, dst = (j, i) if back else (i, j)
                out.append(Transfer(src, dst, rows * hidden, label=f"{rows} tokens"))
    return tuple(out)


def frames(p, logits, routing, drops, matrix, run, aux, zl, a2a) -> tuple[MoeFrame, ...]:
    T, E, k, ep = p.tokens, p.experts, p.top_k, p.ep
    per_rank, per_ep = T // ep, E // ep
    out = []
    where = ", ".join(f"tokens {_range(r * per_rank, (r + 1) * per_rank - 1)} and experts "
                      f"{_range(r * per_ep, (r + 1) * per_ep - 1)} on rank {r}"
                      for r in range(min(ep, 3))) + (" …" if ep > 3 else "")
    out.append(MoeFrame(0, "tokens", (
        f"{T} tokens of {p.token_width} numbers on {ep} rank{'s' if ep > 1 else ''} ({where}). The "
        f"router scores every token against all {E} experts: logits {T} × {E} = x · W_router "
        f"+ skew {num(p.skew)} · bias (+1 for expert 0 down to −1 for expert {E - 1}); token "
        f"0's run from {num(logits[0].min())} to {num(logits[0].max())}."),
        data={"token_rank": (np.arange(T) // per_rank).tolist(),
              "expert_rank": (np.arange(E) // per_ep).tolist()}))
    mean_p = routing.probs.mean(axis=0)
    top0 = int(np.argmax(routing.probs[0]))
    out.append(MoeFrame(1, "softmax", (
        f"Softmax over all {E} experts turns each row into probabilities: token 0 gives expert "
        f"{top0} the most, {num(routing.probs[0, top0])}. Averaged over the tokens, expert "
        f"{int(mean_p.argmax())} gets P = {num(mean_p.max())} and expert {int(mean_p.argmin())} "
        f"{num(mean_p.min())}, against {num(1 / E)} for a uniform router."),
        data={"mean_probs": mean_p.tolist()}))
    load = drops.load.sum(axis=0)
    w0 = routing.weights[0]
    how = (f"the weights are those probabilities, not renormalised — token 0's sum to "
           f"{num(w0.sum())}" if p.router == "softmax_topk" else
           f"the weights are a softmax over the {k} chosen logits and sum to 1")
    out.append(MoeFrame(2, "topk", (
        f"Each token goes to its top {k} expert{'s' if k > 1 else ''} ({p.router}: "
        f"{how}); token 0 → experts {', '.join(map(str, routing.experts[0].tolist()))}. "
        f"Before capacity, expert {int(load.argmax())} is chosen {int(load.max())} "
        f"times and expert {int(load.argmin())} {int(load.min())}; the mean is {num(T * k / E)}. "
        f"Load-balancing loss {num(p.aux_loss_coeff)} · {E} · Σ f·P = {num(aux, 4)} "
        f"(uniform: {num(p.aux_loss_coeff)}); z-loss = {num(zl, 4)}."),
        data={"load": load.tolist()}))
    dropped = len(drops.dropped)
    if drops.capacity is None:
        text = (f"Capacity factor 0: dropless. Every expert keeps all it is sent; the busiest "
                f"takes {int(drops.load.max())} assignments from one rank where a balanced "
                f"router would send {num(per_rank * k / E)}.")
    else:
        r, e = np.unravel_index(int(np.argmax(drops.load)), drops.load.shape)
        over = int(drops.load[r, e] - drops.kept_load[r, e])
        text = (f"Capacity = ⌈({T}/{ep}) · {k}/{E} · {num(p.capacity_factor)}⌉ = "
                f"{drops.capacity} assignments per expert from each rank. Rank {r} sends expert "
                f"{e} {int(drops.load[r, e])} assignments: {over} dropped "
                f"({'the lowest-probability ones' if p.drop_policy == 'probs' else 'the latest tokens'}). "
                f"In all {dropped} of {T * k} assignments are dropped "
                f"({num(100 * dropped / (T * k))} %).")
    out.append(MoeFrame(3, "capacity", text, data={
        "capacity": drops.capacity, "bins": drops.load.tolist(), "kept": drops.kept_load.tolist()}))
    sent_rows = matrix.sum(axis=1) - np.diag(matrix)
    out.append(MoeFrame(4, "dispatch", (
        f"Dispatch all-to-all: the split sizes ({ep} × {ep} counts), then the token vectors; "
        f"rank 0 keeps {int(matrix[0, 0])} rows and sends {int(sent_rows[0])}. At "
        f"{p.cost_tokens} tokens per rank of a {p.hidden}-wide {p.dtype} model the busiest "
        f"rank sends {human_bytes(a2a.dispatch.bytes_sent.max())}: "
        f"{num(a2a.dispatch.nvlink_us)} µs on NVLink, {num(a2a.dispatch.infiniband_us)} µs over "
        f"InfiniBand, one rank a node ({num(a2a.dispatch.time_us)} µs "
        f"with {p.gpus_per_node} GPUs a node)."), _transfers(matrix, p.token_width, back=False), data={"dispatch": matrix.tolist()}))
    rows = run.rank_rows
    out.append(MoeFrame(5, "experts", (
        f"Each rank runs its {per_ep} expert{'s' if per_ep > 1 else ''} (hidden {p.token_width} → "
        f"{2 * p.token_width} → {p.token_width}, SiLU) on the rows it received: "
        + ", ".join(f"rank {r} {int(n)}" for r, n in enumerate(rows[:6].tolist()))
        + (" …" if ep > 6 else "")
        + f". The busiest rank works {num(rows.max() / max(rows.mean(), 1e-12))}× the mean."),
        data={"rank_rows": rows.tolist(), "expert_tokens": drops.expert_tokens.tolist()}))
    out.append(MoeFrame(6, "combine", (
        f"Combine all-to-all: every result travels back to its token's rank along the reverse "
        f"path — the dispatch matrix transposed, so a rank sends its column: the busiest "
        f"sends {human_bytes(a2a.combine.bytes_sent.max())}, {num(a2a.combine.time_us)} µs "
        f"({human_bytes(a2a.bytes_per_rank.max())} per rank for the layer at most)."),
        _transfers(matrix, p.token_width, back=True), data={"combine": matrix.T.tolist()}))
    none_kept = int((~drops.kept).all(axis=1).sum())
    out.append(MoeFrame(7, "output", (
        f"Each token adds its kept experts' outputs, weighted: y_t = Σ w · expert(x_t). "
        f"{none_kept} token{' has' if none_kept == 1 else 's have'} every assignment dropped "
        f"and leave{'s' if none_kept == 1 else ''} the layer as 0 (the residual carries "
        f"{'it' if none_kept == 1 else 'them'}). Expert-parallel output against the dense "
        f"layer: max |difference| {run.max_abs_error:.2g}."),
        data={"max_abs_error": run.max_abs_error}))
    return tuple(out)
