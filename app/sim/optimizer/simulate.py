"""Optimizer steps on a small parameter vector, one operation at a time, with the real numbers.

The loss is a seeded quadratic, L(w) = ½ Σᵢ aᵢ (wᵢ − cᵢ)², so the gradient is g = a ⊙ (w − c)
(curvatures aᵢ in [0.5, 4], minimum c). The updates are torch.optim's, in its order of
operations (torch 2.x, ``SGD``, ``Adam``, ``AdamW``), with learning rate η and weight decay λ:

    SGD         g ← g + λw (L2);  w ← w − ηg
    momentum    g ← g + λw;  b ← μb + g (b = g at the first step);  w ← w − ηb
                (torch's form of Polyak momentum, Sutskever et al. 2013)
    Adam        g ← g + λw;  m ← β₁m + (1 − β₁)g;  v ← β₂v + (1 − β₂)g²;
                m̂ = m/(1 − β₁ᵗ);  v̂ = v/(1 − β₂ᵗ);  w ← w − η m̂/(√v̂ + ε)
                (Kingma & Ba 2015, Algorithm 1)
    AdamW       as Adam, but the decay is decoupled from the gradient: w ← w(1 − ηλ) first
                (Loshchilov & Hutter 2019, Algorithm 2)

States are stored in fp32; every update is computed exactly and rounded once to fp32 (fused
kernels round once, too), so torch.optim agrees to about one fp32 ulp (workers/optimizer.py).

Mixed precision (Micikevicius et al. 2018): the model holds bf16 weights w₁₆ and produces bf16
gradients; the optimizer holds an fp32 master copy w and its states, updates w with the fp32
gradient and casts w back to w₁₆. An update smaller than half a bf16 ulp of w₁₆ would vanish if
it were added to w₁₆ directly; each cast frame counts how many did.

Bytes kept per parameter come from :mod:`app.sim.memory.model_states` (ZeRO §3.1): mixed-precision
Adam keeps 2 + 2 + 12, of which the 12 bytes of optimizer state (master, m, v) are what ZeRO
stage 1 shards first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import ml_dtypes
import numpy as np

from app.sim.memory import model_states
from app.sim.optimizer import rules
from app.sim.optimizer.problem import SIMULATED, make_problem
from app.sim.trace import Frame, plain, readonly

if TYPE_CHECKING:
    from app.sim.optimizer.params import OptimizerParams

F32 = np.float32
BF16 = ml_dtypes.bfloat16


@dataclass(frozen=True)
class Row:
    """One tensor of the deck: a row of ``size`` numbers."""

    key: str
    label: str
    dtype: str
    bytes_per_param: int
    """bytes it keeps per parameter between steps (0: computed and dropped within the step)"""
    torch_name: str = ""


@dataclass(frozen=True)
class Snapshot:
    """The tensors after an optimizer step (step 0: before the first)."""

    step: int
    params: np.ndarray          # fp32 (master copy in mixed precision)
    model_params: np.ndarray    # what the model computes with: bf16 in mixed precision
    grad: np.ndarray | None     # what the backward pass produced (param.grad), before decay
    states: dict[str, np.ndarray]
    loss: float                 # L(model_params)


@dataclass(frozen=True)
class OptimizerTrace:
    params: OptimizerParams
    curvature: np.ndarray
    target: np.ndarray
    rows: tuple[Row, ...]
    frames: tuple[Frame, ...]
    values: np.ndarray
    """(frames, rows, size) float64: each row after each frame; NaN where a row is undefined"""
    changed: tuple[frozenset[str], ...]
    """per frame: the rows that frame changed"""
    history: tuple[Snapshot, ...]
    lost_updates: tuple[int, ...]
    """per step (mixed precision): elements whose update would vanish if added in bf16"""
    bytes_per_param: model_states.ModelStates
    zero: tuple[model_states.ModelStates, ...]
    """per-GPU bytes for ZeRO stages 0–3 at ``param_count`` parameters over ``dp`` ranks"""

    def row_values(self, frame: int, key: str) -> list[float] | None:
        k = [r.key for r in self.rows].index(key)
        row = self.values[frame, k]
        return None if np.isnan(row).all() else row.tolist()

    def to_dict(self) -> dict:
        p = self.params
        last = self.history[-1]
        return {
            "optimizer": p.optimizer, "precision": p.precision, "size": p.size,
            "steps": p.steps, "lr": p.lr, "momentum": p.momentum, "beta1": p.beta1,
            "beta2": p.beta2, "eps": p.eps, "weight_decay": p.weight_decay, "seed": p.seed,
            "loss": "L(w) = ½ Σ a_i (w_i − c_i)²",
            "curvature": plain(self.curvature), "target": plain(self.target),
            "initial_params": plain(self.history[0].params),
            "final_params": plain(last.params),
            "final_model_params": plain(last.model_params),
            "final_states": {k: plain(v) for k, v in last.states.items()},
            "history": [{"step": s.step, "params": plain(s.params),
                         "model_params": plain(s.model_params),
                         "grad": None if s.grad is None else plain(s.grad),
                         "states": {k: plain(v) for k, v in s.states.items()},
                         "loss": s.loss} for s in self.history],
            "rows": [{"key": r.key, "label": r.label, "dtype": r.dtype,
                      "bytes_per_param": r.bytes_per_param, "torch_name": r.torch_name}
                     for r in self.rows],
            "frames": [{"step": f.step, "phase": f.phase, "caption": f.caption,
                        "changed": sorted(self.changed[k]),
                        "values": {r.key: self.row_values(k, r.key) for r in self.rows}}
                       for k, f in enumerate(self.frames)],
            "lost_updates": list(self.lost_updates),
            "bytes_per_param": _states_dict(self.bytes_per_param),
            "zero": {"param_count": p.param_count, "dp": p.dp,
                     "per_gpu_bytes": [_states_dict(z) for z in self.zero]},
        }


def _states_dict(s: model_states.ModelStates) -> dict:
    return {"params": s.params, "grads": s.grads, "optimizer": s.optimizer, "total": s.total}


def gradient(model_params: np.ndarray, curvature: np.ndarray, target: np.ndarray,
             precision: str) -> np.ndarray:
    """g = a ⊙ (w − c), in fp32 arithmetic; mixed precision rounds it to bf16 (what a bf16
    backward pass hands the optimizer). Returns fp32 values (the bf16 ones, exactly)."""
    g = curvature * (model_params.astype(F32) - target)
    if precision == "mixed":
        g = g.astype(BF16).astype(F32)
    return g


def to_model(master: np.ndarray, precision: str) -> np.ndarray:
    """The weights the model computes with: a bf16 cast of the master copy in mixed precision."""
    return master.astype(BF16).astype(F32) if precision == "mixed" else master.copy()


def _f32(x) -> np.ndarray:
    """Round an exactly computed float64 result once to fp32."""
    return np.asarray(x, dtype=np.float64).astype(F32)


def rows_for(optimizer: str, precision: str) -> tuple[Row, ...]:
    mixed = precision == "mixed"
    pb, gb = model_states.param_bytes(precision), model_states.grad_bytes(precision)
    rows = []
    if mixed:
        rows.append(Row("w16", "weights w₁₆ (model copy)", "bf16", pb, "model.parameters()"))
        rows.append(Row("w", "master weights w", "fp32", 4, "optimizer param (fp32 copy)"))
    else:
        rows.append(Row("w", "weights w", "fp32", pb, "model.parameters()"))
    rows.append(Row("g", "gradient g", "bf16" if mixed else "fp32", gb, "param.grad"))
    if optimizer == "momentum":
        rows.append(Row("buf", "momentum buffer b", "fp32", 4, "state['momentum_buffer']"))
    if optimizer in ("adam", "adamw"):
        rows += [Row("m", "1st moment m", "fp32", 4, "state['exp_avg']"),
                 Row("v", "2nd moment v", "fp32", 4, "state['exp_avg_sq']"),
                 Row("m_hat", "m̂ = m / (1 − β₁ᵗ)", "fp32", 0),
                 Row("v_hat", "v̂ = v / (1 − β₂ᵗ)", "fp32", 0)]
    rows.append(Row("update", "update Δw", "fp32", 0))
    return tuple(rows)


def _num(x: float) -> str:
    return f"{x:.4g}"


class _Recorder:
    """Collects frames: each records every row's values and which rows changed."""

    def __init__(self, rows: tuple[Row, ...], size: int):
        self.keys = [r.key for r in rows]
        self.current = {k: np.full(size, np.nan) for k in self.keys}
        self.frames: list[Frame] = []
        self.values: list[np.ndarray] = []
        self.changed: list[frozenset[str]] = []

    def set(self, **rows: np.ndarray | None) -> None:
        for key, value in rows.items():
            if key not in self.current:  # a row this optimizer does not have
                continue
            self.current[key] = (np.full_like(self.current[key], np.nan) if value is None
                                 else np.asarray(value, dtype=np.float64))

    def frame(self, step: int, phase: str, caption: str, **rows: np.ndarray | None) -> None:
        self.set(**rows)
        self.frames.append(Frame(step, caption, (), phase))
        self.values.append(np.stack([self.current[k] for k in self.keys]))
        self.changed.append(frozenset(k for k in rows if k in self.current))


def simulate(p: OptimizerParams) -> OptimizerTrace:
    if p.optimizer not in SIMULATED:
        raise ValueError(f"optimizer must be one of {SIMULATED}, got {p.optimizer!r}")
    mixed = p.precision == "mixed"
    a, c, w0 = make_problem(p.size, p.seed)
    rows = rows_for(p.optimizer, p.precision)
    rec = _Recorder(rows, p.size)
    adam = p.optimizer in ("adam", "adamw")
    lr, lam = float(F32(p.lr)), float(F32(p.weight_decay))

    master = w0.copy()
    model = to_model(master, p.precision)
    states: dict[str, np.ndarray] = {}
    if adam:
        states = {"exp_avg": np.zeros(p.size, F32), "exp_avg_sq": np.zeros(p.size, F32)}

    def loss(w: np.ndarray) -> float:
        return float(0.5 * np.sum(a.astype(np.float64) * (w.astype(np.float64) - c) ** 2))

    history = [Snapshot(0, master.copy(), model.copy(), None,
                        {k: v.copy() for k, v in states.items()}, loss(model))]
    start = {"w": master}
    if mixed:
        start["w16"] = model
    if adam:
        start.update(m=states["exp_avg"], v=states["exp_avg_sq"])
    rec.frame(0, "start", _start_caption(p, a, c, w0, loss(model)), **start)

    lost: list[int] = []
    for t in range(1, p.steps + 1):
        # 1. forward and backward: the gradient at the model's weights
        g = raw_grad = gradient(model, a, c, p.precision)
        rec.frame(t, "gradient", _grad_caption(p, t, a, c, model, g), g=g,
                  m_hat=None, v_hat=None, update=None)
        # 2. weight decay: L2 folds λw into the gradient; AdamW shrinks w itself
        if lam:
            if p.optimizer == "adamw":
                before = master
                master = _f32(rules.decoupled_decay(master.astype(np.float64), lr, lam))
                rec.frame(t, "weight decay", f"AdamW decays the weights directly, before and "
                          f"apart from the gradient: w ← w·(1 − ηλ) = w·{_num(1 - lr * lam)}; "
                          f"w[0] {_num(before[0])} → {_num(master[0])}. Adam with L2 would add "
                          f"λw to g instead, and m and v would then rescale it.", w=master)
            else:
                g = _f32(rules.l2_decay(g.astype(np.float64), master.astype(np.float64), lam))
                rec.frame(t, "weight decay", f"Weight decay as L2 regularisation: g ← g + λw "
                          f"(λ = {_num(lam)}), so g[0] = {_num(g[0])}. "
                          + ("Adam then divides it by √v̂ like any gradient: AdamW decouples it."
                             if adam else "For SGD this is the same as shrinking w."), g=g)
        # 3. the optimizer's states and the update
        if p.optimizer == "sgd":
            update = _f32(-lr * g.astype(np.float64))
            rec.frame(t, "update", f"SGD keeps no state: Δw = −η·g = −{_num(lr)} × "
                      f"{_num(g[0])} = {_num(update[0])} for element 0.", update=update)
            new_master = _f32(master.astype(np.float64) - lr * g.astype(np.float64))
        elif p.optimizer == "momentum":
            old = states.get("momentum_buffer")
            buf = g.copy() if old is None else _f32(rules.momentum_buffer(
                old.astype(np.float64), g, p.momentum))
            states["momentum_buffer"] = buf
            how = ("At the first step torch sets b = g." if old is None else
                   f"b[0] = {_num(p.momentum)} × {_num(old[0])} + {_num(g[0])} = {_num(buf[0])}.")
            rec.frame(t, "momentum", f"The momentum buffer accumulates gradients: b ← μ·b + g "
                      f"(μ = {_num(p.momentum)}). {how} It costs 4 bytes per parameter.",
                      buf=buf)
            update = _f32(-lr * buf.astype(np.float64))
            rec.frame(t, "update", f"Step along the buffer, not the gradient: Δw = −η·b = "
                      f"{_num(update[0])} for element 0.", update=update)
            new_master = _f32(master.astype(np.float64) - lr * buf.astype(np.float64))
        else:
            m_old, v_old = states["exp_avg"], states["exp_avg_sq"]
            g64 = g.astype(np.float64)
            m = _f32(rules.first_moment(m_old.astype(np.float64), g64, p.beta1))
            rec.frame(t, "first moment", f"m ← β₁·m + (1 − β₁)·g: a running mean of the "
                      f"gradient. m[0] = {_num(p.beta1)} × {_num(m_old[0])} + "
                      f"{_num(1 - p.beta1)} × {_num(g[0])} = {_num(m[0])}.", m=m)
            v = _f32(rules.second_moment(v_old.astype(np.float64), g64, p.beta2))
            rec.frame(t, "second moment", f"v ← β₂·v + (1 − β₂)·g²: a running mean of the "
                      f"squared gradient. v[0] = {_num(p.beta2)} × {_num(v_old[0])} + "
                      f"{_num(1 - p.beta2)} × {_num(g[0])}² = {_num(v[0])}.", v=v)
            states["exp_avg"], states["exp_avg_sq"] = m, v
            bc1, bc2 = rules.bias_correction(p.beta1, t), rules.bias_correction(p.beta2, t)
            m_hat = _f32(m.astype(np.float64) / bc1)
            v_hat = _f32(v.astype(np.float64) / bc2)
            rec.frame(t, "bias correction", f"m and v started at 0, so early on they are too "
                      f"small: divide by 1 − β₁ᵗ = {_num(bc1)} and 1 − β₂ᵗ = {_num(bc2)}. "
                      f"m̂[0] = {_num(m_hat[0])}, v̂[0] = {_num(v_hat[0])}.",
                      m_hat=m_hat, v_hat=v_hat)
            # torch: denom = √v/√(1 − β₂ᵗ) + ε;  w ← w − (η/(1 − β₁ᵗ))·m/denom
            step = rules.adam_step(m.astype(np.float64), v.astype(np.float64), t, lr, p.beta1,
                                   p.beta2, p.eps)
            update = _f32(-step)
            rec.frame(t, "update", f"Δw = −η·m̂/(√v̂ + ε): each element moves about η = "
                      f"{_num(lr)} whatever its gradient's scale, since m̂/√v̂ ≈ ±1 when the "
                      f"gradient is steady. Δw[0] = {_num(update[0])}.", update=update)
            new_master = _f32(master.astype(np.float64) - step)
        # 4. apply; mixed precision casts the master copy back to the bf16 model copy
        if mixed:
            rec.frame(t, "apply", f"The fp32 master copy takes the update: w[0] "
                      f"{_num(master[0])} → {_num(new_master[0])}.", w=new_master)
            vanished = int(np.sum((model + update).astype(BF16).astype(F32) == model))
            lost.append(vanished)
            model = to_model(new_master, p.precision)
            rec.frame(t, "cast to bf16", f"w₁₆ ← bf16(w): the model computes with "
                      f"{_num(model[0])}. Added to w₁₆ directly, {vanished} of {p.size} "
                      f"updates would have rounded away — bf16 keeps 8 significant bits; "
                      f"that is why the master copy is fp32.", w16=model)
        else:
            rec.frame(t, "apply", f"w ← w + Δw: w[0] {_num(master[0])} → "
                      f"{_num(new_master[0])}; the loss is now {_num(loss(new_master))}.",
                      w=new_master)
            model = new_master
        master = new_master
        history.append(Snapshot(t, master.copy(), model.copy(), raw_grad.copy(),
                                {k: v.copy() for k, v in states.items()}, loss(model)))

    return OptimizerTrace(
        p, a, c, rows, tuple(rec.frames), readonly(np.stack(rec.values)),
        tuple(rec.changed), tuple(history), tuple(lost),
        model_states.per_gpu(1, optimizer=p.optimizer, precision=p.precision),
        tuple(model_states.per_gpu(p.param_count, dp=p.dp, zero=z, optimizer=p.optimizer,
                                   precision=p.precision) for z in range(4)))


def _start_caption(p: OptimizerParams, a, c, w0, loss: float) -> str:
    kept = model_states.per_gpu(1, optimizer=p.optimizer, precision=p.precision)
    return (f"{p.size} parameters minimise L(w) = ½ Σ aᵢ(wᵢ − cᵢ)², starting at w[0] = "
            f"{_num(w0[0])} (its minimum is c[0] = {_num(c[0])}); L = {_num(loss)}. "
            f"{_name(p.optimizer)} in {p.precision} precision keeps {kept.total:g} bytes per "
            f"parameter ({kept.params:g} weights + {kept.grads:g} gradient + "
            f"{kept.optimizer:g} optimizer state).")


def _grad_caption(p: OptimizerParams, t: int, a, c, model, g) -> str:
    cast = " and rounds it to bf16" if p.precision == "mixed" else ""
    return (f"Optimizer step {t}: the backward pass computes g = a ⊙ (w − c){cast}: g[0] = "
            f"{_num(a[0])} × ({_num(model[0])} − {_num(c[0])}) = {_num(g[0])}.")


def _name(optimizer: str) -> str:
    return {"sgd": "SGD", "momentum": "SGD with momentum", "adam": "Adam",
            "adamw": "AdamW"}[optimizer]
