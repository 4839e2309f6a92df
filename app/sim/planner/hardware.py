"""The GPUs the planner knows and the efficiencies its cost model assumes, with their sources.

Peak dense BF16, HBM and NVLink bandwidth and memory capacity are the GPUs' data sheets, kept
with the other shared model data in :data:`app.catalog.gpus.GPUS` (the H800 is the H100 die for
export markets: the same tensor cores and HBM, NVLink cut to 400 GB/s both ways, 200 each way —
DeepSeek-V3 §3.1 measures 160 GB/s of it, 0.8 × 200 as NCCL's efficiency below). Dense FP8
(data sheets): H100, H800 and H200 1979 TFLOP/s, MI300X 2615; the A100 has no FP8 tensor cores.

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

from app.catalog.gpus import GPUS


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


def _spec(key, gemm, attention, fp8=0.0) -> GpuSpec:
    g = GPUS[key]
    return GpuSpec(key, g.name, g.capacity, g.peak_tflops, g.hbm_tbs, gemm, attention,
                   g.nvlink_gbs, fp8)


GPU_SPECS: dict[str, GpuSpec] = {s.key: s for s in (
    _spec("a100-40", 0.64, 0.45),
    _spec("a100-80", 0.64, 0.45),
    _spec("h100-80", 0.56, 0.30, 1979),
    _spec("h800-80", 0.56, 0.30, 1979),
    _spec("h200-141", 0.58, 0.32, 1979),
    _spec("mi300x-192", 0.40, 0.25, 2615),
)}

HBM_EFFICIENCY = 0.85
NCCL_EFFICIENCY = 0.80
BAND = 0.15
"""± fraction the page shows around every predicted throughput."""
