"""Chapters 1 and 11: the five parallelisms, the 5D rank layout, its traffic and its launch."""

from app.sim.parallelism.params import ParallelismParams
from app.sim.parallelism.simulate import ParallelismTrace, simulate

__all__ = ["ParallelismParams", "ParallelismTrace", "simulate"]
