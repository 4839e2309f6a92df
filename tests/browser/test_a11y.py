"""Accessible figures (issue 27), for every scene of ``app.main.SCENES``:

- axe-core (the npm package, pinned; copied to static/vendor for the tests only) reports no
  serious or critical violation on the page, in presentation mode and on the embed;
- the high-contrast theme (``?theme=contrast``) puts every text at WCAG AAA contrast, 7:1:
  the page's own text by axe's color-contrast-enhanced rule, the figures' text (which axe does
  not read) measured from computed colours against what is painted behind it — a rank's fill,
  a cell, the deck's ground (tests/browser/contrast.py); the same measure finds the light
  theme's white-on-blue rank numbers below 7:1, so it does read the fills;
- each step's figure has a text alternative that follows the player (its name says the step,
  its description holds the caption and the values drawn), and a step change is announced in
  a polite live region, once;
- the player's and the toolbar's controls are reached with Tab.
"""

from __future__ import annotations

import pytest

from app.main import SCENES
from tests.browser import helpers
from tests.browser.contrast import text_contrasts

SLUGS = [s.slug for s in SCENES]
AAA = 7.0

AXE = """async (exclude) => {
  const r = await axe.run({exclude: exclude}, {resultTypes: ['violations']});
  return r.violations.filter(v => v.impact === 'serious' || v.impact === 'critical')
    .map(v => v.id + ' (' + v.impact + '): ' + v.help + ' — ' +
         v.nodes.slice(0, 3).map(n => n.target.join(' ')).join(', '));
}"""


def axe(page, exclude=()):
    if not page.evaluate("typeof window.axe !== 'undefined'"):
        page.add_script_tag(url="/static/vendor/axe.min.js")
    return page.evaluate(AXE, [list(exclude)] if exclude else [])


def open_page(page, path, width=1280, height=720):
    helpers.open_page(page, path, width, height)


@pytest.mark.parametrize("slug", SLUGS)
def test_axe_finds_no_serious_violation(page, slug):
    open_page(page, f"/{slug}")
    assert axe(page) == [], f"/{slug}"
    page.evaluate("ShardscopeClassroom.present(true)")
    page.wait_for_function("document.documentElement.classList.contains('present')")
    assert axe(page) == [], f"/{slug} presenting"
    open_page(page, f"/embed/{slug}", 960, 540)
    assert axe(page) == [], f"/embed/{slug}"


@pytest.mark.parametrize("slug", SLUGS)
def test_high_contrast_theme_is_aaa(page, slug):
    open_page(page, f"/{slug}?theme=contrast")
    assert page.get_attribute("html", "data-theme") == "contrast"
    page.add_script_tag(url="/static/vendor/axe.min.js")
    html = page.evaluate("""async () => (await axe.run(document, {runOnly: ['color-contrast-enhanced'],
        resultTypes: ['violations']})).violations.flatMap(v => v.nodes.map(n => n.target.join(' ') + ': ' +
        n.failureSummary.split('\\n').slice(1).join(' ')))""")
    assert html == [], html[:5]
    # the figure at its first and its last step (each layer's text shows by then), as projected
    page.evaluate("ShardscopeClassroom.present(true)")
    last = int(page.get_attribute("#stage [data-player]", "data-frames")) - 1
    measured = 0
    for k in sorted({0, last}):
        page.evaluate(f"document.querySelector('#stage [data-player]').__player.show({k}, false)")
        texts = text_contrasts(page)
        measured += len(texts)
        low = [t for t in texts if t["ratio"] < AAA]
        assert not low, (slug, k, low[:5])
    assert measured > 10, (slug, measured)


def test_the_measure_reads_the_fills(page):
    """In the light theme the rank numbers of /collective are white on the ranks' fills:
    Okabe–Ito's blue gives 5.2:1 — fine for AA, below AAA — and the measure finds it."""
    open_page(page, "/collective?theme=light&present=1")
    texts = text_contrasts(page)
    on_blue = [t for t in texts if t["ground"] == "rgb(0, 114, 178)"]
    assert on_blue and all(t["ratio"] < AAA for t in on_blue), on_blue[:3]


def test_theme_toggle_offers_contrast_and_the_address_wins(page):
    open_page(page, "/moe")
    seen = []
    for _ in range(4):
        page.click("[data-theme-toggle]")
        seen.append(page.get_attribute("html", "data-theme"))
    assert seen == ["light", "dark", "contrast", None]          # None: auto, the system's
    page.click("[data-theme-toggle]")                            # remembered: light
    open_page(page, "/embed/moe?theme=contrast", 960, 540)
    assert page.get_attribute("html", "data-theme") == "contrast"
    open_page(page, "/moe")
    assert page.get_attribute("html", "data-theme") == "light"   # the address's is not stored


def test_the_figure_has_a_text_alternative_that_follows_the_step(page):
    open_page(page, "/moe")
    captions = page.evaluate("fetch('/api/moe').then(r => r.json()).then(j => j.frames.map(f => f.caption))")
    deck = page.locator("#stage svg.deck")
    assert "Step 1 of 8: before routing" in deck.get_attribute("aria-label")
    announce = page.locator("#stage [data-announce]")
    assert announce.inner_text() == ""                          # nothing said on load
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowRight")
    assert "Step 3 of 8: MoE layer stage 2 of 7" in deck.get_attribute("aria-label")
    assert announce.get_attribute("aria-live") == "polite"
    assert announce.inner_text().startswith("Step 3 of 8: MoE layer stage 2 of 7")
    assert captions[2][:40] in announce.inner_text()
    # the caption list itself is not a live region: a step is announced once
    assert page.get_attribute("#stage [data-captions]", "aria-live") is None
    # the description speaks of the step the name says at once (its values follow when idle)
    described = page.evaluate("""() => document.getElementById(
        document.querySelector('#stage svg.deck').getAttribute('aria-describedby')).textContent""")
    assert described.startswith(captions[2][:60])
    page.wait_for_function("""() => { const d = document.querySelector('#stage svg.deck');
        const id = d.getAttribute('aria-describedby'); const el = id && document.getElementById(id);
        return el && el.textContent.includes('Values shown'); }""")
    described = page.evaluate("""() => document.getElementById(
        document.querySelector('#stage svg.deck').getAttribute('aria-describedby')).textContent""")
    assert described.startswith(captions[2][:60])
    assert "E7" in described and "0.43" in described          # labels and numbers the step draws


def test_controls_are_reached_with_tab(page):
    open_page(page, "/pipeline")
    wanted = page.evaluate("""() => Array.from(document.querySelectorAll(
        '#stage .toolbar button, #stage .toolbar a, #stage .toolbar summary, #stage [data-player-bar] button, #stage [data-player-bar] input, #stage [data-player-bar] select'))
        .filter(el => el.checkVisibility()).map(el => el.outerHTML.slice(0, 60))""")
    reached = set()
    for _ in range(140):
        page.keyboard.press("Tab")
        reached.add(page.evaluate("document.activeElement ? document.activeElement.outerHTML.slice(0, 60) : ''"))
    missing = [w for w in wanted if w not in reached]
    assert not missing, missing
