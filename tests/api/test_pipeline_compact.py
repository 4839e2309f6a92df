"""/api/pipeline beyond COMPACT_PASSES passes: each rank's actions as "2F0@13.5" strings that
parse back to the same stage, kind, micro-batch, start and end as the full records."""

from __future__ import annotations

import pytest

from app.sim.pipeline.params import PipelineParams
from app.sim.pipeline.schedules import KINDS
from app.sim.pipeline.simulate import COMPACT_PASSES, simulate


def split(label: str) -> tuple[int, str, int, float]:
    action, start = label.split("@")
    kind = next(k for k in KINDS if k in action)
    stage, mb = action.split(kind)
    return int(stage), kind, int(mb), float(start.split("-")[0])


@pytest.mark.parametrize("query", [
    "schedule=1f1b&stages=16&microbatches=1024",
    "schedule=zb_h1&stages=8&microbatches=1024&t_f=0.3&t_w=0.7&t_comm=0.1",
    "schedule=interleaved_1f1b&stages=8&chunks=4&microbatches=512&t_comm=0.25",
])
def test_compact_actions_parse_back(client, query):
    body = client.get(f"/api/pipeline?{query}").json()
    assert body["actions_form"] == "compact"
    params = PipelineParams(**dict(kv.split("=") for kv in query.split("&")))
    trace = simulate(params)
    assert trace.flat.ids.size > COMPACT_PASSES
    flat, line = trace.flat, trace.line
    for rank in body["ranks"][:: max(1, len(body["ranks"]) // 4)]:
        a = int(flat.offsets[rank["rank"]])
        for k, label in enumerate(rank["actions"][:: 97]):
            i = a + k * 97
            stage, kind, mb, start = split(label)
            assert (stage, kind, mb) == (int(flat.stage[i]), KINDS[flat.kind[i]],
                                         int(flat.microbatch[i]))
            assert start == pytest.approx(float(line.start[i]), rel=1e-7, abs=1e-7)
            end = start + body["durations"][kind]
            assert end == pytest.approx(float(line.end[i]), rel=1e-7, abs=1e-6)
    assert len(body["memory"]) == params.stages and "peak" in body["memory"][0]


def test_small_schedules_keep_the_full_records(client):
    body = client.get("/api/pipeline?schedule=1f1b&stages=4&microbatches=8").json()
    assert body["actions_form"] == "full"
    assert set(body["ranks"][0]["actions"][0]) == {"action", "stage", "kind", "microbatch",
                                                    "start", "end"}
