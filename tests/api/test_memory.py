"""/memory, /embed/memory, /api/memory and /svg/memory: DESIGN.md's contract, pages and
fragments, and every kind of bad input (422 naming the parameter, never a 500)."""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from html import unescape

import pytest

from app.sim.memory.params import MemoryParams
from app.sim.memory.simulate import simulate
from app.catalog.models import PRESETS, resolve

QUERIES = [
    "",
    "preset=gpt3-175b&dp=64&tp=8&pp=8&zero=1&sequence_parallel=true&recompute=selective",
    "preset=gpt2&dp=1&zero=0&recompute=none&optimizer=sgd&precision=fp32",
    "preset=llama3-405b&micro_batch=64&dp=1&zero=0&recompute=none&gpu=a100-40",
    "preset=llama3-70b&dp=128&tp=8&pp=4&zero=3&optimizer=adafactor&gpu=mi300x-192",
    "preset=gpt2&layers=24&hidden=1024&heads=16&seq=2048&param_count=350000000",
]

BAD = [
    ("tp=3", "tp", "must divide heads (32)"),
    ("tp=16", "tp", "must divide kv_heads (8)"),
    ("pp=5", "pp", "must divide layers (32)"),
    ("zero=4", "zero", "from 0 to 3"),
    ("kv_heads=64", "kv_heads", "must not exceed heads (32)"),
    ("kv_heads=5", "kv_heads", "must divide heads (32)"),
    ("heads=7", "heads", "must divide hidden (4096)"),
    ("layers=abc", "layers", "from 1 to 512"),
    ("layers=0", "layers", "from 1 to 512"),
    ("preset=gpt5", "preset", "one of gpt2"),
    ("micro_batch=0", "micro_batch", "from 1 to 4096"),
    ("param_count=10000000000000000", "param_count", "from 1 to"),
    ("precision=fp16", "precision", "one of fp32, mixed"),
    ("recompute=some", "recompute", "one of none, selective, full"),
    ("optimizer=lion", "optimizer", "adafactor"),
    ("gpu=b200", "gpu", "h100-80"),
    ("sequence_parallel=maybe", "sequence_parallel", "true or false"),
    ("tp=2&sequence_parallel=true&seq=1001", "seq", "divisible by tp (2)"),
    ("dp=0", "dp", "from 1 to 1024"),
    ("dp=2048", "dp", "from 1 to 1024"),
    ("hidden=nan", "hidden", "an integer"),
]


def finite_numbers(value):
    if isinstance(value, dict):
        for v in value.values():
            yield from finite_numbers(v)
    elif isinstance(value, list):
        for v in value:
            yield from finite_numbers(v)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        yield value


@pytest.mark.parametrize("query", QUERIES)
def test_contract(client, query):
    r = client.get(f"/api/memory?{query}")
    assert r.status_code == 200
    d = r.json()
    assert isinstance(d["param_count"], int)
    per = d["per_gpu_bytes"]
    assert set(per) >= {"params", "grads", "optimizer", "activations", "total"}
    assert per["total"] == pytest.approx(sum(per[k] for k in ("params", "grads", "optimizer",
                                                               "activations")), rel=1e-12)
    assert isinstance(d["activations_per_layer_bytes"], int)
    params = MemoryParams.model_validate(dict(p.split("=") for p in query.split("&") if p))
    assert d["per_gpu_bytes"] == simulate(params).to_dict()["per_gpu_bytes"]
    assert all(math.isfinite(x) for x in finite_numbers(d))


def test_zero_table_1_over_http(client):
    d = client.get("/api/memory?param_count=7500000000&dp=64&zero=3&optimizer=adam"
                   "&precision=mixed").json()
    states = sum(d["per_gpu_bytes"][k] for k in ("params", "grads", "optimizer"))
    assert states / 1e9 == pytest.approx(1.875)


def test_gpt3_table_2_over_http(client):
    d = client.get("/api/memory?preset=gpt3-175b&tp=8&sequence_parallel=true"
                   "&recompute=selective").json()
    assert d["activations_per_layer_bytes"] == 102 * 2**20


@pytest.mark.parametrize("query", QUERIES[:3])
def test_page_fragment_embed_svg(client, query):
    page = client.get(f"/memory?{query}")
    assert page.status_code == 200 and "<html" in page.text
    assert 'class="deck memory-deck"' in page.text and 'id="controls"' in page.text
    assert len(re.findall(r'<g class="frame[^s"]*" data-frame', page.text)) == 5
    fragment = client.get(f"/memory?{query}", headers={"HX-Request": "true"})
    assert fragment.status_code == 200 and "<html" not in fragment.text
    assert fragment.text.lstrip().startswith('<section id="stage"')
    assert 'id="controls"' not in fragment.text
    embed = client.get(f"/embed/memory?{query}")
    assert embed.status_code == 200 and "site-header" not in embed.text
    assert "memory-deck" in embed.text
    for frame in range(5):
        svg = client.get(f"/svg/memory?{query}&frame={frame}")
        assert svg.status_code == 200 and svg.headers["content-type"].startswith("image/svg")
        root = ET.fromstring(svg.content)
        assert root.tag.endswith("svg")
        assert len(root.findall(".//{http://www.w3.org/2000/svg}g[@data-frame]")) == 5


def test_every_number_has_a_formula_and_a_tag(client):
    page = client.get("/memory?frame=4").text
    titles = [unescape(t) for t in re.findall(r'data-tip="(.*?)"', page)]
    boxes = [t for t in titles if " = " in t and " · " in t]
    d = client.get("/api/memory").json()
    assert len(boxes) == sum(1 for i in d["items"] if i["bytes"] > 0)
    assert all(any(tag in t for tag in ("· formula", "· assumption")) for t in boxes)
    assert 'class="tag tag-assumption"' in page and 'class="tag tag-formula"' in page


@pytest.mark.parametrize("query, param, words", BAD)
def test_bad_input_is_422_naming_the_parameter(client, query, param, words):
    r = client.get(f"/api/memory?{query}")
    assert r.status_code == 422, r.text
    problem = r.json()["detail"][0]
    assert problem["param"] == param and words in problem["message"], problem
    page = client.get(f"/memory?{query}")
    assert page.status_code == 422 and f'data-problem-param="{param}"' in page.text
    assert 'id="controls"' in page.text
    fragment = client.get(f"/memory?{query}", headers={"HX-Request": "true"})
    assert fragment.status_code == 422 and "cannot be simulated" in fragment.text
    assert client.get(f"/svg/memory?{query}").status_code == 422
    assert client.get(f"/embed/memory?{query}").status_code == 422


def test_bad_frame(client):
    r = client.get("/svg/memory?frame=5")
    assert r.status_code == 422 and r.json()["detail"][0]["param"] == "frame"


@pytest.mark.parametrize("query", [
    "seq=1048576&micro_batch=4096&heads=512&hidden=131072&layers=512&vocab=1048576&dp=1024"
    "&recompute=none&zero=0",
    "param_count=1000000000000000&dp=1&zero=0",
    "preset=gpt2&layers=1&hidden=1&heads=1&kv_heads=1&ffn=1&vocab=1&seq=1&dp=1024&zero=3",
])
def test_huge_and_tiny_inputs_never_500(client, query):
    r = client.get(f"/api/memory?{query}")
    assert r.status_code == 200
    assert all(math.isfinite(x) for x in finite_numbers(r.json()))
    for path in ("/memory", "/svg/memory?frame=4&", "/embed/memory"):
        sep = "" if path.endswith("&") else "?"
        page = client.get(f"{path}{sep}{query}")
        assert page.status_code == 200
        assert not re.search(r"\bnan\b|\binf\b", page.text, re.IGNORECASE)


def test_blank_shape_fields_take_the_preset(client):
    blank = client.get("/api/memory?layers=&hidden=&heads=&kv_heads=&ffn=&vocab=&seq="
                       "&param_count=").json()
    assert blank == client.get("/api/memory").json()
    assert "layers" not in MemoryParams().query()


@pytest.mark.parametrize("preset, hidden, ffn, kv", [
    ("gpt2", 1024, 4096, 16), ("llama3-8b", 2048, 7168, 8), ("llama3-70b", 4096, 14336, 8)])
def test_overrides_follow_the_preset(preset, hidden, ffn, kv):
    heads = 16 if preset == "gpt2" else 32
    m = resolve(preset, hidden=hidden, heads=heads)
    assert (m.hidden, m.ffn, m.kv_heads, m.family) == (hidden, ffn, kv, PRESETS[preset].family)


def test_suggestion_links_apply_and_fit(client):
    page = client.get("/memory?preset=llama3-70b&dp=8&zero=0&recompute=none").text
    assert "✗ No" in page
    links = re.findall(r'<li><a href="(/memory\?[^"]+)">', page)
    assert links
    for href in links[:4]:
        assert client.get(unescape(href)).status_code == 200


def test_course_index_links_the_scene(client):
    home = client.get("/").text
    assert 'href="/memory"' in home
    assert home.index('href="/memory"') < home.index('href="/collective"')


def test_real_run_button_and_bad_query(client):
    page = client.get("/memory").text
    assert 'hx-post="/verify/memory?' in page and "saved_tensors_hooks" in page
    assert "workers/memory.py --family llama --layers 2 --hidden 128" in page
    r = client.post("/api/verify/memory?tp=3")
    assert r.status_code == 422 and r.json()["detail"][0]["param"] == "tp"
