"""workers/optimizer.py on real gloo ranks: torch.optim, its state sharded as ZeRO-1 does,
reaches the simulation's parameters and states (1e-6 relative), through the job runner and the
page's button."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
pytestmark = pytest.mark.workers

from tests.workers.launch import job_over_http  # noqa: E402


@pytest.mark.parametrize("query,world", [
    # 7 parameters over 4 ranks: slices of 2, 2, 2, 1
    ("optimizer=adamw&precision=mixed&size=7&steps=4&weight_decay=0.05", 4),
    ("optimizer=momentum&precision=fp32&size=3&steps=6&weight_decay=0.01", 3),
    ("optimizer=sgd&precision=mixed&size=2&steps=3", 2),
])
def test_torch_optim_matches_the_simulation(client, runner, query, world):
    response = client.post(f"/api/verify/optimizer?{query}")
    assert response.status_code == 202
    job = job_over_http(client, response.json()["job"], 80)
    assert job["status"] == "passed", job["detail"]
    assert job["world"] == world and job["backend"] == "gloo"
    assert job["max_abs_diff"] < 1e-5
    table = job["report"]["diff_table"]
    assert len(table) == int(query.split("steps=")[1].split("&")[0])
    assert all(len(row) == world and max(row) <= 1e-6 for row in table)
    api = client.get(f"/api/optimizer?{query}").json()
    k = api["bytes_per_param"]["optimizer"]
    sizes = [len(s) for s in __import__("numpy").array_split(range(api["size"]), world)]
    assert job["report"]["state_bytes"] == [int(k * n) for n in sizes]
    assert not runner.live_pids()


def test_the_button_runs_it(client):
    """The page's "Run on real gloo" posts to /verify/optimizer and polls the fragment."""
    html = client.post("/verify/optimizer?optimizer=adam&size=4&steps=2").text
    assert "hx-get=\"/verify/jobs/" in html
    job_id = html.split('hx-get="/verify/jobs/')[1].split('"')[0]
    job_over_http(client, job_id, 80)
    done = client.get(f"/verify/jobs/{job_id}").text
    assert "Passed" in done and "Largest difference per rank and step" in done
    assert "passes up to 1e-06" in done
