"""New states are rendered in turn, first asked first, and a request whose client has left
gives its turn up (app/routes/ahead.py, Turns): a drag's superseded moves cost nothing, and a
lecturer's move waits behind at most one state per student."""

from __future__ import annotations

import threading
import time

import pytest

from app.routes.ahead import ClientGone, Turns


def test_turns_go_first_asked_first_and_one_at_a_time():
    turns, order, inside = Turns(poll_s=0.005), [], []
    first = threading.Event()

    def render(name, gone=lambda: False):
        with turns.turn(gone):
            inside.append(name)
            assert len(inside) == 1, inside  # never two at once
            order.append(name)
            if name == "a":
                first.wait(5)
            time.sleep(0.01)
            inside.remove(name)

    a = threading.Thread(target=render, args=("a",))
    a.start()
    time.sleep(0.05)
    later = []
    for name in "bcd":
        later.append(threading.Thread(target=render, args=(name,)))
        later[-1].start()
        time.sleep(0.03)  # b asks before c, c before d
    assert turns.waiting == 3
    first.set()
    for t in [a, *later]:
        t.join(5)
    assert order == ["a", "b", "c", "d"] and turns.waiting == 0


def test_a_request_whose_client_left_gives_its_turn_up():
    turns, done = Turns(poll_s=0.005), []
    hold = threading.Event()
    left = threading.Event()

    def holder():
        with turns.turn(lambda: False):
            hold.wait(5)

    def aborted():
        with pytest.raises(ClientGone):
            with turns.turn(left.is_set):
                done.append("rendered anyway")

    def lecturer():
        with turns.turn(lambda: False):
            done.append("lecturer")

    threads = [threading.Thread(target=holder)]
    threads[0].start()
    time.sleep(0.02)
    threads.append(threading.Thread(target=aborted))
    threads[1].start()
    time.sleep(0.02)
    threads.append(threading.Thread(target=lecturer))
    threads[2].start()
    time.sleep(0.02)
    left.set()  # htmx aborted that move's request: the next move came
    time.sleep(0.05)
    assert turns.waiting == 1  # only the lecturer still waits
    hold.set()
    for t in threads:
        t.join(5)
    assert done == ["lecturer"]
