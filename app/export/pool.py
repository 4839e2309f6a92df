"""The processes that draw an export's frames side by side. resvg and CairoSVG hold the GIL
while they draw (about 0.15 s of CPU a 960 px frame, 0.1 s a PDF page), so threads would take
turns: a 30-frame export instead takes a share of every core.

Children are forked (not spawned): a spawned child re-imports the caller's ``__main__``, which
runs any script that imports the app without a ``__main__`` guard. They only draw (resvg,
CairoSVG), touching none of the parent's caches or locks."""

from __future__ import annotations

import multiprocessing
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any

WORKERS = int(os.environ.get("SHARDSCOPE_EXPORT_WORKERS", min(4, os.cpu_count() or 1)))
"""How many processes draw at once (``SHARDSCOPE_EXPORT_WORKERS``); 1 draws in the caller."""

_pool: ProcessPoolExecutor | None = None
_lock = threading.Lock()


def _executor() -> ProcessPoolExecutor:
    global _pool
    with _lock:
        if _pool is None:
            _pool = ProcessPoolExecutor(WORKERS, mp_context=multiprocessing.get_context("fork"))
        return _pool


def ordered(function: Callable[..., Any], items: Sequence[Any], *args: Any,
            progress: Callable[[int, int], None] | None = None) -> Iterator[Any]:
    """``function(item, *args)`` for each item, in order, drawn side by side; ``progress(done,
    total)`` after each."""
    total = len(items)
    if WORKERS < 2 or total < 3:
        results: Iterator[Any] = (function(item, *args) for item in items)
    else:
        results = _executor().map(function, items, *([a] * total for a in args))
    for done, value in enumerate(results, 1):
        if progress is not None:
            progress(done, total)
        yield value
