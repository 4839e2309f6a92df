"""Megatron-LM's two parallel linear layers, forward and backward, and the blocks that are one of
them alone.

Shoeybi et al. 2019, "Megatron-LM", §3 and Fig. 3; Korthikanti et al. 2022, §4.2.2 and Fig. 5.

Column-parallel, Y = X·W with W cut into column blocks: rank r holds W[:, r·out/t …] and
computes Yᵣ = X·Wᵣ, its columns of Y. Every rank needs all of X: the operator *f* in front is
the identity in forward and an all-reduce in backward, because each rank's dXᵣ = dYᵣ·Wᵣᵀ is
only a partial sum of dX.

Row-parallel, Y = X·W with W cut into row blocks: rank r holds W[r·in/t …, :] and the matching
columns Xᵣ of X and computes the partial sum Yᵣ = Xᵣ·Wᵣ; Y = Σᵣ Yᵣ. The operator *g* after it is
an all-reduce in forward and the identity in backward (every rank needs all of dY, and has it).

With sequence parallelism (Korthikanti §4.2.2) the tensors between blocks are cut along the
sequence instead of copied: f's place is taken by an all-gather in forward (reduce-scatter in
backward) and g's by a reduce-scatter in forward (all-gather in backward). The column layer
keeps only its sequence shard of X for backward (that is what makes Table 2's 34·sbh/t) and
all-gathers it again there for the weight gradient, as Megatron-LM's
``LinearWithGradAccumulationAndAsyncCommunication`` does, overlapping it with the dX matmul.

Biases are left out: Megatron adds the row-parallel bias after the all-reduce, which changes no
communication.
"""

from __future__ import annotations

import numpy as np

from app.sim.tensor_parallel.ops import all_reduce, reduce_scatter, split
from app.sim.tensor_parallel.program import Operand, Recorder, dims, dot_text, sum_text


def seq_shards(rec: Recorder, name: str, x: np.ndarray, note: str = "") -> Operand:
    """Rank r's rows of ``x`` (its share of the sequence)."""
    return rec.sharded(name, split(x, rec.tp, 0), note or "its rows (sequence shard)")


def sum_partials(rec: Recorder, parts: list[np.ndarray], sp: bool, name: str, pass_: str,
                 flow: str, *, why: tuple[str, str], purpose: tuple[str, str]):
    """Complete every rank's partial sum: an all-reduce, or with sequence parallelism a
    reduce-scatter that leaves each rank its own rows. ``why`` and ``purpose`` say so in words,
    (all-reduce, reduce-scatter). Returns the sum (an array) or each rank's rows (a list)."""
    before = rec.sharded(f"{name}ᵣ", parts, "partial sum")
    first = sum_text([float(p[0, 0]) for p in parts])
    if sp:
        rows = reduce_scatter(parts, 0)
        rec.collective("reduce_scatter", pass_, flow, f"{name}ᵣ = reduce-scatter({name}ᵣ)",
                       f"{why[1]} Element [0, 0] on rank 0: {first}.", before,
                       rec.summed(f"{name}ᵣ", rows, "its rows of the sum"), parts[0].size,
                       purpose=purpose[1])
        return rows
    total = all_reduce(parts)
    rec.collective("all_reduce", pass_, flow, f"{name} = Σᵣ {name}ᵣ",
                   f"{why[0]} Element [0, 0]: {first}.", before,
                   rec.summed(name, total, "sum of every rank"), total.size, purpose=purpose[0])
    return total


def column_forward(rec: Recorder, x: Operand, w_parts: list[np.ndarray], sp: bool, *,
                   names: tuple[str, str, str], flows: tuple[str, str]) -> tuple[Operand, list]:
    """Yᵣ = X·Wᵣ. ``x`` is the whole input on every rank, or with ``sp`` each rank's rows, which
    are all-gathered first. Returns (the input as used, every rank's Yᵣ)."""
    x_name, w_name, y_name = names
    comm_flow, mm_flow = flows
    t = rec.tp
    if sp:
        pieces = list(x.values)
        full = rec.gathered(x_name, pieces, 0, "gathered: every token")
        rec.collective(
            "all_gather", "forward", comm_flow, f"{x_name} = all-gather({x_name}ᵣ)",
            f"All-gather along the sequence: each rank sends its {dims(pieces[0])} rows of "
            f"{x_name} and receives the other {t - 1}, so every rank holds the whole "
            f"{dims(full.values[0])} {x_name} the column-parallel matmul needs (in backward this "
            f"becomes a reduce-scatter).", x, full, full.values[0].size,
            purpose=f"gather the sequence shards of {x_name} before the column-parallel matmul")
        x = full
    xv = x.values[0]
    y_parts = [xv @ w for w in w_parts]
    w_op = rec.sharded(f"{w_name}ᵣ", w_parts, "its columns" if t > 1 else "")
    first = dot_text(xv[0], w_parts[0][:, 0])
    rec.compute(
        "forward", mm_flow, "column-parallel matmul", f"{y_name}ᵣ = {x_name} · {w_name}ᵣ",
        f"Each rank multiplies the whole {dims(xv)} {x_name} by its {dims(w_parts[0])} block of "
        f"columns of {w_name}"
        f"{'' if sp else ' — f is the identity in forward: every rank already has ' + x_name}. "
        f"Rank 0's first element: {first}. The {t} results are {y_name}'s columns, side by side; "
        f"no rank needs another's.", (x, w_op), ("·", "="),
        rec.sharded(f"{y_name}ᵣ", y_parts, "its columns" if t > 1 else ""))
    return x, y_parts


def column_backward(rec: Recorder, x_used: Operand, x_kept: Operand, dy_parts: list[np.ndarray],
                    w_parts: list[np.ndarray], sp: bool, *, names: tuple[str, str, str],
                    flows: tuple[str, str]):
    """Backward of :func:`column_forward`, in Megatron-LM's order: (SP: all-gather X again),
    dXᵣ = dYᵣ·Wᵣᵀ, all-reduce (SP: reduce-scatter) of dX, dWᵣ = Xᵀ·dYᵣ.
    Returns (dX: the summed array, or with ``sp`` each rank's rows; every rank's dWᵣ)."""
    x_name, w_name, y_name = names
    comm_flow, mm_flow = flows
    t = rec.tp
    if sp:
        rec.collective(
            "all_gather", "backward", comm_flow, f"{x_name} = all-gather({x_name}ᵣ) again",
            f"Sequence parallelism kept only each rank's rows of {x_name} for backward (that is "
            f"the memory it saves), so the weight gradient needs them gathered again: an extra "
            f"all-gather of {x_name} ({x_used.values[0].size} elements), which Megatron-LM "
            f"overlaps with the next matmul.", x_kept, x_used, x_used.values[0].size,
            purpose=f"re-gather {x_name} for the weight gradient of {w_name}")
    dx_parts = [dy @ w.T for dy, w in zip(dy_parts, w_parts)]
    rec.compute(
        "backward", mm_flow, "input gradient (partial)",
        f"d{x_name}ᵣ = d{y_name}ᵣ · {w_name}ᵣᵀ",
        f"Every rank turns its columns of the gradient d{y_name}ᵣ into a gradient for the whole "
        f"{x_name}: d{x_name}ᵣ = d{y_name}ᵣ · {w_name}ᵣᵀ ({dims(dx_parts[0])}). "
        + (f"Each is only a partial sum over its {w_parts[0].shape[1]} columns: rank 0's first "
           f"element is {dot_text(dy_parts[0][0], w_parts[0][0])}." if t > 1 else ""),
        (rec.sharded(f"d{y_name}ᵣ", dy_parts), rec.sharded(f"{w_name}ᵣᵀ", [w.T for w in w_parts])),
        ("·", "="), rec.sharded(f"d{x_name}ᵣ", dx_parts, "partial sum" if t > 1 else ""))
    rows = dx_parts[0].shape[0] // t
    dx = sum_partials(
        rec, dx_parts, sp, f"d{x_name}", "backward", comm_flow,
        why=(f"f's backward is an all-reduce: every rank adds the {t} partial sums and gets the "
             f"whole d{x_name}.",
             f"The backward of the all-gather is a reduce-scatter: the partial sums are added "
             f"and each rank keeps only its own {rows} row{'s' if rows > 1 else ''}."),
        purpose=(f"f: sum the partial d{x_name}",
                 f"sum the partial d{x_name}, keep each rank's rows"))
    xv = x_used.values[0]
    dw_parts = [xv.T @ dy for dy in dy_parts]
    rec.compute(
        "backward", mm_flow, "weight gradient", f"d{w_name}ᵣ = {x_name}ᵀ · d{y_name}ᵣ",
        f"The weight gradient needs no communication: rank r's columns of d{w_name} come from "
        f"the whole {x_name} and its own d{y_name}ᵣ. Rank 0's first element: "
        f"{dot_text(xv[:, 0], dy_parts[0][:, 0])}.",
        (rec.replicated(f"{x_name}ᵀ", xv.T) if not sp else rec.gathered(
            f"{x_name}ᵀ", [p.T for p in x_kept.values], 1), rec.sharded(f"d{y_name}ᵣ", dy_parts)),
        ("·", "="), rec.sharded(f"d{w_name}ᵣ", dw_parts, "its columns" if t > 1 else ""))
    return dx, dw_parts


def row_forward(rec: Recorder, x_parts: list[np.ndarray], w_parts: list[np.ndarray], sp: bool,
                *, names: tuple[str, str, str], flows: tuple[str, str]):
    """Yᵣ = Xᵣ·Wᵣ (a partial sum), then all-reduce (SP: reduce-scatter along the sequence).
    Returns Y (an array) or with ``sp`` each rank's rows of it (a list)."""
    x_name, w_name, y_name = names
    mm_flow, comm_flow = flows
    t = rec.tp
    y_parts = [x @ w for x, w in zip(x_parts, w_parts)]
    rec.compute(
        "forward", mm_flow, "row-parallel matmul", f"{y_name}ᵣ = {x_name}ᵣ · {w_name}ᵣ",
        f"Each rank multiplies its {dims(x_parts[0])} columns of {x_name} by its "
        f"{dims(w_parts[0])} rows of {w_name}. The result has {y_name}'s full shape "
        f"{dims(y_parts[0])} but is only a partial sum: rank 0's first element is "
        f"{dot_text(x_parts[0][0], w_parts[0][:, 0])}, from its {w_parts[0].shape[0]} rows alone.",
        (rec.sharded(f"{x_name}ᵣ", x_parts, "its columns" if t > 1 else ""),
         rec.sharded(f"{w_name}ᵣ", w_parts, "its rows" if t > 1 else "")), ("·", "="),
        rec.sharded(f"{y_name}ᵣ", y_parts, "partial sum" if t > 1 else ""))
    rows = y_parts[0].shape[0] // t
    return sum_partials(
        rec, y_parts, sp, y_name, "forward", comm_flow,
        why=(f"g is an all-reduce in forward: the {t} partial sums are added element by element "
             f"and every rank receives the whole {y_name}.",
             f"With sequence parallelism the all-reduce becomes a reduce-scatter: the partial "
             f"sums are added and each rank keeps only its {rows} row{'s' if rows > 1 else ''} — "
             f"the LayerNorm and dropout after it work on rows independently."),
        purpose=(f"g: sum the partial {y_name}",
                 f"sum the partial {y_name}, keep each rank's rows"))


def row_backward(rec: Recorder, dy: np.ndarray | list[np.ndarray], x_parts: list[np.ndarray],
                 w_parts: list[np.ndarray], sp: bool, *, names: tuple[str, str, str],
                 flows: tuple[str, str]):
    """Backward of :func:`row_forward`: (SP: all-gather dY), then dXᵣ = dY·Wᵣᵀ and
    dWᵣ = Xᵣᵀ·dY, both local. Returns (every rank's dXᵣ, every rank's dWᵣ)."""
    x_name, w_name, y_name = names
    mm_flow, comm_flow = flows
    t = rec.tp
    if sp:
        pieces = list(dy)
        gathered = rec.gathered(f"d{y_name}", pieces, 0, "gathered: every token")
        rec.collective(
            "all_gather", "backward", comm_flow, f"d{y_name} = all-gather(d{y_name}ᵣ)",
            f"The reduce-scatter's backward is an all-gather: each rank holds the gradient of its "
            f"own {dims(pieces[0])} rows only, and the row-parallel matmul needs d{y_name} for "
            f"all {gathered.values[0].shape[0]} tokens.",
            rec.sharded(f"d{y_name}ᵣ", pieces, "its rows"), gathered,
            gathered.values[0].size, purpose=f"gather the sequence shards of d{y_name}")
        dy = gathered.values[0]
        dy_op = gathered
    else:
        dy_op = rec.replicated(f"d{y_name}", dy, "the same on every rank")
    dx_parts = [dy @ w.T for w in w_parts]
    dw_parts = [x.T @ dy for x in x_parts]
    rec.compute(
        "backward", mm_flow, "row-parallel backward", f"d{x_name}ᵣ = d{y_name} · {w_name}ᵣᵀ",
        f"g's backward is the identity: every rank already holds the whole d{y_name} "
        f"({dims(dy)}). Its gradient for its own columns of {x_name} needs no communication: "
        f"rank 0's first element is {dot_text(dy[0], w_parts[0][0])}.",
        (dy_op, rec.sharded(f"{w_name}ᵣᵀ", [w.T for w in w_parts])), ("·", "="),
        rec.sharded(f"d{x_name}ᵣ", dx_parts, "its columns" if t > 1 else ""))
    rec.compute(
        "backward", mm_flow, "weight gradient", f"d{w_name}ᵣ = {x_name}ᵣᵀ · d{y_name}",
        f"Rank r's rows of d{w_name} come from its own columns of {x_name} and the whole "
        f"d{y_name}: rank 0's first element is {dot_text(x_parts[0][:, 0], dy[:, 0])}.",
        (rec.sharded(f"{x_name}ᵣᵀ", [x.T for x in x_parts]), dy_op), ("·", "="),
        rec.sharded(f"d{w_name}ᵣ", dw_parts, "its rows" if t > 1 else ""))
    return dx_parts, dw_parts
