"""The GPUs a scene can run on: memory capacity, dense BF16 peak, HBM and NVLink bandwidth.

Vendors' data sheets: peak dense BF16 (no sparsity) A100 312 TFLOP/s, H100 SXM 989, H800 989
(the H100 die for export markets, NVLink cut to 400 GB/s both ways), H200 989, MI300X 1307; HBM
bandwidth A100 40 GB 1.555 TB/s, A100 80 GB 2.039, H100 SXM and H800 3.35, H200 4.8, MI300X 5.3;
NVLink (Infinity Fabric for the MI300X) per GPU and direction A100 300 GB/s, H100 and H200 450,
H800 200, MI300X 448. Capacities are the marketed sizes read as GiB (the driver reports a
little less: an assumption the memory ledger states). What a GPU achieves of these peaks is the
planner's cost model (app/sim/planner/hardware.py), not data.
"""

from __future__ import annotations

from dataclasses import dataclass

GIB = 2**30


@dataclass(frozen=True)
class Gpu:
    key: str                 # the query's value: gpu=h100-80
    name: str                # shown on the pages: "H100 80 GB"
    capacity: int            # bytes
    peak_tflops: float       # dense BF16, TFLOP/s
    hbm_tbs: float           # HBM bandwidth, TB/s
    nvlink_gbs: float        # NVLink per GPU, one direction, GB/s


GPUS: dict[str, Gpu] = {g.key: g for g in (
    Gpu("a100-40", "A100 40 GB", 40 * GIB, 312.0, 1.555, 300.0),
    Gpu("a100-80", "A100 80 GB", 80 * GIB, 312.0, 2.039, 300.0),
    Gpu("h100-80", "H100 80 GB", 80 * GIB, 989.0, 3.35, 450.0),
    Gpu("h800-80", "H800 80 GB", 80 * GIB, 989.0, 3.35, 200.0),
    Gpu("h200-141", "H200 141 GB", 141 * GIB, 989.0, 4.8, 450.0),
    Gpu("mi300x-192", "MI300X 192 GB", 192 * GIB, 1307.0, 5.3, 448.0),
)}

GPU_TEXTS = {key: gpu.name for key, gpu in GPUS.items()}
"""A GPU's option text on the pages: "A100 40 GB"."""
