"""Reading answers and the hints for wrong ones: units convert where their kind matches and are
refused with the accepted ones named where it does not; a number is right within 1 %, an
integer, a choice, coordinates and rank lists exactly; the classic mistakes get the hint that
names the step (the 2 of ring all-reduce, GB vs GiB, the fp32 master copy, a dropped (N−1)/N,
stopping a step early) and no hint states the answer."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from app.exercises.check import check, read_coords, read_ranks
from app.exercises.model import BANK
from app.exercises.units import PROBLEM_UNITS, AnswerError, convert, evaluate, num

BYTES, SECONDS, FRACTION = (PROBLEM_UNITS[u] for u in ("bytes", "s", "fraction"))


@pytest.mark.parametrize("text,unit,value,said", [
    ("31.4 GB", BYTES, 31.4e9, "GB"), ("31.4e9", BYTES, 31.4e9, "bytes"),
    ("29.2 GiB", BYTES, 29.2 * 2**30, "GiB"), ("512 MiB", BYTES, 512 * 2**20, "MiB"),
    ("1,024 bytes", BYTES, 1024, "bytes"), ("1.5×10⁹", BYTES, 1.5e9, "bytes"),
    ("1.5 x 10^9 B", BYTES, 1.5e9, "B"), ("3.1 ms", SECONDS, 3.1e-3, "ms"),
    ("250 µs", SECONDS, 250e-6, "µs"), ("250 us", SECONDS, 250e-6, "us"),
    ("2 min", SECONDS, 120, "min"), ("0.25", FRACTION, 0.25, "fraction"),
    ("25 %", FRACTION, 0.25, "%"), ("25%", FRACTION, 0.25, "%"),
    ("−0.5", FRACTION, -0.5, "fraction"), ("2^16", PROBLEM_UNITS[""], 65536, "plain"),
    ("7.5B", PROBLEM_UNITS["parameters"], 7.5e9, "B"),
    ("7.5 billion parameters", PROBLEM_UNITS["parameters"], 7.5e9, "billion"),
    ("42 ms", PROBLEM_UNITS["ms"], 42, "ms"), ("0.042 s", PROBLEM_UNITS["ms"], 42, "s"),
    ("400 Gb/s", PROBLEM_UNITS["GB/s"], 50, "Gb/s"), ("1.2 TFLOP", PROBLEM_UNITS["FLOP"], 1.2e12,
                                                      "TFLOP"),
])
def test_units_convert_within_their_kind(text, unit, value, said):
    got, understood = convert(text, unit)
    assert math.isclose(got, value, rel_tol=1e-12)
    assert said.split()[0].lower() in understood.lower() or said == "plain"


@pytest.mark.parametrize("text,unit,words", [
    ("12 ms", BYTES, ["time", "bytes", "GiB"]), ("3 GB", SECONDS, ["bytes", "time", "ms"]),
    ("3 parsecs", BYTES, ["not one this problem understands", "GB"]),
    ("abc", BYTES, ["must be a number"]), ("", BYTES, ["must be a number"]),
    ("12 GB", FRACTION, ["bytes", "fraction", "%"]),
])
def test_a_unit_of_the_wrong_kind_or_none_at_all_is_refused_with_what_is_accepted(text, unit,
                                                                                  words):
    with pytest.raises(AnswerError) as error:
        convert(text, unit)
    assert error.value.field == "answer"
    for word in words:
        assert word in error.value.message


@pytest.mark.parametrize("bad", [True, None, [1], {"a": 1}, float("inf")])
def test_answers_that_are_not_numbers_are_refused(bad):
    with pytest.raises(AnswerError):
        convert(bad, BYTES)


def test_coordinates_and_rank_lists_are_read_in_every_spelling():
    keys = ("tp", "cp", "dp", "pp")
    want = {"tp": 1, "cp": 0, "dp": 3, "pp": 2}
    for answer in (want, [1, 0, 3, 2], "tp=1, cp=0, dp=3, pp=2", "(1, 0, 3, 2)",
                   "pp 2 dp 3 cp 0 tp 1", {"tp": "1", "cp": 0, "dp": 3, "pp": 2}):
        assert read_coords(answer, keys) == want
    for bad in ("1, 2", {"tp": 1}, {"tp": 1.5, "cp": 0, "dp": 0, "pp": 0}, 7):
        with pytest.raises(AnswerError):
            read_coords(bad, keys)
    assert read_ranks("0, 4, 8, 12") == [0, 4, 8, 12] == read_ranks([0, 4, 8, 12])
    assert read_ranks("[3 7]") == [3, 7]
    for bad in ("zero, four", [1, 1], [], "-1, 2", [True]):
        with pytest.raises(AnswerError):
            read_ranks(bad)


def verdict(id_, given, answer, reveal=False):
    """The check of template ``id_`` at these givens (a copy of it that draws them)."""
    t = replace(BANK.templates[id_], draw=lambda d: dict(given))
    return check(t, 0, answer, reveal)


RING = {"ranks": 8, "bytes": 1_000_000_000}          # answer 1.75e9 bytes


def test_a_number_is_right_within_one_percent_and_says_how_it_was_read():
    assert verdict("ring-allreduce-bytes", RING, "1.75 GB")["correct"]
    assert verdict("ring-allreduce-bytes", RING, 1.76e9)["correct"]          # 0.57 % off
    assert not verdict("ring-allreduce-bytes", RING, 1.77e9)["correct"]      # 1.1 % off
    right = verdict("ring-allreduce-bytes", RING, "1.63 GiB")
    assert right["correct"] and "GiB" in right["unit_understood"]
    assert right["expected"] == 1.75e9 and right["tolerance"] == 0.01 and right["solution"]


@pytest.mark.parametrize("answer,words", [
    (0.875e9, ["2 of ring all-reduce"]),                 # forgot the 2
    (2e9, ["(N−1)/N"]),                                  # dropped (N−1)/N
    ("1.75 GiB", ["GiB", "GB"]),                         # bytes vs GiB
    (1.75e6, ["1000", "prefix"]),
    (125_000_000, ["step 2", "keep going"]),             # stopped at M/N
])
def test_ring_allreduce_mistakes_get_the_hint_for_their_step(answer, words):
    out = verdict("ring-allreduce-bytes", RING, answer)
    assert not out["correct"] and "solution" not in out and "expected" not in out
    for word in words:
        assert word in out["hint"], out["hint"]
    assert "1.75" not in out["hint"]


def test_the_fp32_master_copy_forgotten():
    out = verdict("zero-model-states", {"params": 7_500_000_000, "dp": 64, "stage": 1},
                  7.5e9 * (4 + 8 / 64))
    assert "master" in out["hint"]


def test_exact_kinds_and_choices():
    assert verdict("moe-capacity", {"tokens": 2048, "experts": 64, "top_k": 2,
                                    "capacity_factor": 1.25}, "80 tokens")["correct"]
    out = verdict("moe-capacity", {"tokens": 2048, "experts": 64, "top_k": 2,
                                   "capacity_factor": 1.25}, 81)
    assert not out["correct"] and "hint" in out
    out = verdict("moe-capacity", {"tokens": 2048, "experts": 64, "top_k": 2,
                                   "capacity_factor": 1.25}, 40)
    assert "k assignments" in out["hint"]
    with pytest.raises(AnswerError) as error:
        verdict("fp16-flush", {"value": 1e-9}, "tiny")
    assert "normal, subnormal, zero, overflow" in error.value.message
    assert verdict("fp16-flush", {"value": 1e-9}, "Zero")["correct"]
    wrong = verdict("layout-rank-coords", {"tp": 2, "cp": 2, "dp": 2, "pp": 2,
                                           "order": "tp-cp-ep-dp-pp", "rank": 13},
                    {"tp": 1, "cp": 0, "dp": 1, "pp": 0})
    assert "pp" in wrong["hint"] and "right" in wrong["hint"]


def test_reveal_gives_the_worked_solution_and_the_scene_at_those_numbers():
    out = verdict("ring-allreduce-bytes", RING, None, reveal=True)
    assert not out["correct"] and out["expected"] == 1.75e9
    assert [s["step"] for s in out["solution"]][0] == "Steps of the ring"
    assert all({"step", "formula", "value"} <= set(s) for s in out["solution"])
    assert out["scene_url"].startswith("/collective?") and "world=8" in out["scene_url"]


def test_numbers_print_so_that_they_evaluate_back():
    for x in (7.5e9, 0.001, 123456.7, 3.3895313892515355e38, 2**-24, 65504, 1.25e-7):
        assert math.isclose(evaluate(num(x, 12)), x, rel_tol=1e-9)
    assert evaluate("2 × 7.5×10⁹ + 12 × 7.5×10⁹ / 64") == 2 * 7.5e9 + 12 * 7.5e9 / 64
    assert evaluate("⌈4096 / 64 × 1.25⌉") == 80
    with pytest.raises(ValueError):
        evaluate("__import__('os')")
