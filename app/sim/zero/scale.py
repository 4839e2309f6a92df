"""ZeRO at the scale of a real model: bytes per GPU, communication per step, and the step time
with ZeRO-Offload and ZeRO-Infinity.

**Memory** (Rajbhandari et al. 2019, Table 1; :mod:`app.sim.memory.model_states`): mixed-precision
Adam keeps 2Ψ bytes of fp16 parameters, 2Ψ of fp16 gradients and 12Ψ of fp32 states. Stage 1
shards the states, stage 2 also the gradients, stage 3 also the parameters, each over N_d ranks;
a sharded state is padded to N_d · ⌈Ψ/N_d⌉ elements (:mod:`app.sim.data_parallel.sharding`).

**Communication** (§7): DDP's all-reduce is a reduce-scatter plus an all-gather, Ψ elements each,
so every rank sends 2Ψ·(N−1)/N; stages 1 and 2 replace it by a reduce-scatter of gradients and an
all-gather of updated parameters, still 2Ψ; stage 3 all-gathers the parameters before forward
and again before backward, and reduce-scatters gradients: 3Ψ, 1.5×.

**Offload** (DeepSpeed's ``offload_optimizer``: CPU for stages 1–3, NVMe for stage 3 only;
``offload_param`` for stage 3). ZeRO-Offload (Ren et al. 2021) keeps the fp32 states on the CPU
and runs Adam there: each rank copies its fp16 gradient partition to the host over PCIe (2Ψ/N),
the CPU updates it, and the new fp16 parameters come back (2Ψ/N). ZeRO-Infinity (Rajbhandari et
al. 2021) moves the states and the fp16 parameters to NVMe: Adam streams its states through host
memory (12Ψ/N read and written), and each layer's parameter shard is read from NVMe, copied to
the GPU and all-gathered, before forward and again before backward. The CPU's Adam is
memory-bound: 28 bytes per parameter (as on the GPU) at the host memory bandwidth one GPU's
process gets. It starts once every gradient is on the host (DeepSpeed clips gradients first).
"""

from __future__ import annotations

from dataclasses import dataclass
from math import ceil

from app.sim.memory import model_states

from app.sim import timeline
from app.sim.collectives.cost import Links, ring_time_us
from app.sim.data_parallel.step_timeline import ADAM_BYTES, HBM_GBS
from app.sim.timeline import Task

K_ADAM = model_states.optimizer_state_bytes("adam", "mixed")      # 12
P_BYTES = model_states.param_bytes("mixed")                        # 2
G_BYTES = model_states.grad_bytes("mixed")                         # 2
LANES = ("GPU compute", "network", "PCIe", "NVMe", "CPU")


@dataclass(frozen=True)
class Placement:
    """Model-state bytes of one rank, by where they live."""

    gpu: model_states.ModelStates
    cpu: float
    nvme: float


def shard(psi: int, dp: int) -> int:
    return ceil(psi / dp)


def placement(psi: int, dp: int, stage: int, offload: str) -> Placement:
    """ZeRO Table 1 with padding, then offload: optimizer states (and the gradient partition
    they consume) to the host, or states and fp16 parameters to NVMe."""
    part = shard(psi, dp)
    sharded = model_states.per_gpu(part * dp, dp=dp, zero=3)          # every state on 1/dp
    full = model_states.per_gpu(psi, dp=1, zero=0)
    params = sharded.params if stage >= 3 else full.params
    grads = sharded.grads if stage >= 2 else full.grads
    optimizer = sharded.optimizer if stage >= 1 else full.optimizer
    cpu = nvme = 0.0
    if offload in ("cpu", "nvme"):
        cpu = G_BYTES * part                                      # the fp16 gradient partition
        grads = grads if stage < 2 else 0.0                       # streamed to the host
        if offload == "cpu":
            cpu += optimizer
        else:
            nvme = optimizer + params                             # states and fp16 parameters
            params = 0.0
        optimizer = 0.0
    return Placement(model_states.ModelStates(params, grads, optimizer), cpu, nvme)


def comm_elements(psi: int, dp: int, stage: int) -> int:
    """Elements one rank sends per step: (2 or 3) · (N−1) · ⌈Ψ/N⌉ (ring collectives, padded)."""
    return (3 if stage == 3 else 2) * (dp - 1) * shard(psi, dp)


@dataclass(frozen=True)
class Machine:
    links: Links
    tflops: float
    pcie_gbs: float
    nvme_gbs: float
    cpu_gbs: float


@dataclass(frozen=True)
class OffloadStep:
    spans: tuple[timeline.Span, ...]
    step_us: float
    busy_us: dict[str, float]
    critical_us: dict[str, float]    # time each lane contributes to the critical path
    bound: str                       # the lane with the most time on the critical path
    transfers: dict[str, float]      # bytes per rank per step over PCIe and NVMe


def step(psi: int, dp: int, stage: int, offload: str, units: int, tokens: int,
         m: Machine) -> OffloadStep:
    """One step of a Ψ-parameter model cut into ``units`` equal layers, as a timeline."""
    per_unit = psi / units
    part = shard(psi, dp) / units                      # this rank's share of one unit
    us = {  # duration helpers, µs
        "fwd": 2 * tokens * per_unit / (m.tflops * 1e6),
        "net": lambda op, elements: ring_time_us(op, dp, elements * P_BYTES, m.links),
        "pcie": lambda b: b / (m.pcie_gbs * 1e3),
        "nvme": lambda b: b / (m.nvme_gbs * 1e3),
    }
    tasks: list[Task] = []
    pcie = nvme = 0.0

    def fetch(u: int, when: str, after: tuple[str, ...]) -> str:
        """ZeRO-3: bring unit u's parameters to every GPU; returns the task to wait for."""
        nonlocal pcie, nvme
        first = after
        if offload == "nvme":
            tasks.append(Task(f"read p{u} {when}", "NVMe", us["nvme"](P_BYTES * part), first,
                              "nvme", f"read layer {u}'s parameter shard from NVMe"))
            tasks.append(Task(f"H2D p{u} {when}", "PCIe", us["pcie"](P_BYTES * part),
                              (f"read p{u} {when}",), "pcie", "copy it to the GPU"))
            first = (f"H2D p{u} {when}",)
            nvme += P_BYTES * part
            pcie += P_BYTES * part
        tasks.append(Task(f"AG {u} {when}", "network", us["net"]("all_gather", per_unit), first,
                          "all_gather", f"all-gather layer {u}"))
        return f"AG {u} {when}"

    previous: tuple[str, ...] = ()
    for u in range(units):                                           # 1. forward
        needs = (fetch(u, "fwd", previous[-1:] if previous else ()),) if stage == 3 else ()
        tasks.append(Task(f"F {u}", "GPU compute", us["fwd"], needs + previous, "forward",
                          f"forward of layer {u}"))
        previous = (f"F {u}",)
    grads_ready = []
    for u in reversed(range(units)):                                 # 2. backward
        needs = (fetch(u, "bwd", previous),) if stage == 3 else ()
        tasks.append(Task(f"B {u}", "GPU compute", 2 * us["fwd"], needs + previous, "backward",
                          f"backward of layer {u}"))
        previous = (f"B {u}",)
        if stage == 0:
            tasks.append(Task(f"AR {u}", "network", us["net"]("all_reduce", per_unit), previous,
                              "all_reduce", f"all-reduce layer {u}'s gradients"))
            grads_ready.append(f"AR {u}")
        elif stage >= 2:
            tasks.append(Task(f"RS {u}", "network", us["net"]("reduce_scatter", per_unit),
                              previous, "reduce_scatter", f"reduce-scatter layer {u}'s gradients"))
            grads_ready.append(f"RS {u}")
    if stage == 1:
        tasks.append(Task("RS", "network", us["net"]("reduce_scatter", psi), previous,
                          "reduce_scatter", "reduce-scatter every gradient"))
        grads_ready.append("RS")
    if offload != "none":                                            # 3. gradients to the host
        for name in grads_ready:
            share = part * (units if name == "RS" else 1)
            tasks.append(Task(f"D2H {name}", "PCIe", us["pcie"](G_BYTES * share), (name,),
                              "pcie", "copy the gradient partition to the host"))
            pcie += G_BYTES * share
        grads_ready = [f"D2H {name}" for name in grads_ready]
    updated = []
    for u in range(units):                                           # 4. optimizer
        after = tuple(grads_ready) + previous if u == 0 else (f"Adam {u - 1}",)
        local = part if stage >= 1 else per_unit
        if offload == "none":
            tasks.append(Task(f"Adam {u}", "GPU compute", ADAM_BYTES * local / (HBM_GBS * 1e3),
                              after, "optimizer", "Adam on the GPU"))
            updated.append(f"Adam {u}")
            continue
        if offload == "nvme":
            tasks.append(Task(f"read os{u}", "NVMe", us["nvme"](K_ADAM * local), after, "nvme",
                              "read optimizer states from NVMe"))
            after = (f"read os{u}",) + after
            nvme += K_ADAM * local
        tasks.append(Task(f"Adam {u}", "CPU", ADAM_BYTES * local / (m.cpu_gbs * 1e3), after,
                          "optimizer", "Adam on the CPU"))
        if offload == "nvme":
            tasks.append(Task(f"write os{u}", "NVMe", us["nvme"]((K_ADAM + P_BYTES) * local),
                              (f"Adam {u}",), "nvme", "write states and fp16 parameters back"))
            nvme += (K_ADAM + P_BYTES) * local
            updated.append(f"write os{u}")
        else:
            tasks.append(Task(f"H2D {u}", "PCIe", us["pcie"](P_BYTES * local), (f"Adam {u}",),
                              "pcie", "copy the updated fp16 parameters to the GPU"))
            pcie += P_BYTES * local
            updated.append(f"H2D {u}")
    if stage in (1, 2):                                              # 5. share the update
        tasks.append(Task("AG params", "network", us["net"]("all_gather", psi), tuple(updated),
                          "all_gather", "all-gather the updated parameters"))
    spans = timeline.schedule(tasks)
    busy = {lane: timeline.busy_us(spans, lane) for lane in LANES}
    critical = {lane: 0.0 for lane in LANES}
    for span in timeline.critical_path(spans):
        critical[span.lane] += span.duration_us
    bound = max(LANES, key=lambda lane: critical[lane])
    return OffloadStep(spans, timeline.makespan(spans), busy, critical, bound,
                       {"PCIe": pcie, "NVMe": nvme})
