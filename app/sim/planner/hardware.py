"""The GPUs the planner knows and the efficiencies its cost model assumes, with their sources.

Peak dense BF16 (no sparsity) from the vendors' data sheets: A100 312 TFLOP/s, H100 SXM 989,
H800 989 (the H100 die for export markets: the same tensor cores and HBM, NVLink cut to 400
GB/s both ways, 200 each way — DeepSeek-V3 §3.1 measures 160 GB/s of it, 0.8 × 200 as NCCL's
efficiency below), H200 989, MI300X 1307. Dense FP8: H100, H800 and H200 1979, MI300X 2615; the
A100 has no FP8 tensor cores. HBM bandwidth: A100 40 GB 1.555 TB/s, A100 80 GB 2.039, H100 SXM
and H800 3.35, H200 4.8, MI300X 5.3. Memory capacities are chapter 1's
(:data:`app.sim.memory.fit.GPUS`).

Achievable fractions (the uncertain part, each a measurement, not a fit to the planner's tests):

* ``gemm``: a large BF16 GEMM with cuBLAS reaches ≈ 0.80 of peak on A100 (≈ 250 of 312
  TFLOP/s on 8k×8k×8k, NVIDIA's cuBLAS numbers and Megatron-LM's GEMM sweeps in Narayanan
  et al. 2021 §5.8) and ≈ 0.70 on H100 SXM (≈ 700 of 989 TFLOP/s: its tensor cores outrun
  power and memory more often); MI300X ≈ 0.50 of 1307 in public hipBLASLt measurements.
* ``attention``: FlashAttention-2 runs forward + backward at 0.50–0.70 of A100's peak (Dao
  2023, Fig. 4–6) and ≈ 0.35–0.45 of H100's; FlashAttention-3 reaches 0.55–0.75 on H100
  (Shah et al. 2024). Middles of those ranges are used.
* ``hbm``: a streaming kernel reaches ≈ 0.85 of HBM bandwidth (STREAM-like copies).
* ``nccl``: NCCL's bus bandwidth reaches ≈ 0.8 of the link rate at large messages
  (nccl-tests on DGX A100/H100: ≈ 230 of 300 GB/s NVLink on A100, ≈ 360 of 450 on H100,
  ≈ 40 of 50 GB/s per 400 Gb/s NIC).

The band the page shows (±15 %) is the spread of those measurements, not a statistical error.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.sim.memory.fit import GPUS as MEMORY_GPUS


@dataclass(frozen=True)
class GpuSpec:
    key: str
    name: str
    capacity: float          # bytes (chapter 1's table)
    peak_tflops: float       # dense BF16
    hbm_tbs: float           # TB/s
    gemm: float              # achievable fraction of peak on a large GEMM
    attention: float         # achievable fraction of peak in flash attention (fwd + bwd)
    nvlink_gbs: float        # NVLink per GPU, one direction, GB/s (default of the form)
    fp8_tflops: float = 0.0  # dense FP8 peak (0: no FP8 tensor cores)


def _spec(key, peak, hbm, gemm, attention, nvlink, fp8=0.0) -> GpuSpec:
    g = MEMORY_GPUS[key]
    return GpuSpec(key, g.name, g.capacity, peak, hbm, gemm, attention, nvlink, fp8)


GPU_SPECS: dict[str, GpuSpec] = {s.key: s for s in (
    _spec("a100-40", 312, 1.555, 0.64, 0.45, 300),
    _spec("a100-80", 312, 2.039, 0.64, 0.45, 300),
    _spec("h100-80", 989, 3.35, 0.56, 0.30, 450, 1979),
    _spec("h800-80", 989, 3.35, 0.56, 0.30, 200, 1979),
    _spec("h200-141", 989, 4.8, 0.58, 0.32, 450, 1979),
    _spec("mi300x-192", 1307, 5.3, 0.40, 0.25, 448, 2615),
)}

HBM_EFFICIENCY = 0.85
NCCL_EFFICIENCY = 0.80
BAND = 0.15
"""± fraction the page shows around every predicted throughput."""
