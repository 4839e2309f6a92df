"""Frames and traces: what every simulation returns.

A simulation is a pure function ``simulate(params) -> Trace``. The trace is plain, frozen data:
one :class:`Frame` per step that a lecturer can stop on, each with a caption in words and the
transfers that happened in that step. Each scene's trace adds its own numbers (buffers, memory,
timelines) and a ``to_dict()`` that produces the JSON contract of DESIGN.md. One trace feeds the
page, the JSON API, the SVG export, the tests and the comparison with a real run.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Transfer:
    """``elements`` numbers sent from rank ``src`` to rank ``dst`` in one step.

    ``reduce``: the receiver adds what arrives to what it holds (else it copies).
    ``label``: what moves, in words ("chunk 2").
    """

    src: int
    dst: int
    elements: int
    reduce: bool = False
    label: str = ""

    def to_dict(self) -> dict:
        return {"src": self.src, "dst": self.dst, "elements": self.elements,
                "reduce": self.reduce, "label": self.label}


@dataclass(frozen=True)
class Frame:
    """One step of a scene. Frame 0 is the state before anything happens."""

    step: int
    caption: str
    transfers: tuple[Transfer, ...] = ()
    phase: str = ""


def readonly(array: np.ndarray) -> np.ndarray:
    """Freeze a numpy array held by a frozen trace, so no view can change it afterwards."""
    array.flags.writeable = False
    return array


def plain(value):
    """numpy scalars and arrays → plain Python numbers and lists (JSON-ready)."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value
