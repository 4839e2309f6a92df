"""How a slider move reaches the stage (static/js/stage.js, controls.js): states already shown
come back from memory without a request, the next states of a drag are fetched ahead (with the
dependent sliders moved as the form moves them), the states one change away are fetched while the
page rests (a jump along the track or a chip is then answered from memory, a rejected one
included), panels out of sight wait until the slider rests, and the address bar and the back
button keep working throughout. The `page` fixture fails
any test that logs a console error or requests another origin."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.browser.helpers import drag, position, press

pytestmark = pytest.mark.browser

WORLD = 'input[name="world"]'


def stage_requests(page) -> list[tuple[str, str]]:
    """(resource type, URL) of every request for a /collective or /tensor-parallel state."""
    seen: list[tuple[str, str]] = []
    page.on("request", lambda r: seen.append((r.resource_type, r.url))
            if re.search(r"/(collective|tensor-parallel)\?", r.url) else None)
    return seen


def without_fetching_at_rest(page) -> None:
    """Only a drag's own guesses are fetched ahead: stage.js's queue of the states one change
    away is replaced by a no-op before the page's scripts run."""
    page.add_init_script("""Object.defineProperty(window, "ShardscopeStage", {configurable: true,
        set(stage) { stage.fetchAtRest = () => {}; this.__stage = stage; },
        get() { return this.__stage; }});""")


def settle(page) -> None:
    """Wait until the page has fetched every state it asks for at rest."""
    for _ in range(600):
        if page.evaluate("() => !!(window.ShardscopeStage && ShardscopeStage.settled() && "
                         "ShardscopeStage.keptCount() > 0)"):
            return
        page.wait_for_timeout(100)
    raise AssertionError("the states one change away were not fetched within 60 s")


def wait_until_kept(page, pattern: str) -> None:
    """Wait until the page holds a state whose URL matches ``pattern``."""
    for _ in range(600):
        if any(re.search(pattern, url) for url in page.evaluate(
                "() => window.ShardscopeStage ? ShardscopeStage.keptUrls() : []")):
            return
        page.wait_for_timeout(100)
    raise AssertionError(f"no state matching {pattern} was fetched within 60 s")


def move(page, selector: str, value: int, label: str) -> None:
    drag(page, selector, str(value))
    expect(page.locator("svg.deck")).to_have_attribute("aria-label", re.compile(label))


def test_a_state_shown_before_comes_back_without_a_request(page):
    page.goto(page.base + "/collective?world=4")
    move(page, WORLD, 5, "5 ranks")
    move(page, WORLD, 8, "8 ranks")  # a jump: nothing fetched ahead for it
    seen = stage_requests(page)
    move(page, WORLD, 5, "5 ranks")
    expect(page).to_have_url(re.compile(r"world=5"))
    assert not [url for kind, url in seen if kind == "xhr"], seen
    # the swapped-in stage is a live one: the player steps it
    press(page, "ArrowRight")
    assert position(page) == "step 2 of 9 · reduce-scatter, round 1 of 4"


def test_the_next_states_of_a_drag_are_fetched_ahead(page):
    without_fetching_at_rest(page)
    page.goto(page.base + "/collective?world=4")
    seen = stage_requests(page)
    with page.expect_request(lambda r: r.resource_type == "fetch" and "world=7" in r.url):
        move(page, WORLD, 5, "5 ranks")  # one step up: 6 and 7 come next
    assert any(kind == "fetch" and "world=6&" in url for kind, url in seen), seen
    page.wait_for_load_state("networkidle")
    seen.clear()
    move(page, WORLD, 6, "6 ranks")
    move(page, WORLD, 7, "7 ranks")
    assert not [url for kind, url in seen if kind == "xhr"], seen
    expect(page).to_have_url(re.compile(r"world=7"))
    assert page.locator("[data-position]").inner_text() == "step 1 of 13 · before the collective"


def test_a_guess_moves_the_dependent_sliders_as_the_form_does(page):
    # ffn must stay a multiple of tp, so each step of tp moves ffn too: the state fetched ahead
    # for tp 4 is the one the form then asks for, ffn included
    without_fetching_at_rest(page)
    page.goto(page.base + "/tensor-parallel?block=column&tp=2&ffn=16")
    with page.expect_request(lambda r: r.resource_type == "fetch" and "tp=4&" in r.url) as ahead:
        move(page, 'input[name="tp"]', 3, "tp 3|3 ranks")
    guessed_ffn = re.search(r"ffn=(\d+)", ahead.value.url).group(1)
    page.wait_for_load_state("networkidle")
    seen = stage_requests(page)
    move(page, 'input[name="tp"]', 4, "tp 4|4 ranks")
    assert not [url for kind, url in seen if kind == "xhr"], seen
    assert page.locator("#f-ffn").input_value() == guessed_ffn
    assert int(guessed_ffn) % 4 == 0
    expect(page).to_have_url(re.compile(rf"tp=4&.*ffn={guessed_ffn}&"))


def test_the_way_back_is_fetched_where_the_dependent_sliders_moved(page):
    # ffn stays a multiple of tp: tp 5 → 6 re-steps ffn 25 to 24, and the way back re-steps
    # 24 to 25, a state the page has not shown (it opened at it): fetched before the move
    without_fetching_at_rest(page)
    page.goto(page.base + "/tensor-parallel?block=column&tp=5&ffn=25")
    move(page, 'input[name="tp"]', 6, "tp 6|6 ranks")   # ffn 25 → 24
    page.wait_for_load_state("networkidle")
    back = page.evaluate("""() => { const f = document.querySelector('#f-ffn');
        return Math.round(parseInt(f.value, 10) / 5) * 5; }""")
    assert back == 25  # the form would ask for tp 5 ffn 25 … not the 24 the state now holds
    kept = page.evaluate("() => ShardscopeStage.keptUrls()")
    assert any("tp=5&" in url and "ffn=25&" in url for url in kept), kept
    seen = stage_requests(page)
    move(page, 'input[name="tp"]', 5, "tp 5|5 ranks")
    assert not [url for kind, url in seen if kind == "xhr"], seen


def test_states_one_change_away_are_fetched_while_the_page_rests(page):
    ahead: list[tuple[str, str]] = []
    page.on("request", lambda r: ahead.append((r.headers.get("x-fetch-ahead"), r.url))
            if r.headers.get("x-fetch-ahead") else None)
    page.goto(page.base + "/collective?world=4")
    settle(page)
    # the key slider's track, nearest first, every chip, one step of every other slider — as
    # many as the allowance at rest lets (at most 30 states: tests/browser/test_fetch_budget.py)
    rest = [url for kind, url in ahead if kind == "rest"]
    worlds = [int(re.search(r"world=(\d+)", url).group(1)) for url in rest
              if "op=all_reduce&" in url and "count=8&" in url and "alpha_us=5&" in url]
    assert worlds[:4] == [5, 3, 6, 2], worlds
    assert len(rest) <= 30
    assert any("op=all_gather&" in url for url in rest)            # a chip
    assert any("count=9&" in url or "count=7&" in url for url in rest)  # another slider's step
    seen = stage_requests(page)
    x, y = page.evaluate("""(s) => { const el = document.querySelector(s), b = el.getBoundingClientRect();
      return [b.left + 8 + (40 - el.min) / (el.max - el.min) * (b.width - 16), b.top + b.height / 2]; }""",
                         WORLD)
    page.mouse.move(x, y, steps=3)                                  # a look at 40 on the track …
    wait_until_kept(page, r"op=all_reduce&.*[?&]world=40&")
    move(page, WORLD, 40, "40 ranks")                               # … then the click
    assert not [url for kind, url in seen if kind == "xhr"], seen
    wait_until_kept(page, r"op=broadcast&.*world=40&")              # a look at 40 ranks …
    page.get_by_text("Broadcast", exact=True).first.click()         # … then a chip
    expect(page.locator("svg.deck")).to_have_attribute("aria-label",
                                                       re.compile("broadcast · ring · 40 ranks"))
    expect(page).to_have_url(re.compile(r"op=broadcast&.*world=40"))
    assert not [url for kind, url in seen if kind == "xhr"], seen


def test_a_rejected_state_fetched_at_rest_is_shown_without_a_failed_load(page):
    # 16 tokens do not split over cp = 3 ranks. The page fetched that state at rest (a 200 that
    # says 422), so the move shows its problem from memory, and the browser logs no failed load
    # (the page fixture fails on any console error).
    seen: list[str] = []
    page.on("request", lambda r: seen.append(r.url) if r.resource_type == "xhr" else None)
    page.goto(page.base + "/context-parallel")
    wait_until_kept(page, r"[?&]cp=3&")
    drag(page, 'input[data-target="cp"]', "1")                      # the stops 2, 3, 4 …: cp 3
    expect(page.locator(".problems")).to_contain_text("seq (16) must be divisible by cp (3)")
    drag(page, 'input[data-target="cp"]', "0")                      # and back: cp 2
    expect(page.locator(".problems")).to_have_count(0)
    assert not seen, seen


# One move, and what the panels' style was when htmx settled it (before the frame is painted).
MOVE_AND_READ_PANELS = """([selector, value]) => new Promise(done => {
  document.body.addEventListener("htmx:afterSettle", () =>
    done(document.querySelector("#stage .panels").style.contentVisibility), {once: true});
  const slider = document.querySelector(selector);
  slider.value = value;
  slider.dispatchEvent(new Event("input", {bubbles: true}));
})"""


def test_panels_out_of_sight_wait_until_the_slider_rests(page):
    page.goto(page.base + "/collective?world=4")
    page.wait_for_timeout(500)  # the observers have reported where the panels are
    panels = page.locator("#stage .panels")
    # dragged: the panels below the window are not rendered while the slider moves …
    assert page.evaluate(MOVE_AND_READ_PANELS, [WORLD, "5"]) == "hidden"
    assert page.evaluate(MOVE_AND_READ_PANELS, [WORLD, "6"]) == "hidden"
    # … and are once it rests a moment
    expect(panels).not_to_have_attribute("style", re.compile("hidden"))
    # let go: at once
    assert page.evaluate(MOVE_AND_READ_PANELS, [WORLD, "7"]) == "hidden"
    assert page.evaluate("""(sel) => { document.querySelector(sel).dispatchEvent(
        new Event("change", {bubbles: true}));
        return document.querySelector("#stage .panels").style.contentVisibility; }""",
                         WORLD) == ""
    # the panels hold the new state's numbers, as a page opened at that state does
    fresh = page.context.new_page()
    fresh.goto(page.base + "/collective?world=7")
    assert (page.locator("#stage .panel.cost").inner_text()
            == fresh.locator("#stage .panel.cost").inner_text())
    fresh.close()
    # scrolled: at once
    assert page.evaluate(MOVE_AND_READ_PANELS, [WORLD, "6"]) == "hidden"
    assert page.evaluate("""() => new Promise(done => {
        addEventListener("scroll", () => done(
            document.querySelector("#stage .panels").style.contentVisibility), {once: true});
        scrollBy(0, 40); })""") == ""
    # in sight, they are rendered with every move, as the deck is
    panels.scroll_into_view_if_needed()
    page.wait_for_timeout(500)
    assert page.evaluate(MOVE_AND_READ_PANELS, [WORLD, "8"]) == ""


def test_back_and_forward_after_moves_from_memory(page):
    page.goto(page.base + "/collective?world=4")
    move(page, WORLD, 5, "5 ranks")
    move(page, WORLD, 6, "6 ranks")
    move(page, WORLD, 5, "5 ranks")  # from memory
    # the address follows once the new stage is painted (stage.js writes it after the frame)
    expect(page).to_have_url(re.compile(r"world=5"))
    page.go_back()
    expect(page).to_have_url(re.compile(r"world=6"))
    expect(page.locator("svg.deck")).to_have_attribute("aria-label", re.compile("6 ranks"))
    page.go_forward()
    expect(page).to_have_url(re.compile(r"world=5"))
    expect(page.locator("svg.deck")).to_have_attribute("aria-label", re.compile("5 ranks"))


def test_the_nearest_states_are_parsed_ahead_and_swapped_in_live(page):
    # at rest the page parses the key slider's nearest states ahead (stage.js `trees`); a move
    # onto one is swapped in by stage.js itself: the player steps it, its verify form is live
    # for htmx, and its panels hold the state's numbers once shown
    page.goto(page.base + "/collective?world=4")
    settle(page)
    for _ in range(100):
        ready = page.evaluate("() => ShardscopeStage.readyUrls()")
        if any("world=5&" in url for url in ready):
            break
        page.wait_for_timeout(100)
    assert any("world=5&" in url for url in ready), ready
    seen = stage_requests(page)
    move(page, WORLD, 5, "5 ranks")
    assert not [url for kind, url in seen if kind == "xhr"], seen
    assert not any("world=5&" in url for url in page.evaluate("() => ShardscopeStage.readyUrls()"))
    expect(page).to_have_url(re.compile(r"world=5"))
    page.locator("body").click(position={"x": 5, "y": 5})
    page.keyboard.press("ArrowRight")
    assert page.locator("[data-position]").inner_text().startswith("step 2 of ")
    page.locator("#stage .panels").scroll_into_view_if_needed()
    verify = page.locator("#stage .panel.verify [hx-post]").first
    expect(verify).to_be_attached()
    assert page.evaluate("(el) => !!el['htmx-internal-data']", verify.element_handle())
    fresh = page.context.new_page()
    fresh.goto(page.base + "/collective?world=5")
    assert (page.locator("#stage .panel.cost").inner_text()
            == fresh.locator("#stage .panel.cost").inner_text())
    fresh.close()


def test_panels_out_of_sight_come_in_empty_and_are_filled_at_rest(page):
    page.goto(page.base + "/collective?world=4")
    settle(page)
    page.wait_for_timeout(500)  # the observers have reported where the panels are
    count = """() => document.querySelectorAll("#stage .panels *").length"""
    assert page.evaluate(count) > 20
    assert page.evaluate(MOVE_AND_READ_PANELS, [WORLD, "5"]) == "hidden"   # from memory
    assert page.evaluate(count) == 0
    page.evaluate("""(sel) => document.querySelector(sel).dispatchEvent(
        new Event("change", {bubbles: true}))""", WORLD)
    assert page.evaluate(count) > 20
    expect(page.locator("#stage .panel.cost")).to_contain_text("5")


# requestIdleCallback held in a queue that the test runs when it chooses (each callback as an
# idle period with room to spare)
HELD_IDLE = """window.__idle = [];
window.requestIdleCallback = f => window.__idle.push(f);
window.cancelIdleCallback = () => {};
window.__runIdle = () => { const q = window.__idle.splice(0);
  q.forEach(f => f({didTimeout: false, timeRemaining: () => 50})); return q.length; };"""

# A move onto a state parsed ahead, the idle callbacks run between its swap and its paint, then
# again once it is painted.
MOVE_AND_RUN_IDLE = """([selector, value]) => {
  const before = ShardscopeStage.readyUrls();
  const slider = document.querySelector(selector);
  slider.value = value;
  slider.dispatchEvent(new Event("input", {bubbles: true}));
  const label = document.querySelector("svg.deck").getAttribute("aria-label");
  const ran = window.__runIdle();
  const whilePainting = ShardscopeStage.readyUrls();
  return new Promise(done => requestAnimationFrame(() => setTimeout(() => setTimeout(() => {
    for (let i = 0; i < 8; i++) window.__runIdle();
    done({before, label, ran, whilePainting, painted: ShardscopeStage.readyUrls()});
  }, 0), 0)));
}"""


def test_no_tree_is_parsed_between_a_swap_and_its_paint(page):
    # Chrome runs an idle callback even when an input has just asked for a frame; a stage parsed
    # then (4–12 ms) would hold that move's frame back. stage.js defers it until the paint.
    page.add_init_script(HELD_IDLE)
    page.goto(page.base + "/collective?world=4")
    settle(page)
    for _ in range(100):
        page.evaluate("() => { for (let i = 0; i < 8; i++) window.__runIdle(); }")
        if any("world=6&" in url for url in page.evaluate("() => ShardscopeStage.readyUrls()")):
            break
        page.wait_for_timeout(100)
    # world 10, a guess of the move to 6 (two positions a move: 8, then 10), fetched at rest
    # (the key slider's nearest positions) but not parsed (only the first few states at rest
    # are), so that a tree is wanted once the move is painted
    wait_until_kept(page, r"[?&]world=10&")
    ready = page.evaluate("() => ShardscopeStage.readyUrls()")
    assert not any("world=10&" in url for url in ready)
    out = page.evaluate(MOVE_AND_RUN_IDLE, [WORLD, "6"])
    assert "6 ranks" in out["label"]                      # swapped from its tree, at once
    assert any("world=6&" in url for url in out["before"])
    assert out["ran"] >= 1                                # an idle callback came meanwhile …
    assert set(out["whilePainting"]) <= set(out["before"])  # … and parsed nothing
    assert not any("world=6&" in url for url in out["whilePainting"])
    assert any("world=10&" in url for url in
               set(out["painted"]) - set(out["whilePainting"]))  # once painted, trees are made


def test_the_toolbar_and_player_bar_stay_on_screen_brought_up_to_the_new_state(page):
    # stage.js keeps the two parts that barely change from one state to the next (their links
    # and numbers brought up to date) instead of styling and laying them out anew each move
    page.goto(page.base + "/collective?world=4")
    settle(page)
    page.evaluate("""() => { window.__bar = document.querySelector('#stage .player-bar');
                             window.__tools = document.querySelector('#stage .toolbar'); }""")
    page.locator("[data-speed]").select_option("2")
    move(page, WORLD, 5, "5 ranks")
    assert page.evaluate("""() => document.querySelector('#stage .player-bar') === window.__bar
                              && document.querySelector('#stage .toolbar') === window.__tools""")
    # the kept parts say what the new state says
    fresh = page.context.new_page()
    fresh.goto(page.base + "/collective?world=5")
    for selector in ("#stage .toolbar", "#stage .player-bar"):
        assert page.locator(selector).inner_text() == fresh.locator(selector).inner_text()
    links = "els => els.map(a => a.getAttribute('href'))"
    assert (page.locator("#stage .toolbar a[href]").evaluate_all(links)
            == fresh.locator("#stage .toolbar a[href]").evaluate_all(links))
    assert "world=5&" in page.locator("#stage .export-menu a").first.get_attribute("href")
    fresh.close()
    assert page.locator("[data-speed]").input_value() == "2"   # the chosen speed stays
    # the player drives the new deck through the kept bar: 5 ranks, a ring all-reduce of 8 steps
    assert page.locator("[data-scrub]").get_attribute("max") == "8"
    page.locator('[data-act="last"]').click()
    expect(page.locator("[data-position]")).to_contain_text("step 9 of 9")
    page.locator('[data-act="prev"]').click()
    expect(page.locator("[data-position]")).to_contain_text("step 8 of 9")
    assert page.locator("svg.deck g.frame.current").get_attribute("data-frame") == "7"
    page.locator("[data-scrub]").fill("2")
    expect(page.locator("[data-position]")).to_contain_text("step 3 of 9")
    # the embed dialog, kept with the toolbar, writes the new state's snippet
    page.locator("[data-embed-open]").click()
    expect(page.locator("[data-embed-code]")).to_have_value(re.compile(r"world=5&"))
