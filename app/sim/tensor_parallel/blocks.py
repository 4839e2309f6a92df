"""The column-parallel and row-parallel linear layers as stand-alone blocks, forward and
backward, each ending in a check against the unsharded computation (app/sim/tensor_parallel/reference.py).

Column: Y = X·W (h → f), gathered on every rank as Megatron's ``ColumnParallelLinear`` does with
its default ``gather_output=True``; with sequence parallelism Megatron forbids gathering the
output, which stays split by columns (it is assembled here only for the display).
Row: Y = X·W (f → h) with a replicated input that every rank cuts into its columns
(``input_is_parallel=False``), whose backward is an all-gather of dX.
"""

from __future__ import annotations

from app.sim.tensor_parallel.inputs import BlockInputs
from app.sim.tensor_parallel.linear import column_backward, column_forward, row_backward, row_forward, seq_shards
from app.sim.tensor_parallel.ops import split
from app.sim.tensor_parallel.program import BlockResult, FlowNode, Recorder, Step, compare, dims
from app.sim.tensor_parallel.reference import Reference


def column_flow(sp: bool) -> tuple[FlowNode, ...]:
    if sp:
        return (FlowNode("input", "Xᵣ", "rows split along the sequence", "sequence"),
                FlowNode("enter", "all-gather", "fwd all-gather · bwd reduce-scatter", "comm"),
                FlowNode("matmul", "X · Wᵣ", "column-parallel", "tensor"),
                FlowNode("exit", "Yᵣ", "stays split by columns", "tensor"))
    return (FlowNode("input", "X", "the same on every rank", "replicated"),
            FlowNode("enter", "f", "fwd identity · bwd all-reduce", "comm"),
            FlowNode("matmul", "X · Wᵣ", "column-parallel", "tensor"),
            FlowNode("exit", "all-gather", "gather_output: Y on every rank", "comm"))


def row_flow(sp: bool) -> tuple[FlowNode, ...]:
    return (FlowNode("input", "X → Xᵣ", "each rank takes its columns", "replicated"),
            FlowNode("matmul", "Xᵣ · Wᵣ", "row-parallel: partial sums", "tensor"),
            FlowNode("exit", "reduce-scatter" if sp else "g",
                     "fwd reduce-scatter · bwd all-gather" if sp
                     else "fwd all-reduce · bwd identity", "comm"),
            FlowNode("output", "Yᵣ" if sp else "Y",
                     "rows split along the sequence" if sp else "the same on every rank",
                     "sequence" if sp else "replicated"))


def column_block(inp: BlockInputs, tp: int, sp: bool, ref: Reference) -> BlockResult:
    rec = Recorder(tp)
    x, w, dy = inp.x, inp.weights["W"], inp.dy
    w_parts = split(w, tp, 1)
    x_op = seq_shards(rec, "Xᵣ", x) if sp else rec.replicated("X", x, "the same on every rank")
    rec.add(Step("setup", "setup", "what each rank holds", "", "input",
                 f"W ({dims(w)}) is cut into {tp} blocks of {w.shape[1] // tp} columns, one per "
                 f"rank. " + (f"With sequence parallelism X ({dims(x)}) is cut along the "
                              f"sequence: each rank holds {x.shape[0] // tp} of its "
                              f"{x.shape[0]} rows." if sp else
                              f"Every rank holds the whole input X ({dims(x)})."),
                 (x_op, rec.sharded("Wᵣ", w_parts, "its columns" if tp > 1 else "")), ("", "")))
    x_used, y_parts = column_forward(rec, x_op, w_parts, sp, names=("X", "W", "Y"),
                                     flows=("enter", "matmul"))
    y_op = rec.gathered("Y", y_parts, 1, "every rank's columns")
    if not sp:
        rec.collective("all_gather", "forward", "exit", "Y = all-gather(Yᵣ)",
                       f"gather_output: every rank sends its {dims(y_parts[0])} block of columns "
                       f"to the others, so each holds the whole {dims(y_op.values[0])} Y, the "
                       f"blocks side by side in rank order.",
                       rec.sharded("Yᵣ", y_parts, "its columns"), y_op, y_op.values[0].size,
                       purpose="gather_output: the whole Y on every rank")
    rec.check(_check_caption("Y", compare("Y", y_op, ref.output).error, sp and tp > 1),
              (compare("Y", y_op, ref.output),), "forward result")

    # backward: Y's gradient arrives; each rank needs only its columns of it
    dy_parts = split(dy, tp, 1)
    rec.add(Step("backward", "setup", "the gradient arrives", "", "exit",
                 f"Backward starts from dY ({dims(dy)}), the gradient of the loss with respect to "
                 f"Y. " + ("Y stayed split by columns, so each rank receives the gradient of its "
                           "own columns." if sp else
                           "The backward of the all-gather is a split: each rank keeps its own "
                           "columns of dY, with no communication."),
                 (rec.sharded("dYᵣ", dy_parts, "its columns" if tp > 1 else ""),), ("",)))
    dx, dw_parts = column_backward(rec, x_used, x_op, dy_parts, w_parts, sp,
                                   names=("X", "W", "Y"), flows=("enter", "matmul"))
    dw_op = rec.gathered("dW", dw_parts, 1, "every rank's columns")
    dx_op = rec.gathered("dX", dx, 0) if sp else rec.summed("dX", dx)
    checks = (compare("dW", dw_op, ref.grads["W"]), compare("dX", dx_op, ref.input_grad))
    rec.check(grads_caption(checks), checks, "gradients")
    return BlockResult(tuple(rec.steps), column_flow(sp), y_op,
                       tuple({"W": p} for p in w_parts), tuple(y_parts),
                       tuple(y_parts) if sp else (y_op.values[0],) * tp,
                       {"W": dw_op.values[0]}, tuple({"W": p} for p in dw_parts),
                       dx_op.values[0])


def row_block(inp: BlockInputs, tp: int, sp: bool, ref: Reference) -> BlockResult:
    rec = Recorder(tp)
    x, w, dy = inp.x, inp.weights["W"], inp.dy
    x_parts, w_parts = split(x, tp, 1), split(w, tp, 0)
    rec.add(Step("setup", "setup", "what each rank holds", "", "input",
                 f"W ({dims(w)}) is cut into {tp} blocks of {w.shape[0] // tp} rows, one per "
                 f"rank. Every rank receives the whole input X ({dims(x)}) and keeps only the "
                 f"{x.shape[1] // tp} columns that meet its rows of W — a local split, no "
                 f"communication.",
                 (rec.sharded("Xᵣ", x_parts, "its columns" if tp > 1 else ""),
                  rec.sharded("Wᵣ", w_parts, "its rows" if tp > 1 else "")), ("", "")))
    y = row_forward(rec, x_parts, w_parts, sp, names=("X", "W", "Y"), flows=("matmul", "exit"))
    y_op = rec.gathered("Y", y, 0, "every rank's rows") if sp else rec.summed("Y", y)
    rec.check(_check_caption("Y", compare("Y", y_op, ref.output).error, False),
              (compare("Y", y_op, ref.output),), "forward result")

    dy_in = split(dy, tp, 0) if sp else dy
    rec.add(Step("backward", "setup", "the gradient arrives", "", "output",
                 f"Backward starts from dY ({dims(dy)}). " +
                 ("Y was split along the sequence, so each rank holds the gradient of its own "
                  f"{dy.shape[0] // tp} rows." if sp else "Every rank holds all of it."),
                 ((rec.sharded("dYᵣ", dy_in, "its rows") if sp
                   else rec.replicated("dY", dy, "the same on every rank")),), ("",)))
    dx_parts, dw_parts = row_backward(rec, dy_in, x_parts, w_parts, sp, names=("X", "W", "Y"),
                                      flows=("matmul", "exit"))
    dx_op = rec.gathered("dX", dx_parts, 1, "every rank's columns")
    rec.collective("all_gather", "backward", "input", "dX = all-gather(dXᵣ)",
                   f"The input was split locally, so its backward gathers: every rank sends its "
                   f"{dims(dx_parts[0])} columns of dX, and all hold the whole "
                   f"{dims(dx_op.values[0])} dX.", rec.sharded("dXᵣ", dx_parts, "its columns"),
                   dx_op, dx_op.values[0].size, purpose="the backward of splitting X by columns")
    dw_op = rec.gathered("dW", dw_parts, 0, "every rank's rows")
    checks = (compare("dW", dw_op, ref.grads["W"]), compare("dX", dx_op, ref.input_grad))
    rec.check(grads_caption(checks), checks, "gradients")
    partial = [xp @ wp for xp, wp in zip(x_parts, w_parts)]
    return BlockResult(tuple(rec.steps), row_flow(sp), y_op, tuple({"W": p} for p in w_parts),
                       tuple(partial), tuple(y) if sp else (y,) * tp,
                       {"W": dw_op.values[0]}, tuple({"W": p} for p in dw_parts),
                       dx_op.values[0])


def _check_caption(name: str, error: float, display_only: bool) -> str:
    text = (f"The tensor-parallel {name}, assembled from every rank, next to the same product "
            f"computed on one GPU without any sharding. Largest difference: {error:.3g}")
    text += (" — exact: the inputs are small integers." if error == 0
             else " — rounding only: floating-point sums depend on their order.")
    if display_only:
        text += (" (Megatron-LM does not gather a column-parallel output under sequence "
                 "parallelism; it is put together here only to compare.)")
    return text


def grads_caption(checks) -> str:
    parts = ", ".join(f"{c.name} {c.error:.3g}" for c in checks)
    return (f"The gradients, gathered from the ranks' shards, against backward on one GPU. "
            f"Largest differences: {parts}.")

