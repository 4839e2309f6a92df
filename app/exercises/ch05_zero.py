"""Chapter 5, ZeRO: model-state bytes per GPU for each stage, the communication each stage
costs, the largest model that fits, the fewest ranks that make it fit, ZeRO-Offload's GPU bytes
and PCIe time, and DeepSpeed's own estimator.

Answers call :mod:`app.sim.memory.model_states` (ZeRO Table 1, Rajbhandari et al. 2019) and
:mod:`app.sim.zero.scale` (§7's communication; ZeRO-Offload, Ren et al. 2021) — the code the
/zero scene draws with.
"""

from __future__ import annotations

from app.exercises.common import DP_SIZES, GPU_MEMORY_GB, count_text, params, psi_text
from app.exercises.model import Mistake, Step, Worked, exercise
from app.exercises.units import num
from app.sim.collectives.cost import Links
from app.sim.memory import model_states
from app.sim.zero import scale as zero_scale

K = model_states.optimizer_state_bytes("adam", "mixed")          # 12
STAGE_WORDS = {0: "no ZeRO (plain data parallelism)", 1: "ZeRO stage 1 (P_os)",
               2: "ZeRO stage 2 (P_os+g)", 3: "ZeRO stage 3 (P_os+g+p)"}
SHARDS = {0: "nothing", 1: "the optimizer states", 2: "the optimizer states and gradients",
          3: "the optimizer states, gradients and parameters"}


def _over(sharded: bool) -> str:
    return "/N_d" if sharded else ""


def state_steps(psi: int, dp: int, stage: int) -> tuple[Step, ...]:
    """The worked lines of ZeRO Table 1: parameters, gradients, optimizer states, total."""
    s = model_states.per_gpu(psi, dp=dp, zero=stage)
    div = lambda sharded: f" / {dp}" if sharded else ""          # noqa: E731
    return (
        Step("Bytes per parameter kept by mixed-precision Adam", "2 + 2 + K, K = 12 (fp32 "
             "master weights 4, momentum 4, variance 4)", "2 + 2 + 12",
             model_states.param_bytes("mixed") + model_states.grad_bytes("mixed") + K,
             "bytes per parameter"),
        Step("fp16 parameters on one GPU", f"2Ψ{_over(stage >= 3)}",
             f"2 × {num(psi)}{div(stage >= 3)}", s.params, "bytes"),
        Step("fp16 gradients on one GPU", f"2Ψ{_over(stage >= 2)}",
             f"2 × {num(psi)}{div(stage >= 2)}", s.grads, "bytes"),
        Step("Optimizer states on one GPU", f"KΨ{_over(stage >= 1)}",
             f"12 × {num(psi)}{div(stage >= 1)}", s.optimizer, "bytes"),
        Step("Model states per GPU", "parameters + gradients + optimizer states",
             f"{num(s.params)} + {num(s.grads)} + {num(s.optimizer)}", s.total, "bytes"),
    )


def _scene(g) -> dict:
    """/zero at the problem's stage, N_d and Ψ."""
    return {"stage": g["stage"], "dp": g["dp"], "param_count": g["params"]}


@exercise("zero-model-states", chapter=5, scene="zero", kind="number", unit="bytes",
          title="Model-state bytes per GPU under ZeRO",
          source="Rajbhandari et al. 2019 (ZeRO), Table 1: 2Ψ + 2Ψ + KΨ, K = 12",
          ranges={"params": (1e8, 2e12), "dp": (1, 1024), "stage": (0, 1, 2, 3)},
          query=_scene)
class ZeroModelStates:
    def draw(d):
        return {"params": params(d), "dp": d.choice((1,) + DP_SIZES), "stage": d.integer(0, 3)}

    def prompt(g):
        return (f"A model of {psi_text(g['params'])} parameters trains with mixed-precision "
                f"Adam (K = 12 bytes of optimizer state per parameter) on N_d = {g['dp']} "
                f"data-parallel GPUs with {STAGE_WORDS[g['stage']]}. How many bytes of model "
                f"states — parameters, gradients and optimizer states — does each GPU hold?")

    def solve(g):
        psi, dp, stage = g["params"], g["dp"], g["stage"]
        steps = state_steps(psi, dp, stage)
        total = steps[-1].value
        states = model_states.per_gpu(psi, dp=dp, zero=stage)
        mistakes = [
            Mistake(total - states.optimizer / 3,
                    "Too low by exactly the fp32 master copy: mixed-precision Adam keeps the "
                    "master weights (4 bytes) besides momentum and variance, K = 12."),
            Mistake(states.params + states.grads, "Add the optimizer states: K = 12 bytes a "
                                                  "parameter (fp32 master, momentum, variance)"
                                                  + (", divided over N_d." if stage else ".")),
            Mistake(2 * psi + 18 * psi / dp, "That is DeepSpeed's estimator (it counts an fp32 "
                    "copy of the gradients: 2Ψ + 18Ψ/N_d); ZeRO's Table 1 counts 2 + 2 + K."),
        ]
        if stage < 3:
            mistakes.append(Mistake(16 * psi / dp, f"Stage {stage} shards only "
                                    f"{SHARDS[stage]} over N_d; the rest stays whole on every "
                                    f"GPU."))
        if stage > 0 and dp > 1:
            mistakes.append(Mistake(16 * psi, f"{STAGE_WORDS[stage]} shards {SHARDS[stage]} "
                                    f"over the N_d ranks: divide those by N_d."))
        return Worked(total, steps, tuple(mistakes))


@exercise("zero-comm-bytes", chapter=5, scene="zero", kind="number", unit="bytes",
          title="What each ZeRO stage sends per step",
          source="Rajbhandari et al. 2019 (ZeRO) §7: 2Ψ per rank for stages 0–2, 3Ψ for stage 3",
          ranges={"params": (1e8, 2e12), "dp": (2, 1024), "stage": (0, 1, 2, 3)},
          query=_scene)
class ZeroCommBytes:
    def draw(d):
        return {"params": params(d), "dp": d.choice(DP_SIZES), "stage": d.integer(0, 3)}

    def prompt(g):
        return (f"A model of {psi_text(g['params'])} parameters trains on N_d = {g['dp']} GPUs "
                f"with {STAGE_WORDS[g['stage']]}, 16-bit parameters and gradients and ring "
                f"collectives. How many bytes does each GPU send over the network in one "
                f"training step (gradient reduction and parameter gathering together)?")

    def solve(g):
        psi, dp, stage = g["params"], g["dp"], g["stage"]
        elements = zero_scale.comm_elements(psi, dp, stage)
        passes = 3 if stage == 3 else 2
        what = {0: "an all-reduce = a reduce-scatter + an all-gather of Ψ",
                1: "a reduce-scatter of the gradients + an all-gather of the updated parameters",
                2: "a reduce-scatter of the gradients + an all-gather of the updated parameters",
                3: "an all-gather of the parameters before forward and again before backward, "
                   "and a reduce-scatter of the gradients"}[stage]
        steps = (
            Step("Collectives of Ψ elements per step", what, str(passes), passes, ""),
            Step("Elements one rank sends: each ring collective sends (N−1) shards of ⌈Ψ/N⌉",
                 f"{passes}·(N−1)·⌈Ψ/N⌉", f"{passes} × ({dp} − 1) × ⌈{num(psi)} / {dp}⌉",
                 elements, "elements"),
            Step("Bytes (2 per element)", "2 × elements", f"2 × {num(elements)}",
                 elements * model_states.param_bytes("mixed"), "bytes"),
        )
        total = steps[-1].value
        mistakes = [
            Mistake(2 * passes * psi, "Each rank sends only (N−1)/N of every collective's "
                                      "tensor: the ring never sends a rank its own shard."),
            Mistake(passes * psi * (dp - 1) / dp, "Count bytes, not elements: 16-bit values "
                                                  "are 2 bytes each."),
        ]
        if stage == 3:
            mistakes.append(Mistake(total * 2 / 3, "Stage 3 gathers the parameters twice — "
                                    "before forward and again before backward (they were "
                                    "freed in between): 3Ψ, not 2Ψ."))
        else:
            mistakes.append(Mistake(total * 3 / 2, f"Stage {stage} keeps the whole parameters "
                                    "on every GPU: one all-gather of the update, not two."))
        return Worked(total, steps, tuple(mistakes))


@exercise("zero-max-params", chapter=5, scene="zero", kind="number", unit="parameters",
          title="The largest model whose states fit",
          source="Rajbhandari et al. 2019 (ZeRO), Table 1 read backwards",
          ranges={"gpu_gb": GPU_MEMORY_GB, "dp": (1, 1024), "stage": (0, 1, 2, 3)})
class ZeroMaxParams:
    def draw(d):
        return {"gpu_gb": d.choice(GPU_MEMORY_GB), "dp": d.choice(DP_SIZES),
                "stage": d.integer(0, 3)}

    def prompt(g):
        return (f"Each GPU has {g['gpu_gb']} GB (10⁹ bytes) of memory. With mixed-precision "
                f"Adam on N_d = {g['dp']} GPUs and {STAGE_WORDS[g['stage']]}, what is the "
                f"largest number of parameters Ψ whose model states alone (parameters, "
                f"gradients, optimizer states; no activations) fit on each GPU?")

    def solve(g):
        per = model_states.per_gpu(1, dp=g["dp"], zero=g["stage"])       # bytes per parameter
        capacity = g["gpu_gb"] * 1e9
        steps = (
            Step("Model-state bytes per parameter on one GPU",
                 "2·(1/N_d if stage 3) + 2·(1/N_d if stage ≥ 2) + 12·(1/N_d if stage ≥ 1)",
                 f"{num(per.params)} + {num(per.grads)} + {num(per.optimizer)}", per.total,
                 "bytes per parameter"),
            Step("Largest Ψ", "capacity / bytes per parameter",
                 f"{num(capacity)} / {num(per.total)}", capacity / per.total, "parameters"),
        )
        answer = steps[-1].value
        return Worked(answer, steps, (
            Mistake(capacity / 16, f"{STAGE_WORDS[g['stage']]}: divide by N_d the states this "
                                   f"stage shards ({SHARDS[g['stage']]}), not all 16 bytes."
                    if g["stage"] else "Right idea; recheck 2 + 2 + 12."),
            Mistake(capacity / 16 * g["dp"], "Only stage 3 shards all three kinds of state; "
                                             "the others keep some whole on every GPU."),
        ))

    def scene(g):
        return {"stage": g["stage"], "dp": g["dp"]}


@exercise("zero-min-dp", chapter=5, scene="zero", kind="integer", unit="GPUs",
          title="The fewest GPUs that make the model fit",
          source="Rajbhandari et al. 2019 (ZeRO), Table 1 solved for N_d",
          ranges={"params": (1e9, 2e12), "gpu_gb": GPU_MEMORY_GB, "stage": (1, 2, 3)},
          scene_hides=("dp",))
class ZeroMinDp:
    def draw(d):
        while True:
            g = {"params": params(d), "gpu_gb": d.choice(GPU_MEMORY_GB),
                 "stage": d.integer(1, 3)}
            n = ZeroMinDp.smallest(g)
            if n is not None and 2 <= n <= 4096:
                return g

    def smallest(g) -> int | None:
        capacity = g["gpu_gb"] * 1e9
        one, two = (model_states.per_gpu(g["params"], dp=n, zero=g["stage"]).total
                    for n in (1, 2))
        if 2 * two - one >= capacity:                   # the unsharded part alone does not fit
            return None
        lo, hi = 1, 1
        while model_states.per_gpu(g["params"], dp=hi, zero=g["stage"]).total > capacity:
            hi *= 2
        while lo < hi:                          # per_gpu falls as dp grows
            mid = (lo + hi) // 2
            if model_states.per_gpu(g["params"], dp=mid, zero=g["stage"]).total <= capacity:
                hi = mid
            else:
                lo = mid + 1
        return lo

    def prompt(g):
        return (f"A model of {psi_text(g['params'])} parameters trains with mixed-precision "
                f"Adam and {STAGE_WORDS[g['stage']]} on GPUs of {g['gpu_gb']} GB (10⁹ bytes). "
                f"What is the smallest number of data-parallel GPUs N_d for which the model "
                f"states (no activations) fit on each GPU?")

    def solve(g):
        psi, stage, capacity = g["params"], g["stage"], g["gpu_gb"] * 1e9
        n = ZeroMinDp.smallest(g)
        # per_gpu(N_d) = whole + shared / N_d: two evaluations give both parts
        one, two = (model_states.per_gpu(psi, dp=n, zero=stage).total for n in (1, 2))
        whole, sharded = 2 * two - one, 2 * (one - two)
        steps = (
            Step("Bytes every GPU keeps whole", {1: "2Ψ + 2Ψ", 2: "2Ψ", 3: "0"}[stage],
                 {1: f"4 × {num(psi)}", 2: f"2 × {num(psi)}", 3: "0"}[stage], whole, "bytes"),
            Step("Bytes shared out over N_d", {1: "KΨ", 2: "(2 + K)Ψ", 3: "(2 + 2 + K)Ψ"}[stage],
                 f"{ {1: 12, 2: 14, 3: 16}[stage]} × {num(psi)}", sharded, "bytes"),
            Step("N_d so that whole + shared/N_d ≤ capacity",
                 "N_d = ⌈shared / (capacity − whole)⌉",
                 f"⌈{num(sharded)} / ({num(capacity)} − {num(whole)})⌉", n, "GPUs"),
        )
        exact = sharded / (capacity - whole)
        return Worked(n, steps, (
            Mistake(int(exact), "Round up: with fewer GPUs than the exact quotient the states "
                                "do not fit."),
            Mistake(-(-16 * psi // int(capacity)), f"Only stage 3 divides all 16 bytes; stage "
                                                   f"{stage} keeps part of them whole."),
        ))

    def scene(g):
        return {"stage": g["stage"], "param_count": g["params"],
                "dp": min(1024, ZeroMinDp.smallest(g))}


@exercise("zero-offload-gpu-bytes", chapter=5, scene="zero", kind="number", unit="bytes",
          title="What ZeRO-Offload leaves on the GPU",
          source="Ren et al. 2021 (ZeRO-Offload); DeepSpeed offload_optimizer to the CPU",
          ranges={"params": (1e8, 2e12), "dp": (2, 1024), "stage": (1, 2, 3)})
class ZeroOffloadGpuBytes:
    def draw(d):
        return {"params": params(d), "dp": d.choice(DP_SIZES), "stage": d.integer(1, 3)}

    def prompt(g):
        return (f"ZeRO-Offload moves the optimizer to the CPU: each GPU streams its fp16 "
                f"gradient partition to the host, the CPU runs Adam on the fp32 states, and the "
                f"updated fp16 parameters come back. A model of {psi_text(g['params'])} "
                f"parameters trains on N_d = {g['dp']} GPUs with {STAGE_WORDS[g['stage']]} and "
                f"offload to the CPU. How many bytes of model states stay on each GPU?")

    def solve(g):
        psi, dp, stage = g["params"], g["dp"], g["stage"]
        gpu = zero_scale.placement(psi, dp, stage, "cpu").gpu
        shard = zero_scale.shard(psi, dp)
        steps = (
            Step("fp16 parameters on the GPU", "2Ψ" + ("/N_d (padded: 2⌈Ψ/N_d⌉)" if stage >= 3
                                                      else ""),
                 f"2 × ⌈{num(psi)} / {dp}⌉" if stage >= 3 else f"2 × {num(psi)}", gpu.params,
                 "bytes"),
            Step("fp16 gradients on the GPU",
                 "2Ψ (stage 1 reduces whole gradients before copying its shard)" if stage < 2
                 else "0 (each partition is streamed to the host as it is reduced)",
                 f"2 × {num(psi)}" if stage < 2 else "0", gpu.grads, "bytes"),
            Step("Optimizer states on the GPU", "0 (on the CPU)", "0", gpu.optimizer, "bytes"),
            Step("Model states per GPU", "parameters + gradients",
                 f"{num(gpu.params)} + {num(gpu.grads)}", gpu.total, "bytes"),
        )
        plain = model_states.per_gpu(psi, dp=dp, zero=stage).total
        return Worked(gpu.total, steps, (
            Mistake(plain, "That is without offload: the optimizer states (12 bytes a "
                           "parameter, over N_d) live on the CPU now."),
            Mistake(gpu.total + 2 * shard, "The gradient partition is streamed to the host, "
                                           "not kept on the GPU."),
        ))

    def scene(g):
        return {"stage": g["stage"], "dp": g["dp"], "param_count": g["params"],
                "offload": "cpu"}


@exercise("zero-offload-pcie-time", chapter=5, scene="zero", kind="number", unit="ms",
          title="ZeRO-Offload's PCIe traffic per step",
          source="Ren et al. 2021 (ZeRO-Offload) §4: 2Ψ/N_d down and 2Ψ/N_d up per step",
          ranges={"params": (1e8, 2e12), "dp": (2, 1024), "stage": (1, 2), "pcie_gbs": (8, 64)})
class ZeroOffloadPcie:
    def draw(d):
        return {"params": params(d), "dp": d.choice(DP_SIZES), "stage": d.integer(1, 2),
                "pcie_gbs": d.choice((12.0, 16.0, 25.0, 32.0, 50.0, 64.0))}

    def prompt(g):
        return (f"With ZeRO-Offload each GPU copies its fp16 gradient partition to the host and "
                f"gets its updated fp16 parameters back over PCIe, {g['pcie_gbs']:g} GB/s per "
                f"GPU. A model of {psi_text(g['params'])} parameters trains on N_d = {g['dp']} "
                f"GPUs with {STAGE_WORDS[g['stage']]}. How long does one step's PCIe traffic "
                f"take, in milliseconds?")

    def solve(g):
        psi, dp = g["params"], g["dp"]
        machine = zero_scale.Machine(Links(5.0, 300.0, 50.0, 8), 150.0, g["pcie_gbs"], 3.5,
                                     50.0)
        run = zero_scale.step(psi, dp, g["stage"], "cpu", 1, 2048, machine)
        moved = run.transfers["PCIe"]
        ms = run.busy_us["PCIe"] / 1e3
        shard = zero_scale.shard(psi, dp)
        steps = (
            Step("fp16 gradient partition to the host", "2⌈Ψ/N_d⌉",
                 f"2 × ⌈{num(psi)} / {dp}⌉", 2 * shard, "bytes"),
            Step("Updated fp16 parameters back", "2⌈Ψ/N_d⌉", f"2 × ⌈{num(psi)} / {dp}⌉",
                 2 * shard, "bytes"),
            Step("Bytes over PCIe", "down + up", f"{num(2 * shard)} + {num(2 * shard)}", moved,
                 "bytes"),
            Step("Time", "bytes / bandwidth", f"{num(moved)} / ({g['pcie_gbs']:g} × 10⁹) × 1000",
                 ms, "ms"),
        )
        return Worked(ms, steps, (
            Mistake(ms / 2, "Both directions cross PCIe: the gradients go down and the "
                            "parameters come back."),
            Mistake(ms * dp, "Each GPU moves only its own partition, 1/N_d of the model."),
            Mistake(ms * 6, "The fp32 optimizer states stay on the host: only fp16 gradients "
                            "and parameters cross PCIe."),
        ))

    def scene(g):
        return {"stage": g["stage"], "dp": g["dp"], "param_count": g["params"],
                "offload": "cpu", "pcie_gbs": g["pcie_gbs"]}


@exercise("deepspeed-estimate", chapter=5, scene="memory", kind="number", unit="bytes",
          title="DeepSpeed's estimate of model-state memory",
          source="DeepSpeed estimate_zero2/zero3_model_states_mem_needs: 2Ψ + 18Ψ/N (ZeRO-2), "
                 "4·largest layer + 18Ψ/N (ZeRO-3)",
          ranges={"params": (1e8, 2e12), "dp": (2, 1024), "stage": (2, 3),
                  "largest_layer": (1e6, 1e10)})
class DeepSpeedEstimate:
    def draw(d):
        psi = params(d)
        return {"params": psi, "dp": d.choice(DP_SIZES), "stage": d.integer(2, 3),
                "largest_layer": int(d.nice(psi / 400, psi / 40, 2))}

    def prompt(g):
        extra = (f" (its largest layer: {count_text(g['largest_layer'])} parameters, "
                 f"{num(g['largest_layer'])})" if g["stage"] == 3 else "")
        return (f"DeepSpeed's estimator counts 18 bytes of partitioned state per parameter "
                f"(fp32 master weights, momentum, variance and an fp32 copy of the gradients) "
                f"on top of the fp16 parameters. For a model of {psi_text(g['params'])} "
                f"parameters{extra} on N_d = {g['dp']} GPUs with ZeRO stage {g['stage']}, what "
                f"does it estimate each GPU needs for model states, in bytes?")

    def solve(g):
        psi, dp, stage, big = g["params"], g["dp"], g["stage"], g["largest_layer"]
        total = model_states.deepspeed_convention(psi, dp, stage, big)
        kept = 2 * psi if stage == 2 else 4 * big
        steps = (
            Step("Bytes every GPU keeps", "2Ψ (fp16 parameters)" if stage == 2 else
                 "4 × largest layer (gathered in fp16, with its gradient)",
                 f"2 × {num(psi)}" if stage == 2 else f"4 × {num(big)}", kept, "bytes"),
            Step("Partitioned state", "18Ψ / N_d", f"18 × {num(psi)} / {dp}", 18 * psi / dp,
                 "bytes"),
            Step("DeepSpeed's estimate", "kept + partitioned",
                 f"{num(kept)} + {num(18 * psi / dp)}", total, "bytes"),
        )
        paper = model_states.per_gpu(psi, dp=dp, zero=stage).total
        return Worked(total, steps, (
            Mistake(paper, "That is ZeRO's Table 1 (2 + 2 + 12 bytes); DeepSpeed's estimator "
                           "partitions 18 bytes per parameter (fp32 gradients too)."),
            Mistake(18 * psi / dp, "Add what every GPU keeps whole besides its partition."),
        ))

    def scene(g):
        return {"preset": "gpt3-175b", "param_count": g["params"], "dp": g["dp"],
                "zero": g["stage"]}
