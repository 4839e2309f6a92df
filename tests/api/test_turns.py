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


def test_a_state_fetched_ahead_gives_way_to_a_move_that_comes_while_it_renders():
    """The drag's guess renders between a person's moves; the next move comes meanwhile: the
    guess stops at its next give_way (GaveWay, a ClientGone: the route answers 204) and the
    move is handed the turn before another guess that asked earlier."""
    turns, order = Turns(poll_s=0.005), []
    traced, move_waits = threading.Event(), threading.Event()

    def guess(name, wait_for=None):
        try:
            with turns.turn(lambda: False, ahead=True):
                order.append(f"{name} starts")
                turns.give_way()            # nobody waits yet: goes on
                traced.set()
                if wait_for is not None:
                    wait_for.wait(5)
                turns.give_way()            # the move waits now: stops here
                order.append(f"{name} finished")
        except ClientGone as gave_way:
            order.append(f"{name} gave way ({type(gave_way).__name__})")

    def move():
        with turns.turn(lambda: False):
            order.append("move")
            turns.give_way()                # a no-op in someone's own turn

    first = threading.Thread(target=guess, args=("guess 1", move_waits))
    first.start()
    traced.wait(5)
    second = threading.Thread(target=guess, args=("guess 2",))
    second.start()                          # asks before the move, waits
    time.sleep(0.03)
    person = threading.Thread(target=move)
    person.start()
    time.sleep(0.03)
    assert turns.waiting == 2
    move_waits.set()
    for t in (first, second, person):
        t.join(5)
    assert order == ["guess 1 starts", "guess 1 gave way (GaveWay)", "move", "guess 2 starts",
                     "guess 2 finished"]
    assert turns.waiting == 0


def test_a_guess_that_gave_way_is_answered_204_and_not_kept(client):
    from app.routes import ahead
    calls = []
    original = ahead.TURNS.give_way

    def someone_waits():
        calls.append(1)
        if len(calls) == 2:                 # after the trace, before the page
            raise ahead.GaveWay
    ahead.TURNS.give_way = someone_waits
    try:
        url = "/collective?world=13&count=26"
        gave = client.get(url, headers={"HX-Request": "true", "X-Fetch-Ahead": "guess"})
    finally:
        ahead.TURNS.give_way = original
    assert gave.status_code == 204 and gave.headers["cache-control"] == "no-store"
    again = client.get(url, headers={"HX-Request": "true", "X-Fetch-Ahead": "guess"})
    assert again.status_code == 200 and "13 ranks" in again.text
