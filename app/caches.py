"""Every cache of the server, in one place, each bounded by bytes (issue 11).

Simulations, deck writers and templates are pure functions of a scene's params, so what was
computed is kept while it is recent: dragging a slider back and forth revisits the same states,
and a page, its htmx fragment, its embed, its JSON and its SVG all read one trace. Four layers
are worth keeping, each an LRU map with a byte budget (sizes are measured when an entry is
stored, ``len`` for text; objects by :func:`approx_bytes` once the answer that computed them has
been sent, :func:`after_answer`):

    TRACES  a scene's trace, by (simulate, params)                          128 MiB
    DECKS   deck geometry and the markup of its frames, by (function, args)   64 MiB
    PAGES   rendered pages and stage fragments, by scene, params, frame, …    48 MiB
    JSON    /api answers, by (scene, params)                                  96 MiB
    EXPORTS /export files (GIF, MP4, PDF, PPTX, HTML, PNG), by scene, params, options 32 MiB
    ANSWERS /api bodies by the exact path and query (the JSON layer's bytes)  32 MiB
    SENT    whole answers as sent (gzipped), by ETag (app/http_cache.py)      32 MiB

400 MiB in all (ANSWERS shares its bytes with JSON), so that a server that has answered many heavy states stays under 600 MB
resident (tests/api/test_memory_bound.py starts one and measures): the rest is the
interpreter and its libraries (~75 MB), the arrays of the request in flight, and the heap's
own slack (see :func:`release_freed_memory`). One entry larger than a
quarter of its budget is not kept at all: it would push out everything else for one state that
is cheap to recompute compared with what it evicts.

Small memo tables of pure helpers (colour mixing, labels, arrow geometry; a few thousand short
strings) keep their ``functools.lru_cache``: their size is bounded by their entry count.
"""

from __future__ import annotations

import gc
import sys
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Hashable
from dataclasses import fields, is_dataclass
from functools import lru_cache, wraps
from typing import Any

import numpy as np

MiB = 2**20


FLAT = frozenset({str, int, float, bool, type(None)})
RECORD = 8
"""A tuple of at most this many numbers and strings is a record (a rect, a point): its items
are counted where it is met, without a trip through the stack (a /train deck holds
thousands)."""
RECORDS = 16
"""A list or tuple of more records than this is sized from eight of them."""


def _is_record(item: Any) -> bool:
    return (type(item) is not list and isinstance(item, tuple) and len(item) <= RECORD
            and all(type(x) in FLAT for x in item))


def _record_bytes(record: tuple) -> int:
    """A record's tuple and its numbers (its text is counted apart)."""
    return sys.getsizeof(record) + sum(sys.getsizeof(x) for x in record if type(x) is not str)


@lru_cache(maxsize=None)
def _field_names(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in fields(cls))


def _flat_row(items) -> tuple[list, list] | None:
    """Eight evenly spaced of ``items`` and their fields' values, if they are instances of one
    dataclass whose values are numbers and text (else None)."""
    cls = type(items[0])
    if type(items[-1]) is not cls or not is_dataclass(cls):
        return None
    picked = [items[k * (len(items) - 1) // 7] for k in range(8)]
    if any(type(x) is not cls for x in picked):
        return None
    names = _field_names(cls)
    values = [getattr(x, name) for x in picked for name in names]
    if any(type(v) not in FLAT for v in values):
        return None
    return picked, values


def approx_bytes(obj: Any, sample: int = 48) -> int:
    """Roughly how much memory ``obj`` holds: numpy arrays by ``nbytes``, text by
    ``sys.getsizeof``, containers and dataclasses by their items. A long list or tuple is
    estimated from ``sample`` evenly spaced items (traces hold thousands of alike frames), so
    the cost stays proportional to the object's shape, not its size. Shared objects count once."""
    seen: set[int] = set()
    total = 0
    stack: list[tuple[Any, int]] = [(obj, 1)]
    while stack:
        item, weight = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, np.ndarray):
            total += weight * (item.nbytes + 112)
        elif isinstance(item, (str, bytes, bytearray, int, float, bool, type(None))):
            total += weight * sys.getsizeof(item)
        elif isinstance(item, (list, tuple, set, frozenset)):
            total += weight * sys.getsizeof(item)
            items = list(item) if not isinstance(item, (list, tuple)) else item
            if _is_record(items):        # a small record of numbers and text (a rect, a point)
                for x in items:
                    if id(x) not in seen:
                        seen.add(id(x))
                        total += weight * sys.getsizeof(x)
            elif len(items) > RECORDS and _is_record(items[0]) and _is_record(items[-1]):
                # many records (a deck's rects): their mean size from a few, evenly spaced;
                # their text (a colour, a label) is most often shared, so counted once
                picked = [items[k * (len(items) - 1) // 7] for k in range(8)]
                if all(map(_is_record, picked)):
                    total += weight * len(items) * sum(map(_record_bytes, picked)) / 8
                    stack.extend((x, weight) for r in picked for x in r if type(x) is str)
                else:
                    stack.extend((x, weight) for x in items)
            elif len(items) > RECORDS and (row := _flat_row(items)) is not None:
                # many flat dataclass instances of one type (a frame's arrows, a step's
                # transfers: numbers and text only, so nothing of theirs is shared but text):
                # their mean size from eight of them, evenly spaced; a text two of them share
                # (a colour, an empty label) is most often shared by all, so counted once
                picked, values = row
                each = weight * len(items) / 8
                texts: dict[int, int] = {}
                for v in values:
                    if type(v) is str:
                        texts[id(v)] = texts.get(id(v), 0) + 1
                total += each * sum(map(sys.getsizeof, picked))
                seen.update(map(id, picked))
                stack.extend((v, weight if type(v) is str and texts[id(v)] > 1 else each)
                             for v in values)
            elif len(items) > 2 * sample:
                step = len(items) / sample
                picked = [items[int(k * step)] for k in range(sample)]
                stack.extend((x, weight * len(items) / sample) for x in picked)
            else:
                stack.extend((x, weight) for x in items)
        elif isinstance(item, dict):
            total += weight * sys.getsizeof(item)
            stack.extend((x, weight) for pair in item.items() for x in pair)
        elif is_dataclass(item) and not isinstance(item, type):
            total += weight * sys.getsizeof(item)
            stack.extend((getattr(item, name), weight) for name in _field_names(type(item)))
        elif hasattr(item, "__dict__") and not isinstance(item, type):
            total += weight * sys.getsizeof(item)
            stack.extend((x, weight) for x in vars(item).values())
        else:
            total += weight * sys.getsizeof(item)
    return int(total)


class ByteCache:
    """A thread-safe LRU map bounded by the bytes of what it holds. A cache whose ``size`` walks
    objects (:func:`approx_bytes`) is ``deferred``: an entry is kept at once and sized by
    :func:`settle`, after the answer that computed it has been sent (:class:`AfterAnswer`),
    so that no one waits for the walk."""

    def __init__(self, name: str, max_bytes: int, size: Callable[[Any], int] = len,
                 deferred: bool = False):
        self.name = name
        self.max_bytes = max_bytes
        self.size = size
        self.deferred = deferred
        self.items: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self.total = 0
        self.lock = threading.Lock()

    def get(self, key: Hashable) -> Any:
        """The value kept for ``key``, or None (never computes)."""
        with self.lock:
            entry = self.items.get(key)
            if entry is None:
                return None
            self.items.move_to_end(key)
            return entry[0]

    def put(self, key: Hashable, value: Any) -> None:
        if self.deferred:
            self._keep(key, value, 0)
            UNSIZED.append((self, key, value))
            if len(UNSIZED) > MOST_UNSIZED:
                settle()
            return
        nbytes = self.size(value)
        if nbytes <= self.max_bytes // 4:
            self._keep(key, value, nbytes)

    def _keep(self, key: Hashable, value: Any, nbytes: int) -> None:
        with self.lock:
            old = self.items.pop(key, None)
            if old is not None:
                self.total -= old[1]
            self.items[key] = (value, nbytes)
            self.total += nbytes
            self._evict()

    def _evict(self) -> None:
        while self.total > self.max_bytes:
            _, (_, dropped) = self.items.popitem(last=False)
            self.total -= dropped

    def sized(self, key: Hashable, value: Any, nbytes: int) -> None:
        """``value``, kept for ``key`` unsized, holds ``nbytes``: count them (one larger than a
        quarter of the budget is not kept), unless it has gone or been replaced meanwhile."""
        with self.lock:
            entry = self.items.get(key)
            if entry is None or entry[0] is not value:
                return
            if nbytes > self.max_bytes // 4:
                del self.items[key]
                self.total -= entry[1]
                return
            self.items[key] = (value, nbytes)   # in its place in the LRU order
            self.total += nbytes - entry[1]
            self._evict()

    def clear(self) -> None:
        with self.lock:
            self.items.clear()
            self.total = 0

    def stats(self) -> dict:
        with self.lock:
            return {"name": self.name, "entries": len(self.items), "bytes": self.total,
                    "max_bytes": self.max_bytes}


UNSIZED: deque[tuple[ByteCache, Hashable, Any]] = deque()
"""Entries of deferred caches kept but not sized yet, oldest first."""
MOST_UNSIZED = 32
"""Past this many, a put sizes them all at once (where no answer is sent to settle after: the
command line, a bench, a test)."""


def after_answer() -> None:
    """What an answer's computation left to do once the answer has gone: size what it kept
    (:func:`settle`), and the collector's pass if one is due (:func:`collect_after_answer`)."""
    settle()
    collect_after_answer()


def after_answer_due() -> bool:
    """Whether :func:`after_answer` has anything to do (checked on the event loop)."""
    return bool(UNSIZED) or gc.get_count()[0] >= AFTER_ANSWER_THRESHOLDS[0]


def settle() -> None:
    """Size every entry kept unsized (any thread; each once)."""
    while True:
        try:
            cache, key, value = UNSIZED.popleft()
        except IndexError:
            return
        cache.sized(key, value, cache.size(value))


TRACES = ByteCache("traces", 128 * MiB, approx_bytes, deferred=True)
DECKS = ByteCache("decks", 64 * MiB, approx_bytes, deferred=True)
PAGES = ByteCache("pages", 48 * MiB)
JSON = ByteCache("json", 96 * MiB)
EXPORTS = ByteCache("exports", 32 * MiB)
ANSWERS = ByteCache("answers", 32 * MiB)
"""/api bodies by the exact path and query string asked (app/routes/answers.py); the same bytes
objects as JSON holds, so they cost little beside it."""
SENT = ByteCache("sent", 32 * MiB, lambda entry: len(entry[1]) + 64 * len(entry[0]))
"""Whole answers of pure routes (headers and the body as sent, gzipped where it was), by their
ETag: a repeat view is answered on the event loop, before routing, parsing, the thread pool or
gzip (app/http_cache.py). A fragment is kept here at a fifth of its size in PAGES."""
LAYERS = (TRACES, DECKS, PAGES, JSON, EXPORTS, ANSWERS, SENT)

HEAVY_S = 0.05
"""A computation longer than this is followed by :func:`release_freed_memory` (a trim takes
about a millisecond)."""


_nested = threading.local()
"""How many memoised computations this thread is inside."""


def memoised(cache: ByteCache):
    """Decorator: keep a pure function's results in ``cache``, keyed by the function and its
    (hashable) arguments."""

    def wrap(function):
        name = f"{function.__module__}.{function.__qualname__}"

        @wraps(function)
        def cached(*args):
            key = (name, args)
            value = cache.get(key)
            if value is None:
                started = time.perf_counter()
                _nested.depth = getattr(_nested, "depth", 0) + 1
                try:
                    value = function(*args)
                finally:
                    _nested.depth -= 1
                cache.put(key, value)
                # once, after the outermost (a page's SVG computes its deck, which computes
                # its trace: one trim, not three)
                if not _nested.depth and time.perf_counter() - started > HEAVY_S:
                    release_freed_memory()
            return value

        cached.uncached = function
        cached.kept = lambda *args: cache.get((name, args))  # the value if kept; never computes
        return cached

    return wrap


def release_freed_memory() -> None:
    """Let freed memory go back to the system (glibc only; elsewhere a no-op).

    A heavy state allocates tens of MB of short-lived arrays while it is simulated and drawn.
    glibc raises its mmap threshold after such frees (up to 32 MiB), so later large arrays come
    from the heap, whose freed pages it keeps: a server that had answered forty heavy states
    held 800 MB resident for 450 MB of caches. Fixing the threshold at 256 KiB (large arrays
    are mapped and unmapped whole) and trimming the heap after a heavy computation keeps the
    resident size near what the caches hold.
    """
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)


def fix_mmap_threshold() -> None:
    libc = _libc()
    if libc is not None:
        M_MMAP_THRESHOLD = -3
        libc.mallopt(M_MMAP_THRESHOLD, 256 * 1024)


COLLECTOR_THRESHOLDS = (50_000, 20, 10)
"""CPython's cycle collector runs a young-generation pass every 700 new container objects by
default (thresholds 700, 10, 10). A heavy state makes tens of thousands of small objects
(/train's step at 16 micro-batches: 11,000 timed tasks, their spans, events and rects), all
acyclic and kept, so the collector scans them again and again for nothing: a third of that
state's simulation time on this machine (bench: /train's heaviest pages). Every 50,000 new
objects instead costs a few MB at most between passes."""


def tune_collector() -> None:
    """Collect cycles less often (:data:`COLLECTOR_THRESHOLDS`)."""
    gc.set_threshold(*COLLECTOR_THRESHOLDS)


AFTER_ANSWER_THRESHOLDS = (25_000, 40, 10)
"""After an answer has been sent, a pass of the cycle collector runs once this many container
objects are new since the last; the middle generation's every 40 such passes, the oldest's
every 10 of those: half the threshold of :data:`COLLECTOR_THRESHOLDS` twice as often, the same
pace for the older generations (:func:`collect_after_answer`)."""


def collect_after_answer() -> None:
    """The collector's pass that is due, now that an answer has gone and the browser is busy
    drawing it (app/main.py, AfterAnswer): the oldest generation whose count passed its
    threshold (:data:`AFTER_ANSWER_THRESHOLDS`). A pass scans every young object and what it
    reaches: 20–30 ms when one came in the middle of a render (first visits of /collective,
    /pipeline, /optimizer and /train), and so in someone's jump. Passes after answers keep the
    young generation short of the collector's own threshold, so that one rarely comes during
    one."""
    young, first, second = gc.get_count()
    young_limit, first_limit, second_limit = AFTER_ANSWER_THRESHOLDS
    if young < young_limit:
        return
    gc.collect(2 if second >= second_limit else 1 if first >= first_limit else 0)


def freeze_startup_objects() -> None:
    """Move everything alive once the server has started (modules, tables, the planner's
    ledger) out of the collector's sight (``gc.freeze``): full passes then scan only what
    requests made."""
    gc.collect()
    gc.freeze()


@lru_cache(maxsize=1)
def _libc():
    """glibc, loaded once: ``find_library`` runs ``ldconfig -p`` in a subprocess (a fork of
    the server, 2–40 ms on a loaded machine), which would otherwise follow every heavy render."""
    import ctypes
    import ctypes.util
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.malloc_trim, libc.mallopt  # noqa: B018 - glibc has both; musl has neither
    except (OSError, AttributeError):
        return None
    return libc
