"""States fetched before anyone asks for them wait behind the states people ask for.

static/js/stage.js fetches, besides the state a person moves to, states they may move to next:
a drag's next states, the state under the pointer on a slider's track, the states one change
away while the page rests. Each such request carries ``X-Fetch-Ahead`` (its tier: ``guess``,
``intent``, ``rest``); a browser's own prefetch carries ``Sec-Purpose: prefetch``. While any page
render is in flight in this process (:data:`RENDERING`), such a request is answered **204 at
once, on the event loop** (:class:`FetchAhead`: before routing, parsing or the thread pool), so
fetching ahead never slows anyone's own move; the page asks again later. A state the params
reject, fetched ahead, comes back 200 with ``X-Stage-Status: 422`` (app/routes/scenes.py): kept
for the move that may come, without a failed load in the browser's console.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from contextlib import contextmanager

from starlette.datastructures import Headers

AHEAD = "x-fetch-ahead"


class Rendering:
    """How many page renders are in flight (threads of the pool)."""

    def __init__(self):
        self.count = 0
        self.lock = threading.Lock()

    def __enter__(self):
        with self.lock:
            self.count += 1

    def __exit__(self, *exc):
        with self.lock:
            self.count -= 1


RENDERING = Rendering()


class ClientGone(Exception):
    """The request's client went away while it waited for its turn."""


class GaveWay(ClientGone):
    """A state fetched ahead stopped rendering so that someone's own move, waiting for the
    turn, goes first (:meth:`Turns.give_way`); what it computed so far is kept."""


class Turns:
    """New states rendered one at a time in this process, in the order they were asked for.

    Rendering holds the GIL, so two renders at once in one process take as long as one after the
    other, and both answers come late; in turn, the first comes early. While a request waits,
    every ``poll_s`` it asks whether its client is still there: htmx aborts a move's request when
    the next move comes (hx-sync="this:replace"), so a drag of twenty moves costs the server the
    states it was still on when its turn came, not twenty renders — and a lecturer's move waits
    behind at most one state per student, not behind every move of every drag. A state
    fetched ahead (a drag's guess, rendered between a person's moves) gives way to a move that
    comes while it renders, at the next point where it can stop (:meth:`give_way`); a move
    waiting for the turn is handed it before any state fetched ahead."""

    def __init__(self, poll_s: float = 0.02):
        self.poll_s = poll_s
        self._lock = threading.Lock()
        # waiting turns, first asked first: (event, whether it is a state fetched ahead)
        self._queue: deque[tuple[threading.Event, bool]] = deque()
        self._busy = False
        self._holder = threading.local()   # whether this thread holds a turn fetched ahead

    @contextmanager
    def turn(self, gone: Callable[[], bool], ahead: bool = False):
        """Hold this process's render turn; raise :class:`ClientGone` if ``gone()`` says the
        client left while waiting for it. ``ahead``: the turn of a state fetched ahead, which
        gives way to someone's own move at :meth:`give_way`."""
        mine = threading.Event()
        entry = (mine, ahead)
        with self._lock:
            if self._busy:
                self._queue.append(entry)
            else:
                self._busy = True
                mine.set()
        while not mine.wait(self.poll_s):
            if gone():
                with self._lock:
                    if not mine.is_set():  # (else the turn was just handed over: take it)
                        self._queue.remove(entry)
                        raise ClientGone
        try:
            self._holder.ahead = ahead
            yield
        finally:
            self._holder.ahead = False
            with self._lock:
                if self._queue:
                    # someone's own move first, then the states fetched ahead, each in order
                    handed = next((e for e in self._queue if not e[1]), self._queue[0])
                    self._queue.remove(handed)
                    handed[0].set()
                else:
                    self._busy = False

    def give_way(self) -> None:
        """Where a render of a state fetched ahead may stop (between its trace, its deck and
        its page): if someone's own move waits for the turn, raise :class:`GaveWay`, so that
        the move waits for a part of a render at most, not for the whole of it. A no-op in
        any other turn."""
        if not getattr(self._holder, "ahead", False):
            return
        with self._lock:
            someone = any(not fetched_ahead for _, fetched_ahead in self._queue)
        if someone:
            raise GaveWay

    @property
    def waiting(self) -> int:
        return len(self._queue)


TURNS = Turns()


def is_ahead(headers) -> bool:
    """Whether a request asks for a state nobody is waiting for yet."""
    return ((AHEAD in headers and headers.get("hx-request") == "true")
            or "prefetch" in headers.get("sec-purpose", "").lower())


class FetchAhead:
    """Pure ASGI middleware: a fetch ahead while a render is in flight gets 204, no-store."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if (scope["type"] == "http" and scope["method"] == "GET" and RENDERING.count
                and is_ahead(Headers(scope=scope))):
            await send({"type": "http.response.start", "status": 204,
                        "headers": [(b"cache-control", b"no-store")]})
            await send({"type": "http.response.body", "body": b""})
            return
        await self.app(scope, receive, send)
