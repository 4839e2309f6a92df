"""Chapter 11's capstone: the tiny GPT that workers/train trains with all five parallelisms, and
the cost model that predicts one of its steps rank by rank."""

from app.sim.train.params import TrainParams
from app.sim.train.simulate import TrainTrace, simulate

__all__ = ["TrainParams", "TrainTrace", "simulate"]
