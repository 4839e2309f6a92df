"""The problem bank: every chapter's problems, generated from the simulations the scenes use.

Each chapter module declares its templates (app/exercises/model.py: ``@exercise``); importing
this package registers them all in :data:`BANK`, in course order. ``problem`` and ``check``
(app/exercises/check.py) are what the API, the pages, the sheets and the CLI call.
"""

from __future__ import annotations

from app.exercises import (  # noqa: F401 — each module registers its templates
    ch01_overview,
    ch02_collectives,
    ch03_optimizers,
    ch04_data_parallel,
    ch05_zero,
    ch06_tensor_parallel,
    ch07_pipeline,
    ch08_precision,
    ch09_long_context,
    ch10_moe,
    ch11_together,
)
from app.exercises.model import BANK, Template


def template(id: str) -> Template | None:
    return BANK.templates.get(id)


def templates() -> list[Template]:
    return list(BANK.templates.values())
