"""/zero over HTTP: the JSON contract, the page and its fragment, embed, SVG, and every kind of
bad input answered with a 422 that names the parameter."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest


def test_contract(client):
    r = client.get("/api/zero?stage=3&dp=4&steps=2&param_count=7500000000")
    assert r.status_code == 200
    d = r.json()
    assert isinstance(d["final_params"], list) and all(isinstance(x, float) for x in d["final_params"])
    assert len(d["per_rank_bytes"]) == 4
    assert d["per_rank_bytes"][0] == {"params": 3.75e9, "grads": 3.75e9, "optimizer": 22.5e9}
    assert d["comm_elements_per_step"] == 3 * 3 * 1_875_000_000
    assert {"step_time", "memory_over_step", "tiny", "frames"} <= set(d)
    assert d["step_time"]["bound"] in ("GPU compute", "network", "PCIe", "NVMe", "CPU")


def test_final_params_identical_for_every_stage(client):
    runs = [client.get(f"/api/zero?stage={s}&dp=5&mlp_width=3").json()["final_params"]
            for s in range(4)]
    assert runs[0] == runs[1] == runs[2] == runs[3]


def test_default_reproduces_table1(client):
    totals = {s: sum(client.get(f"/api/zero?stage={s}").json()["per_rank_bytes"][0].values())
              for s in range(4)}
    assert totals == {0: 120e9, 1: 52.5e9, 2: 41.25e9, 3: 30e9}


@pytest.mark.parametrize("hx", [False, True])
def test_page_and_fragment(client, hx):
    r = client.get("/zero?stage=1&dp=3", headers={"HX-Request": "true"} if hx else {})
    assert r.status_code == 200
    assert 'id="stage"' in r.text and 'data-player' in r.text
    assert ("<html" in r.text) is not hx
    assert "ZeRO Table 1" in r.text and "same bits" in r.text


def test_embed_and_svg(client):
    r = client.get("/embed/zero?stage=3")
    assert r.status_code == 200 and "site-header" not in r.text and "svg" in r.text
    r = client.get("/svg/zero?stage=3&frame=4")
    assert r.status_code == 200 and r.headers["content-type"].startswith("image/svg+xml")
    root = ET.fromstring(r.content)
    assert root.tag.endswith("svg") and root.get("width") == "1280"
    assert client.get("/svg/zero?frame=99").json()["detail"][0]["param"] == "frame"


BAD = [
    ("dp=0", "dp"), ("dp=abc", "dp"), ("dp=2000", "dp"), ("stage=4", "stage"),
    ("steps=0", "steps"), ("intra_node_gbs=0", "intra_node_gbs"),
    ("inter_node_gbs=-1", "inter_node_gbs"), ("pcie_gbs=0", "pcie_gbs"), ("nvme_gbs=0", "nvme_gbs"),
    ("cpu_mem_gbs=0", "cpu_mem_gbs"), ("gpu_tflops=0", "gpu_tflops"), ("offload=tape", "offload"),
    ("offload=cpu&stage=0", "offload"), ("offload=nvme&stage=2", "offload"),
    ("dp=1024&micro_batch=8", "micro_batch"), ("dp=1024&mlp_layers=6&mlp_width=8&steps=10", "dp"),
    ("param_count=0", "param_count"), ("alpha_us=nan", "alpha_us"), ("mlp_width=9", "mlp_width"),
]


@pytest.mark.parametrize("query,param", BAD)
def test_bad_input_is_a_422_naming_the_parameter(client, query, param):
    r = client.get(f"/api/zero?{query}")
    assert r.status_code == 422
    detail = r.json()["detail"]
    assert detail[0]["param"] == param and param in detail[0]["message"]
    page = client.get(f"/zero?{query}", headers={"HX-Request": "true"})
    assert page.status_code == 422 and f'data-problem-param="{param}"' in page.text


def test_bandwidth_message_gives_the_range(client):
    message = client.get("/api/zero?pcie_gbs=0").json()["detail"][0]["message"]
    assert "0.1" in message and "1000" in message


def test_verify_refuses_too_many_ranks(client):
    r = client.post("/api/verify/zero?dp=16")
    assert r.status_code == 422 and r.json()["detail"][0]["param"] == "world"
    assert client.post("/api/verify/zero?dp=0").status_code == 422


def test_any_accepted_extreme_is_answered(client):
    for query in ("dp=1024&stage=3", "dp=1&stage=0", "mlp_layers=6&mlp_width=8&dp=16&stage=3&steps=10",
                  "param_count=10000000000000&offload=nvme&stage=3&nvme_gbs=0.1"):
        assert client.get(f"/api/zero?{query}").status_code == 200
        assert client.get(f"/zero?{query}").status_code == 200


def test_memory_panels_say_gb_for_decimal_gigabytes(client):
    """Every "GB" the /zero page writes is 10⁹ bytes, as ZeRO's Table 1 prints them
    (Rajbhandari et al. 2019, Ψ = 7.5 B: N_d = 4 → 52.5 / 41.3 / 30 GB, N_d = 16 → 35.6 /
    21.6 / 7.5, N_d = 1 → 120), in the table, the deck and the memory-over-the-step chart
    (whose axis is bytes / 10⁹) — never a GiB value under a GB label."""
    import re
    text = client.get("/zero?param_count=7500000000&dp=4&stage=3").text
    table = text[text.index('id="table-title"'):text.index('id="mem-title"')]
    cells = re.findall(r"<td>([\d.]+) GB</td>", table)
    for want in ("120", "52.5", "30", "35.6", "21.6", "7.5"):
        assert want in cells, (want, cells)
    assert "GiB" not in table
    chart = text[text.index('id="mem-title"'):text.index('id="time-title"')]
    assert "GB on one GPU" in chart and "GiB" not in chart
    # the deck's bars: stage 3 on 4 ranks keeps 2Ψ/4 = 3.75 GB of parameters
    assert "params 3.75 GB" in text
