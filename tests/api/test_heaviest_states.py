"""No response of a scene's heaviest accepted states exceeds 5 MB (issue 12, item 3; DESIGN
budgets): page, /api and /svg of the five heaviest states per scene that bench/heaviest.py's
bounded search found (``python -m bench.heaviest`` regenerates them; paste its queries here),
plus a few adversarial ones a greedy walk does not reach. Size only: time is ``make bench``'s."""

from __future__ import annotations

import pytest

from app.main import SCENES
from tests.later_frames import every_frame

LIMIT = 5_000_000

FOUND: dict[str, list[str]] = {
    "memory": [
        "preset=gpt3-175b&recompute=none&micro_batch=64",
        "preset=gpt3-175b&recompute=none",
        "preset=gpt3-175b&recompute=none&dp=1",
        "preset=gpt3-175b&micro_batch=64",
        "preset=gpt3-175b&recompute=none&optimizer=sgd",
    ],
    "parallelism": [
        "dp=1024&gpus_per_node=1&ep=1",
        "dp=1024&ep=1",
        "dp=1024&gpus_per_node=1&pp=1",
        "dp=1024&gpus_per_node=64",
        "dp=1024&pp=1",
    ],
    "collective": [
        "op=all_reduce&world=64&count=128",
        "op=all_to_all&algorithm=ring&world=64&count=128",
        "op=all_gather&algorithm=ring&world=64&count=128",
        "count=16384&op=all_to_all&intra_node_gbs=10.0",
        "count=16384&alpha_us=250.0",
    ],
    "optimizer": [
        "steps=64&size=12&optimizer=adam",
        "steps=64&size=12&beta2=0.99999",
        "steps=64&size=12&beta1=0.99",
        "steps=64&size=12&lr=10.0",
        "steps=64&size=12&weight_decay=0.0",
    ],
    "data-parallel": [
        "preset=llama3-405b&dp=1024&steps=10",
        "preset=llama3-405b&dp=1024&mlp_width=8",
        "preset=llama3-405b&dp=1024&alpha_us=50.0",
        "preset=llama3-405b&dp=1024&steps=1",
        "preset=llama3-405b&dp=256",
    ],
    "zero": [
        "dp=1024&steps=10&param_count=1000000000000000",
        "dp=1024&steps=10&stage=0",
        "dp=1024&steps=10&mlp_layers=1",
        "dp=1024&steps=10&param_count=1",
        "dp=1024&param_count=1000000000000000",
    ],
    "tensor-parallel": [
        "block=attention&hidden=32&tokens=16",
        "block=attention&hidden=32&heads=16",
        "block=attention&hidden=32&tp=1",
        "block=attention&hidden=32&tokens=1",
        "block=mlp&hidden=32",
    ],
    "pipeline": [
        "microbatches=1024&stages=64&t_f=0.1",
        "schedule=zb_h1&stages=64&microbatches=1024",
        "microbatches=1024&stages=64&t_comm=1000.0",
        "microbatches=1024&stages=64&t_f=1000.0",
        "microbatches=1024&stages=64&t_f=250.0",
    ],
    "precision": [
        "steps=64&grad_spread=3.0&grad_center=2.0",
        "steps=64&grad_spread=3.0&growth_interval=1",
        "steps=64&grad_center=-12.0",
        "steps=64&init_scale_log2=10",
        "grad_spread=3.0",
    ],
    "checkpointing": [
        "preset=llama3-405b&micro_batch=4096&recompute=selective",
        "preset=llama3-405b&micro_batch=4096&recompute_layers=48",
        "preset=llama3-405b&grad_accum=1024",
        "preset=llama3-405b&recompute_layers=48",
        "preset=gpt3-175b&micro_batch=4096",
    ],
    "moe": [
        "tokens=4096&top_k=4&skew=8.0",
        "tokens=4096&top_k=4&router_steps=32",
        "tokens=4096&top_k=4&drop_policy=position",
        "tokens=4096&top_k=4&capacity_factor=16.0",
        "tokens=4096&router_steps=32",
    ],
}
"""The five heaviest states of each scene, as bench/heaviest.py found them."""

ADVERSARIAL: dict[str, list[str]] = {
    # fractional times lengthen every number of the pipeline's compact form
    "pipeline": ["schedule=zb_h1&stages=64&microbatches=1024&t_f=0.1&t_b=0.3&t_w=0.7&t_comm=0.13",
                 "schedule=zb_h1&stages=64&microbatches=1024&t_f=999.7&t_b=0.3&t_w=0.7&t_comm=0.13",
                 "schedule=dualpipev&stages=64&microbatches=512&t_f=0.1&t_comm=0.3",
                 "schedule=interleaved_1f1b&stages=64&microbatches=128&chunks=8&t_f=0.1&t_comm=0.3"],
    # the scenes that came after the search was last run
    "train": ["tp=2&cp=2&pp=2&dp=2&ep=2&zero=1&sequence_parallel=true&recompute=full",
              "tp=1&cp=1&pp=16&dp=1&ep=1&layers=16&microbatches=8&experts=16&top_k=4",
              "tp=1&cp=1&pp=1&dp=16&ep=16&experts=16&microbatches=8&top_k=4",
              "tp=2&cp=8&pp=1&dp=1&ep=2&seq=256&microbatches=2&layers=4"],
    "planner": ["preset=llama3-405b&gpus=16384&global_batch=2048&seq=8192",
                "preset=deepseek-v3&gpus=16384&global_batch=16384",
                "preset=gpt2&gpus=16384&global_batch=16384&seq=1024"],
    "context-parallel": ["method=ring&cp=64&seq=256&heads=16&kv_heads=16&head_dim=16"
                         "&balance=zigzag",
                         "method=hybrid&cp=64&ulysses=8&seq=256&heads=16&kv_heads=16&head_dim=16",
                         "method=ulysses&cp=16&seq=256&heads=16&kv_heads=16&head_dim=16",
                         "method=all_gather&cp=64&seq=256&heads=16&kv_heads=16&head_dim=16"
                         "&balance=zigzag",
                         "method=ring&cp=64&seq=256&heads=16&kv_heads=16&head_dim=16"
                         "&causal=false"],
    "collective": ["op=all_reduce&algorithm=ring&world=64&count=128&seed=7",
                   "op=all_to_all&algorithm=ring&world=64&count=128&seed=7",
                   "op=reduce_scatter&algorithm=ring&world=64&count=128"],
}

CASES = [(slug, query) for table in (FOUND, ADVERSARIAL) for slug, queries in table.items()
         for query in queries]


def test_every_scene_has_found_states():
    assert {s.slug for s in SCENES} <= set(FOUND) | set(ADVERSARIAL)


@pytest.mark.parametrize("slug,query", CASES, ids=[f"{s}?{q}" for s, q in CASES])
def test_heaviest_states_answer_under_5_mb(client, slug, query):
    for path in (f"/{slug}?{query}", f"/api/{slug}?{query}", f"/svg/{slug}?{query}"):
        response = client.get(path)
        assert response.status_code == 200, f"{path}: {response.status_code} (no longer accepted?)"
        assert len(response.content) < LIMIT, f"{path}: {len(response.content) / 1e6:.2f} MB"


FRAGMENT_LIMIT = 1_500_000
"""The stage fragment a slider move swaps in (issue 19): what the drawing allows, well under
the 5 MB of any response."""

HEAVY_FRAGMENTS = [
    ("collective", "op=all_reduce&world=64&count=128"),
    ("collective", "op=all_to_all&algorithm=ring&world=64&count=128"),
    ("collective", "op=all_to_all&algorithm=direct&world=64&count=128"),
    ("collective", "op=reduce&world=64&count=128&root=5"),
    ("collective", "algorithm=tree&world=64&count=128"),
    ("pipeline", "schedule=zb_h1&stages=64&microbatches=1024"),
    ("pipeline", "schedule=1f1b&stages=64&microbatches=1024"),
    ("pipeline", "microbatches=200"),
    ("context-parallel", "method=ring&cp=64&seq=256&heads=16&kv_heads=16&head_dim=16"
                         "&balance=zigzag"),
    ("context-parallel", "method=hybrid&cp=64&ulysses=8&seq=256&heads=16&kv_heads=16"
                         "&head_dim=16"),
]


@pytest.mark.parametrize("slug,query", HEAVY_FRAGMENTS, ids=[f"{s}?{q}" for s, q in HEAVY_FRAGMENTS])
def test_heaviest_fragments_stay_small(client, slug, query):
    response = client.get(f"/{slug}?{query}", headers={"HX-Request": "true"})
    assert response.status_code == 200
    assert len(response.content) < FRAGMENT_LIMIT, f"{len(response.content) / 1e6:.2f} MB"


@pytest.mark.parametrize("query", ["op=all_reduce&world=64&count=128",
                                   "op=all_to_all&algorithm=ring&world=64&count=128"])
def test_a_64_rank_collective_deck_is_merged_but_keeps_every_cell(query):
    """At 33+ ranks a frame's cells are a few paths (no element per cell), and every cell of
    every frame is still there: one subpath per cell the unmerged writer would draw."""
    import re
    from app.scenes.collective import deck as view
    from app.scenes.collective import deck_svg
    from app.scenes.collective.page import simulate_cached
    from app.sim.collectives.params import CollectiveParams
    p = CollectiveParams(**dict(item.split("=") for item in query.split("&")))
    deck = view.build_deck(simulate_cached(p))
    assert deck.merged
    svg = str(deck_svg.render(deck, 0))
    frames = every_frame(svg)
    assert "<rect class=\"cell" not in frames and "<rect class=\"empty" not in svg
    drawn = sum(d.count("z") for d in re.findall(r'<path class="(?:cell[^"]*|empty)"[^>]* d="([^"]*)"',
                                                 frames))
    assert drawn == sum(len(f.cells) for f in deck.frames) > 64 * 64
    # each arrow is written once however many steps draw it (a ring sends along the same 64
    # links every step): the later frames' template lists a repeated one once
    drawn_arrows = [part for f in deck.frames[1:] for part in deck_svg._arrows(f.arrows)]
    arrows = set(drawn_arrows)
    assert svg.count('<g class="arrow') == sum(a.count('<g class="arrow') for a in arrows)
    assert len(arrows) * 8 < len(drawn_arrows)
    assert frames.count('<g class="arrow') == sum(a.count('<g class="arrow') for a in drawn_arrows)


@pytest.mark.parametrize("query", ["op=all_reduce&world=33&count=64",
                                   "op=all_to_all&algorithm=ring&world=48&count=96",
                                   "op=all_reduce&algorithm=tree&world=64&count=64"])
def test_merged_collective_cells_draw_what_one_cell_per_element_would(query, monkeypatch):
    """A merged deck's frames (MergedCells, grouped as they are built) draw the very markup of
    the Cell objects the unmerged writer makes for the same deck (issue 12 item 3)."""
    from app.scenes.collective import deck as view
    from app.scenes.collective import deck_svg
    from app.scenes.collective.page import simulate_cached
    from app.sim.collectives.params import CollectiveParams
    p = CollectiveParams(**dict(item.split("=") for item in query.split("&")))
    merged = view.build_deck(simulate_cached(p))
    monkeypatch.setattr(view, "MERGE_RANKS", 10 ** 6)      # Cell objects for every cell
    cells = view.build_deck(simulate_cached(p))
    assert merged.merged and not cells.merged
    for a, b in zip(merged.frames, cells.frames):
        assert isinstance(a.cells, view.MergedCells) and len(a.cells) == len(b.cells)
        assert deck_svg._merged_cells(a.cells) == deck_svg._merged_cells(b.cells)
