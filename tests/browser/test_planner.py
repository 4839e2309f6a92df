"""/planner in Chromium: the page loads with its deck; another model or cluster moves the best
mix and the Pareto front; a point's hover shows its breakdown; a hand-off link opens another
scene with the candidate's numbers in its query; the launch tabs show each tool's text; the
accuracy ledger's summary links its page; a pasted config.json fills the model fields."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlparse

import pytest

from tests.browser.helpers import press

pytestmark = pytest.mark.browser

MESSAGE = "#stage .panel p"       # "… mixes fit; the best runs tp 8 pp 1 dp 64 cp 1"


def front(page) -> str:
    """Step the deck to its Pareto front (frame 1) and read the front's path."""
    press(page, "Home", "ArrowRight", focus="svg.deck")
    path = page.locator("svg.deck g.frame[data-frame='1'] path")
    path.wait_for()
    return path.get_attribute("d")


def new_best(page, before: str) -> None:
    """Wait for the message to name another best mix. A panel below the fold may come in empty
    while a move is in flight (static/js/stage.js holds its contents until the page rests), so
    wait for a message that names a mix, not merely for another text."""
    page.wait_for_function(
        """b => { const p = document.querySelector('#stage .panel p');
                  return p !== null && p.innerText !== b
                         && /the best runs .*dp \\d+/.test(p.innerText); }""",
        arg=before)


def test_model_and_cluster_move_the_best_mix(page):
    page.goto(page.base + "/planner")
    page.wait_for_selector("svg.deck")
    assert page.locator("svg.deck circle[data-tip]").count() > 100
    best0, front0 = page.locator(MESSAGE).first.inner_text(), front(page)
    assert "the best runs tp " in best0

    page.locator("#f-preset").select_option("llama3-8b")
    page.wait_for_url(re.compile(r"preset=llama3-8b"))
    new_best(page, best0)
    best1, front1 = page.locator(MESSAGE).first.inner_text(), front(page)
    assert best1 != best0 and front1 != front0

    page.locator("#f-gpus").fill("64")
    page.wait_for_url(re.compile(r"gpus=64"))
    new_best(page, best1)
    best2, front2 = page.locator(MESSAGE).first.inner_text(), front(page)
    assert front2 != front1
    # 64 GPUs hold no dp in the hundreds: the best mix follows the cluster
    assert int(re.search(r"dp (\d+)", best2).group(1)) <= 64 and best2 != best1


def test_hover_shows_a_points_breakdown(page):
    page.goto(page.base + "/planner")
    points = page.locator("svg.deck circle[data-tip]")
    tips = set(points.evaluate_all("cs => cs.map(c => c.getAttribute('data-tip'))"))
    points.nth(10).hover(force=True)          # the topmost point there answers
    box = page.locator(".tooltip")
    box.wait_for(state="visible")
    text = box.inner_text()
    assert text in tips
    assert re.match(r"tp \d+ pp \d+ v \d+ dp \d+ cp \d+ ep \d+ ZeRO \d b \d+ \w+: [\d,]+ tokens/s",
                    text)
    assert "GiB" in text and "%" in text


def test_handoff_opens_the_memory_ledger_with_the_numbers(page):
    page.goto(page.base + "/planner?preset=llama3-70b&gpus=64&global_batch=128&seq=4096")
    row = page.locator(".panel table.stats tbody tr").first
    cells = [c.inner_text() for c in row.locator("td").all()]
    tp, pp = cells[0], cells[1]
    link = page.get_by_role("link", name="memory ledger")
    query = parse_qs(urlparse(link.get_attribute("href")).query)
    assert query["tp"] == [tp] and query["pp"] == [pp] and query["preset"] == ["llama3-70b"]
    link.click()
    page.wait_for_url(re.compile(r"/memory\?"))
    assert page.locator("#f-tp").input_value() == tp
    assert page.locator("#f-pp").input_value() == pp


def test_launch_tabs_and_published_rows(page):
    page.goto(page.base + "/planner")
    tabs = page.locator(".launch-tabs")
    tabs.scroll_into_view_if_needed()
    megatron, deepspeed, titan = (tabs.locator(f"pre.launch-{k}")
                                  for k in ("megatron", "deepspeed", "torchtitan"))
    assert megatron.is_visible() and not deepspeed.is_visible()
    assert "--tensor-model-parallel-size" in megatron.inner_text()
    tabs.locator("label", has_text="DeepSpeed").click()
    assert deepspeed.is_visible() and not megatron.is_visible()
    assert '"train_micro_batch_size_per_gpu"' in deepspeed.inner_text()
    tabs.locator("label", has_text="torchtitan").click()
    assert titan.is_visible() and "[parallelism]" in titan.inner_text()

    rows = page.locator("tr[data-published]")
    assert rows.count() == 5                       # one row a paper of the accuracy ledger
    names = [r.get_attribute("data-published") for r in rows.all()]
    assert any(n.startswith("Llama 3") for n in names)
    assert any(n.startswith("PTD-P") for n in names)
    link = page.locator('a[href="/planner/accuracy"]')
    link.scroll_into_view_if_needed()
    link.click()
    page.wait_for_url("**/planner/accuracy")
    assert page.locator("figure.ledger-figure svg").is_visible()
    assert page.locator("tr[data-row]").count() >= 25


def test_load_a_config_fills_the_shape(page):
    """A pasted Hugging Face config.json fills the model fields through /api/model-shape and
    the stage follows them (the query carries them); a bad one says why, as text."""
    page.goto(page.base + "/planner")
    loader = page.locator("details.model-config")
    loader.locator("summary").click()
    config = ('{"model_type": "mistral", "hidden_size": 4096, "intermediate_size": 14336, '
              '"num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, '
              '"vocab_size": 32000, "sliding_window": 4096}')
    loader.locator("[data-config-text]").fill(config)
    loader.locator("[data-config-load]").click()
    status = loader.locator("[data-config-status]")
    page.wait_for_function("() => document.querySelector('[data-config-status]')"
                           ".textContent.includes('Filled')")
    assert "read 7 keys, ignored 1" in status.inner_text()     # sliding_window: no shape
    page.wait_for_url(re.compile(r".*vocab=32000.*"))
    query = parse_qs(urlparse(page.url).query)
    assert query["layers"] == ["32"] and query["kv_heads"] == ["8"] and query["ffn"] == ["14336"]
    assert page.locator("#f-vocab").input_value() == "32000"
    page.expect_console_error("422")           # the bad upload answers 422 on purpose
    loader.locator("[data-config-text]").fill('{"model_type": "<b>t5</b>"}')
    loader.locator("[data-config-load]").click()
    page.wait_for_function("() => document.querySelector('[data-config-status]')"
                           ".textContent.includes('not one this reader knows')")
    assert status.locator("b").count() == 0        # written as text, never as markup
