"""``/api/pipeline``'s JSON written straight to bytes.

A 1F1B schedule on 64 ranks with 1024 micro-batches has 131,072 actions; building a dict for
each and serialising them takes longer than the whole simulation, and so does joining a million
small strings. The JSON of an action is a fixed template, so it is laid out in numpy instead:
one fixed-width row of bytes per action, each piece (the ``"action"`` head and the stage and
kind looked up by (stage, kind), the micro-batch's digits, the times as orjson writes them)
zero-padded to the widest of its kind, and the zeros squeezed out (JSON text has none). This
is done a few thousand actions at a time, so that the rows stay in cache and their memory is
reused: touching fresh memory is a large part of the cost at this size. The result parses to
exactly what ``PipelineTrace.to_dict()["ranks"]`` holds (tests check it, and that the bytes
are those of the string-joining writer this replaced).
"""

from __future__ import annotations

import numpy as np
import orjson

from app.sim.pipeline.schedules import KINDS


def _table(texts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """ASCII texts (a numpy bytes array, zero-padded to its widest) as one fixed-width numpy
    void each, and their lengths."""
    return texts.view(f"V{texts.itemsize}"), np.char.str_len(texts)


def _concat(*parts) -> np.ndarray:
    """Element-wise concatenation of bytes arrays and bytes."""
    out = np.asarray(parts[0], dtype="S")
    for part in parts[1:]:
        out = np.char.add(out, part)
    return out


def _numbers(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each value as orjson writes it (one call for the whole array), zero-padded to a common
    width (a multiple of 8) as a numpy void each, and the lengths of the texts."""
    text = np.frombuffer(orjson.dumps(values, option=orjson.OPT_SERIALIZE_NUMPY), dtype=np.uint8)
    commas = np.flatnonzero(text == ord(","))
    begin = np.empty(values.size, dtype=np.int64)
    begin[0], begin[1:] = 1, commas + 1
    length = np.empty(values.size, dtype=np.int64)
    length[:-1], length[-1] = commas, text.size - 1          # up to the next ',' or the ']'
    length -= begin
    width = -(-int(length.max()) // 8) * 8
    padded = np.zeros(text.size + width, dtype=np.uint8)
    padded[:text.size] = text
    # the `width` bytes from each position of the text, without copying; then each number's
    windows = np.ndarray((text.size,), dtype=f"V{width}", buffer=padded, strides=(1,))
    out = windows[begin]
    keep = np.tri(width + 1, width, -1, dtype=np.uint8) * np.uint8(0xFF)  # k bytes of 0xff
    out.view(np.uint64).reshape(values.size, -1)[...] &= keep.view(np.uint64)[length]
    return out, length


def _times(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, ...]:
    """:func:`_numbers` of the starts and of the ends. A pass that starts as the one before it
    ends (most do) has the same number, so its text is copied rather than written again."""
    n = start.size
    again = np.zeros(n, dtype=bool)                 # the same float, bit for bit
    again[1:] = start[1:].view(np.int64) == end[:-1].view(np.int64)
    new = np.flatnonzero(~again)
    texts, lengths = _numbers(np.concatenate((end, start[new])))
    t0, t0_len = np.empty_like(texts[:n]), np.empty_like(lengths[:n])
    t0[new], t0_len[new] = texts[n:], lengths[n:]
    copied = np.flatnonzero(again)
    t0[copied], t0_len[copied] = texts[copied - 1], lengths[copied - 1]
    return t0, t0_len, texts[:n], lengths[:n]


CHUNK = 8192
"""Actions laid out at a time (about 1 MB of rows; 4096 to 16384 measure alike)."""


def trace_json(rank_stages: list[list[int]], offsets: np.ndarray, stage: np.ndarray,
               kind: np.ndarray, microbatch: np.ndarray, start: np.ndarray, end: np.ndarray,
               rest: bytes) -> bytes:
    """``{"ranks": [{"rank": r, "stages": [...], "actions": [{action, stage, kind, microbatch,
    start, end}, …]}, …], …rest}`` for actions laid out rank after rank (``offsets``); ``rest``
    is the JSON object of the other fields. Every rank has at least one action.

    An action's row is ``},{"action":"2F`` · ``0`` · ``","stage":2,"kind":"F","microbatch":``
    · ``0`` · ``,"start":`` · start · ``,"end":`` · end, each piece padded with zeros; the
    first and third are looked up by (stage, kind), the second and fourth by micro-batch, the
    times cut out of orjson's text of them. Squeezing the zeros out of the rows gives the
    actions one after another; each rank's run of them is opened with its header (in place of
    the leading ``},``) and closed."""
    stages = int(stage.max(initial=0)) + 1
    top = int(microbatch.max(initial=0)) + 1
    stage_digits = np.repeat(np.arange(stages).astype(f"S{len(str(stages - 1))}"), len(KINDS))
    kinds = np.tile(np.array(KINDS, dtype="S1"), stages)
    heads, head_len = _table(_concat(b'},{"action":"', stage_digits, kinds))
    middles, middle_len = _table(_concat(b'","stage":', stage_digits, b',"kind":"', kinds,
                                         b'","microbatch":'))
    mbs, mb_len = _table(np.arange(top).astype(f"S{len(str(top - 1))}"))
    starts, _ = _table(np.array([b',"start":']))
    ends, _ = _table(np.array([b',"end":']))
    fixed = len(',"start":') + len(',"end":')

    def text(a: int, b: int) -> tuple[np.ndarray, list[int]]:
        """Actions a to b as text, and where each begins (and the last ends) in it."""
        code = stage[a:b] * 4 + kind[a:b]
        mb = microbatch[a:b]
        t0, t0_len, t1, t1_len = _times(start[a:b], end[a:b])
        rows = np.empty(b - a, dtype=[("head", heads.dtype), ("mb", mbs.dtype),
                                      ("middle", middles.dtype), ("mb2", mbs.dtype),
                                      ("start", starts.dtype), ("t0", t0.dtype),
                                      ("end", ends.dtype), ("t1", t1.dtype)])
        np.take(heads, code, out=rows["head"], mode="clip")  # indices are in range; "clip"
        np.take(mbs, mb, out=rows["mb"], mode="clip")        # writes straight into `out`
        np.take(middles, code, out=rows["middle"], mode="clip")
        np.take(mbs, mb, out=rows["mb2"], mode="clip")
        rows["start"] = starts[0]
        rows["t0"] = t0
        rows["end"] = ends[0]
        rows["t1"] = t1
        length = head_len[code] + middle_len[code] + 2 * mb_len[mb] + t0_len + t1_len + fixed
        raw = rows.view(np.uint8)
        return raw[raw != 0], np.concatenate(([0], np.cumsum(length))).tolist()

    bounds = offsets.tolist()
    out = [b'{"ranks":[']                  # chunks' text and headers, joined once at the end
    r = 0                                   # the rank being written
    for a in range(0, bounds[-1], CHUNK):
        b = min(bounds[-1], a + CHUNK)
        chunk, at = text(a, b)
        k = a
        while k < b:
            skip = 0
            if k == bounds[r]:              # rank r starts here: its header replaces "},"
                out.append(f'{"," if r else ""}{{"rank":{r},"stages":{rank_stages[r]},'
                           f'"actions":['.encode())
                skip = 2
            stop = min(b, bounds[r + 1])
            out.append(chunk[at[k - a] + skip:at[stop - a]])
            k = stop
            if stop == bounds[r + 1]:
                out.append(b"}]}")
                r += 1
    out += [b"],", memoryview(rest)[1:]]
    return b"".join(out)
