"""Chapter 10, mixture of experts: router, capacity, load balancing, the expert-parallel
all-to-all (simulate.py), MoE model presets (presets.py) and EP×DP×TP×PP memory (parallel.py)."""

from app.sim.moe.params import MoeParams
from app.sim.moe.simulate import MoeTrace, simulate

__all__ = ["MoeParams", "MoeTrace", "simulate"]
