"""``/api/pipeline``'s JSON written straight to bytes.

A 1F1B schedule on 64 ranks with 1024 micro-batches has 131,072 actions; building a dict for
each and serialising them takes longer than the whole simulation. The JSON of an action is a
fixed template, so the pieces (stage, kind, micro-batch as text; the times serialised by orjson
in one call) are laid side by side in one list and joined once per rank. The result parses to
exactly what ``PipelineTrace.to_dict()["ranks"]`` holds (tests check it).
"""

from __future__ import annotations

import numpy as np
import orjson

from app.sim.pipeline_schedules import KINDS

_PIECES = 8  # per action, see ``ranks_json``


def _numbers(values: np.ndarray) -> list[str]:
    """Each value as orjson writes it (one call for the whole array)."""
    if values.size == 0:
        return []
    return orjson.dumps(values, option=orjson.OPT_SERIALIZE_NUMPY)[1:-1].decode().split(",")


def trace_json(rank_stages: list[list[int]], offsets: np.ndarray, stage: np.ndarray,
               kind: np.ndarray, microbatch: np.ndarray, start: np.ndarray, end: np.ndarray,
               rest: bytes) -> bytes:
    """``{"ranks": [{"rank": r, "stages": [...], "actions": [{action, stage, kind, microbatch,
    start, end}, …]}, …], …rest}`` for actions laid out rank after rank (``offsets``); ``rest``
    is the JSON object of the other fields. Every rank has at least one action.

    An action is 8 pieces: ``{"action":"2F`` · ``0`` · ``","stage":2,"kind":"F","microbatch":``
    · ``0`` · ``,"start":`` · start · ``,"end":`` · end — the first and third looked up by
    (stage, kind), the rest laid in with list slices — and one ``str.join`` (several times
    faster than joining bytes) makes the ASCII text of every rank."""
    n = stage.size
    stages = int(stage.max(initial=0)) + 1
    numbers = [str(i) for i in range(max(stages, int(microbatch.max(initial=0)) + 1))]
    heads = ['},{"action":"' + numbers[s] + k for s in range(stages) for k in KINDS]
    middles = ['","stage":' + numbers[s] + ',"kind":"' + k + '","microbatch":'
               for s in range(stages) for k in KINDS]
    code = (stage * 4 + kind).tolist()
    mbs = list(map(numbers.__getitem__, microbatch.tolist()))
    times = _numbers(np.stack([start, end], axis=1).reshape(-1))
    pieces: list[str] = [""] * (_PIECES * n)
    pieces[0::_PIECES] = list(map(heads.__getitem__, code))
    pieces[1::_PIECES] = mbs
    pieces[2::_PIECES] = list(map(middles.__getitem__, code))
    pieces[3::_PIECES] = mbs
    pieces[4::_PIECES] = [',"start":'] * n
    pieces[5::_PIECES] = times[0::2]
    pieces[6::_PIECES] = [',"end":'] * n
    pieces[7::_PIECES] = times[1::2]
    for r, (a, b) in enumerate(zip(offsets[:-1].tolist(), offsets[1:].tolist())):
        opening = '{"ranks":[' if r == 0 else ","
        pieces[_PIECES * a] = (f'{opening}{{"rank":{r},"stages":{rank_stages[r]},"actions":['
                               + pieces[_PIECES * a][2:])
        pieces[_PIECES * b - 1] += "}]}"
    return "".join(pieces).encode() + b"]," + rest[1:]
