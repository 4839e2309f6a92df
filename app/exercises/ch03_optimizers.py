"""Chapter 3, optimizers: what each optimizer keeps per parameter, a model's model states, one
Adam, AdamW and momentum step by hand, bias correction, and the optimizer states ZeRO-1 shards.

Answers call :mod:`app.sim.memory.model_states` (ZeRO §3.1) and the update rules of
:mod:`app.sim.optimizer.rules` (torch.optim's SGD, Adam, AdamW; Kingma & Ba 2015, Algorithm 1;
Loshchilov & Hutter 2019) — the code /optimizer steps with.
"""

from __future__ import annotations

from app.exercises.common import DP_SIZES, params, psi_text
from app.exercises.model import Mistake, Step, Worked, exercise
from app.exercises.units import num
from app.sim.memory import model_states
from app.sim.optimizer import rules

NAMES = {"sgd": "SGD", "momentum": "SGD with momentum", "adam": "Adam", "adamw": "AdamW",
         "adam8bit": "8-bit Adam", "adafactor": "Adafactor"}
PRECISION_WORDS = {"mixed": "mixed precision (16-bit weights and gradients, an fp32 master "
                            "copy)", "fp32": "fp32 (weights and gradients in fp32)"}
PRICED = ("sgd", "momentum", "adam", "adamw", "adam8bit")


def _state_words(optimizer: str, precision: str) -> str:
    parts = model_states.optimizer_state_parts(optimizer, precision)
    return " + ".join(f"{size} ({name})" for name, size in parts) or "0"


@exercise("optimizer-state-bytes", chapter=3, scene="optimizer", kind="integer",
          unit="bytes per parameter", title="Optimizer state per parameter (K)",
          source="Rajbhandari et al. 2019 (ZeRO) §3.1: K = 12 for mixed-precision Adam; "
                 "Dettmers et al. 2022 (8-bit Adam)",
          ranges={"optimizer": PRICED, "precision": ("mixed", "fp32")})
class OptimizerStateBytes:
    def draw(d):
        return {"optimizer": d.choice(PRICED), "precision": d.choice(("mixed", "fp32"))}

    def prompt(g):
        return (f"{NAMES[g['optimizer']]} trains a model in {PRECISION_WORDS[g['precision']]}. "
                f"How many bytes of optimizer state does it keep per parameter (K: everything "
                f"the optimizer holds besides the model's own weights and gradients)?")

    def solve(g):
        parts = model_states.optimizer_state_parts(g["optimizer"], g["precision"])
        k = int(model_states.optimizer_state_bytes(g["optimizer"], g["precision"]))
        steps = tuple(Step(f"{name}", "bytes per parameter", str(size), size,
                           "bytes per parameter") for name, size in parts)
        steps += (Step("K", " + ".join(name for name, _ in parts) or "nothing",
                       " + ".join(str(s) for _, s in parts) or "0", k, "bytes per parameter"),)
        mistakes = []
        if g["precision"] == "mixed":
            mistakes.append(Mistake(k - 4, "In mixed precision the optimizer also keeps the "
                                           "fp32 master copy of the weights (4 bytes)."))
        else:
            mistakes.append(Mistake(k + 4, "In fp32 the weights themselves are fp32: there is "
                                           "no separate master copy."))
        mistakes.append(Mistake(k + 2 * model_states.param_bytes(g["precision"]),
                                "K counts only the optimizer's state, not the weights and "
                                "gradients."))
        return Worked(k, steps, tuple(mistakes))

    def scene(g):
        opt = g["optimizer"] if g["optimizer"] in ("sgd", "momentum", "adam", "adamw") else "adam"
        return {"optimizer": opt, "precision": g["precision"]}


@exercise("model-states-optimizer", chapter=3, scene="optimizer", kind="number", unit="bytes",
          title="Model states of a model with a given optimizer",
          source="Rajbhandari et al. 2019 (ZeRO) §3.1: (2 + 2 + K)Ψ in mixed precision",
          ranges={"params": (1e8, 2e12), "optimizer": PRICED, "precision": ("mixed", "fp32")})
class ModelStatesOptimizer:
    def draw(d):
        return {"params": params(d), "optimizer": d.choice(PRICED),
                "precision": d.choice(("mixed", "fp32"))}

    def prompt(g):
        return (f"A model of {psi_text(g['params'])} parameters trains with "
                f"{NAMES[g['optimizer']]} in {PRECISION_WORDS[g['precision']]} on one GPU. How "
                f"many bytes do its weights, gradients and optimizer states take together?")

    def solve(g):
        psi, opt, prec = g["params"], g["optimizer"], g["precision"]
        s = model_states.per_gpu(psi, optimizer=opt, precision=prec)
        w, gr = model_states.param_bytes(prec), model_states.grad_bytes(prec)
        k = model_states.optimizer_state_bytes(opt, prec)
        steps = (
            Step("Bytes per parameter: weights + gradients + K",
                 f"{w} + {gr} + K, K = {_state_words(opt, prec)}", f"{w} + {gr} + {num(k)}",
                 w + gr + k, "bytes per parameter"),
            Step("Model states", "(bytes per parameter) × Ψ", f"{num(w + gr + k)} × {num(psi)}",
                 s.total, "bytes"),
        )
        mistakes = [Mistake(s.total - s.optimizer, "Add the optimizer's own states: "
                                                   + _state_words(opt, prec) + ".")]
        if prec == "mixed":
            mistakes.append(Mistake(s.total - 4 * psi, "Count the fp32 master weights: mixed "
                                                       "precision keeps them beside the "
                                                       "16-bit copy."))
        return Worked(s.total, steps, tuple(mistakes))

    def scene(g):
        opt = g["optimizer"] if g["optimizer"] in ("sgd", "momentum", "adam", "adamw") else "adam"
        return {"optimizer": opt, "precision": g["precision"], "param_count": g["params"]}


def _small(d, low: float, high: float) -> float:
    """A value of either sign with two significant digits."""
    return d.nice(low, high, 2) * d.choice((1, -1))


@exercise("adam-step", chapter=3, scene="optimizer", kind="number", unit="",
          title="One Adam update by hand",
          source="Kingma & Ba 2015, Algorithm 1; torch.optim.Adam",
          ranges={"g": (-1, 1), "m": (-1, 1), "v": (0, 1), "step": (1, 2, 3, 10),
                  "lr": (1e-5, 1e-2), "beta1": (0.9,), "beta2": (0.95, 0.999),
                  "eps": (1e-8,)})
class AdamStep:
    def draw(d):
        step = d.choice((1, 2, 3, 10))
        g = _small(d, 1e-3, 0.5)
        m = 0.0 if step == 1 else _small(d, 1e-3, 0.5)
        v = 0.0 if step == 1 else d.nice(1e-6, 0.25, 2)
        return {"g": g, "m": m, "v": v, "step": step, "lr": d.choice((1e-4, 3e-4, 1e-3, 6e-4)),
                "beta1": 0.9, "beta2": d.choice((0.95, 0.999)), "eps": 1e-8}

    def prompt(g):
        before = ("m and v start at 0" if g["step"] == 1 else
                  f"after step {g['step'] - 1} its moments are m = {g['m']:g} and v = {g['v']:g}")
        return (f"Adam (lr η = {g['lr']:g}, β₁ = {g['beta1']:g}, β₂ = {g['beta2']:g}, "
                f"ε = 10⁻⁸, no weight decay) updates one weight; {before}. At step "
                f"t = {g['step']} its gradient is g = {g['g']:g}. By how much does the weight "
                f"change (Δw, with its sign)?")

    def solve(g):
        t, b1, b2 = g["step"], g["beta1"], g["beta2"]
        m = rules.first_moment(g["m"], g["g"], b1)
        v = rules.second_moment(g["v"], g["g"], b2)
        bc1, bc2 = rules.bias_correction(b1, t), rules.bias_correction(b2, t)
        delta = -float(rules.adam_step(m, v, t, g["lr"], b1, b2, g["eps"]))  # JSON: no numpy
        steps = (
            Step("First moment", "m ← β₁m + (1 − β₁)g",
                 f"{b1:g} × {num(g['m'])} + (1 - {b1:g}) × {num(g['g'])}", m, ""),
            Step("Second moment", "v ← β₂v + (1 − β₂)g²",
                 f"{b2:g} × {num(g['v'])} + (1 - {b2:g}) × ({num(g['g'])})^2", v, ""),
            Step("Bias corrections", "1 − β₁ᵗ", f"1 - {b1:g}^{t}", bc1, ""),
            Step("… and for v", "1 − β₂ᵗ", f"1 - {b2:g}^{t}", bc2, ""),
            Step("m̂ = m/(1 − β₁ᵗ)", "m̂", f"{num(m)} / {num(bc1)}", m / bc1, ""),
            Step("v̂ = v/(1 − β₂ᵗ)", "v̂", f"{num(v)} / {num(bc2)}", v / bc2, ""),
            Step("Update", "Δw = −η · m̂/(√v̂ + ε)",
                 f"-{g['lr']:g} × {num(m / bc1)} / (sqrt({num(v / bc2)}) + {g['eps']:g})",
                 delta, ""),
        )
        uncorrected = -g["lr"] * m / (v ** 0.5 + g["eps"])
        return Worked(delta, steps, (
            Mistake(uncorrected, "Apply the bias corrections: m and v start at 0, so early on "
                                 "they are too small — divide by 1 − β₁ᵗ and 1 − β₂ᵗ."),
            Mistake(-delta, "The weight moves against the gradient: Δw has the opposite sign "
                            "of m̂."),
            Mistake(-g["lr"] * g["g"], "That is SGD's step; Adam divides the (averaged) "
                                       "gradient by √v̂."),
        ))

    def scene(g):
        return {"optimizer": "adam", "lr": g["lr"], "beta1": g["beta1"], "beta2": g["beta2"],
                "eps": g["eps"]}


@exercise("adamw-step", chapter=3, scene="optimizer", kind="number", unit="",
          title="AdamW's first step: decoupled weight decay",
          source="Loshchilov & Hutter 2019, Algorithm 2; torch.optim.AdamW",
          ranges={"w": (-2, 2), "g": (-1, 1), "lr": (1e-4, 1e-2), "weight_decay": (0.01, 0.1),
                  "beta2": (0.95, 0.999)})
class AdamWStep:
    def draw(d):
        return {"w": _small(d, 0.05, 2.0), "g": _small(d, 1e-3, 0.5),
                "lr": d.choice((1e-3, 3e-3, 6e-4, 1e-2)),
                "weight_decay": d.choice((0.01, 0.05, 0.1)), "beta1": 0.9,
                "beta2": d.choice((0.95, 0.999)), "eps": 1e-8}

    def prompt(g):
        return (f"AdamW (η = {g['lr']:g}, λ = {g['weight_decay']:g}, β₁ = {g['beta1']:g}, "
                f"β₂ = {g['beta2']:g}, ε = 10⁻⁸) takes its first step on a weight "
                f"w = {g['w']:g} whose gradient is g = {g['g']:g}. What is the weight after the "
                f"step?")

    def solve(g):
        w, grad, lr, lam = g["w"], g["g"], g["lr"], g["weight_decay"]
        decayed = rules.decoupled_decay(w, lr, lam)
        m = rules.first_moment(0.0, grad, g["beta1"])
        v = rules.second_moment(0.0, grad, g["beta2"])
        step = float(rules.adam_step(m, v, 1, lr, g["beta1"], g["beta2"], g["eps"]))
        new = decayed - step
        steps = (
            Step("Decay, apart from the gradient", "w ← w·(1 − ηλ)",
                 f"{num(w)} × (1 - {lr:g} × {lam:g})", decayed, ""),
            Step("Adam's step at t = 1 (m̂ = g, v̂ = g²)", "η · g/(|g| + ε)",
                 f"{lr:g} × {num(grad)} / (abs({num(grad)}) + {g['eps']:g})", step, ""),
            Step("New weight", "w·(1 − ηλ) − η·m̂/(√v̂ + ε)", f"{num(decayed)} - {num(step)}",
                 new, ""),
        )
        l2 = rules.l2_decay(grad, w, lam)
        l2_new = w - rules.adam_step(rules.first_moment(0.0, l2, g["beta1"]),
                                     rules.second_moment(0.0, l2, g["beta2"]), 1, lr,
                                     g["beta1"], g["beta2"], g["eps"])
        return Worked(new, steps, (
            Mistake(l2_new, "That is Adam with L2 (λw added to the gradient, then normalised "
                            "away by √v̂); AdamW shrinks the weight itself, w·(1 − ηλ)."),
            Mistake(w - step, "Apply the decay too: w ← w·(1 − ηλ)."),
        ))

    def scene(g):
        return {"optimizer": "adamw", "lr": g["lr"], "weight_decay": g["weight_decay"],
                "beta1": g["beta1"], "beta2": g["beta2"], "eps": g["eps"]}


@exercise("momentum-step", chapter=3, scene="optimizer", kind="number", unit="",
          title="One SGD-with-momentum update",
          source="torch.optim.SGD (Sutskever et al. 2013's form): b ← μb + g; w ← w − ηb",
          ranges={"buffer": (-1, 1), "g": (-1, 1), "momentum": (0.8, 0.99), "lr": (1e-3, 0.1)})
class MomentumStep:
    def draw(d):
        return {"buffer": _small(d, 1e-3, 0.5), "g": _small(d, 1e-3, 0.5),
                "momentum": d.choice((0.8, 0.9, 0.95, 0.99)), "lr": d.choice((0.1, 0.05, 0.01))}

    def prompt(g):
        return (f"SGD with momentum μ = {g['momentum']:g} and learning rate η = {g['lr']:g} "
                f"(torch.optim.SGD, no dampening, no weight decay) has a momentum buffer "
                f"b = {g['buffer']:g} for one weight. Its next gradient is g = {g['g']:g}. By "
                f"how much does the weight change (Δw, with its sign)?")

    def solve(g):
        b = rules.momentum_buffer(g["buffer"], g["g"], g["momentum"])
        delta = -g["lr"] * b
        steps = (
            Step("New buffer", "b ← μb + g", f"{g['momentum']:g} × {num(g['buffer'])} + "
                                              f"{num(g['g'])}", b, ""),
            Step("Update", "Δw = −η·b", f"-{g['lr']:g} × {num(b)}", delta, ""),
        )
        return Worked(delta, steps, (
            Mistake(-g["lr"] * g["g"], "Step along the updated buffer b, not the gradient."),
            Mistake(-g["lr"] * (g["momentum"] * g["buffer"] + (1 - g["momentum"]) * g["g"]),
                    "torch's SGD adds g to μb whole (dampening 0), not (1 − μ)g."),
        ))

    def scene(g):
        return {"optimizer": "momentum", "momentum": g["momentum"], "lr": g["lr"]}


@exercise("adam-bias-correction", chapter=3, scene="optimizer", kind="number", unit="",
          title="Adam's bias correction",
          source="Kingma & Ba 2015 §3: m̂ = m/(1 − β₁ᵗ)",
          ranges={"m": (-1, 1), "beta1": (0.9, 0.95), "step": (1, 50)})
class AdamBiasCorrection:
    def draw(d):
        return {"m": _small(d, 1e-3, 0.1), "beta1": d.choice((0.9, 0.95)),
                "step": d.choice((1, 2, 3, 5, 10, 20, 50))}

    def prompt(g):
        return (f"After t = {g['step']} steps Adam's first moment of a weight is "
                f"m = {g['m']:g}, with β₁ = {g['beta1']:g} (m started at 0). What is the "
                f"bias-corrected m̂ that the update uses?")

    def solve(g):
        bc = rules.bias_correction(g["beta1"], g["step"])
        steps = (Step("Correction", "1 − β₁ᵗ", f"1 - {g['beta1']:g}^{g['step']}", bc, ""),
                 Step("m̂", "m / (1 − β₁ᵗ)", f"{num(g['m'])} / {num(bc)}", g["m"] / bc, ""))
        return Worked(g["m"] / bc, steps, (
            Mistake(g["m"] / g["beta1"] ** g["step"], "Divide by 1 − β₁ᵗ, not by β₁ᵗ."),
            Mistake(g["m"] * bc, "Divide by the correction: m is too small early on."),
        ))

    def scene(g):
        return {"optimizer": "adam", "beta1": g["beta1"]}


@exercise("optimizer-shard-bytes", chapter=3, scene="optimizer", kind="number", unit="bytes",
          title="The optimizer states ZeRO-1 leaves on a GPU",
          source="Rajbhandari et al. 2019 (ZeRO) §5.1: P_os keeps KΨ/N_d per GPU",
          ranges={"params": (1e8, 2e12), "dp": (2, 1024), "optimizer": PRICED,
                  "precision": ("mixed", "fp32")})
class OptimizerShardBytes:
    def draw(d):
        return {"params": params(d), "dp": d.choice(DP_SIZES),
                "optimizer": d.choice(("momentum", "adam", "adamw", "adam8bit")),
                "precision": d.choice(("mixed", "fp32"))}

    def prompt(g):
        return (f"{NAMES[g['optimizer']]} trains a model of {psi_text(g['params'])} parameters "
                f"in {PRECISION_WORDS[g['precision']]} on N_d = {g['dp']} GPUs with ZeRO stage "
                f"1, which shards the optimizer states. How many bytes of optimizer state does "
                f"each GPU keep?")

    def solve(g):
        psi, dp, opt, prec = g["params"], g["dp"], g["optimizer"], g["precision"]
        s = model_states.per_gpu(psi, dp=dp, zero=1, optimizer=opt, precision=prec)
        k = model_states.optimizer_state_bytes(opt, prec)
        steps = (Step("K", _state_words(opt, prec), " + ".join(
                    str(v) for _, v in model_states.optimizer_state_parts(opt, prec)), k,
                      "bytes per parameter"),
                 Step("Optimizer states per GPU", "KΨ/N_d", f"{num(k)} × {num(psi)} / {dp}",
                      s.optimizer, "bytes"))
        mistakes = [Mistake(k * psi, "ZeRO-1 shards the optimizer states: divide by N_d.")]
        if prec == "mixed":
            mistakes.append(Mistake((k - 4) * psi / dp, "The fp32 master weights are "
                                                        "optimizer state too, and sharded with "
                                                        "it."))
        return Worked(s.optimizer, steps, tuple(mistakes))

    def scene(g):
        opt = g["optimizer"] if g["optimizer"] in ("sgd", "momentum", "adam", "adamw") else "adam"
        return {"optimizer": opt, "precision": g["precision"], "param_count": g["params"],
                "dp": g["dp"]}
