"""The README's figures that the app computes are the app's: the planner's accuracy ledger
(mean and largest error, rows within ±15 %, DeepSeek-V3's error) as the server computes it at
start (app/sim/planner/ledger.py), so the front page cannot drift from /planner/accuracy."""

from __future__ import annotations

import re
from pathlib import Path

from app.sim.planner.ledger import ledger

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_readme_states_the_ledger_as_computed():
    text = " ".join(README.read_text(encoding="utf-8").split())
    found = re.search(r"mean \|error\| ([\d.]+) %, largest ([\d.]+) %\*\* \(([^)]*)\), "
                      r"(\d+) of (\d+) within ±15 %, DeepSeek-V3 ([+−-][\d.]+) %", text)
    assert found, "the README's planner section states the ledger's mean and largest error"
    mean, largest, worst, within, rows, deepseek = found.groups()
    book = ledger()
    assert float(mean) == round(100 * book.mean_abs_error, 1)
    assert float(largest) == round(100 * book.max_abs_error, 1)
    far = max(book.rows, key=lambda r: abs(r.error)).run.name      # "Llama 3 405B, 131K …"
    words = [w for w in re.findall(r"[\w.]+", worst) if w != "at"]   # "Llama 3 405B at 131K context"
    assert all(w in far for w in words), (worst, far)
    assert int(rows) == len(book.rows)
    assert int(within) == sum(abs(r.error) <= 0.15 for r in book.rows)
    v3 = [r for r in book.rows if r.run.name.startswith("DeepSeek-V3")]
    assert len(v3) == 1, [r.run.name for r in book.rows]
    assert float(deepseek.replace("−", "-")) == round(100 * v3[0].error, 1)
