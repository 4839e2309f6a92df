"""The ``shardscope`` command line reads the same params models as the routes: its JSON and SVG
are the bytes /api and /svg answer, its --help lists every parameter with its range, and a bad
value is refused with the 422's message."""

from __future__ import annotations

import pytest

from app.cli import main
from app.main import SCENES
from app.params import describe


def run(capsys, *argv) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("argv,query", [
    (["pipeline", "--schedule", "zbv", "--stages", "4"], "schedule=zbv&stages=4"),
    (["pipeline", "--t-f", "2", "--t_w", "0.5"], "t_f=2&t_w=0.5"),
    (["collective", "--op", "all_gather", "--world", "6", "--count", "12"],
     "op=all_gather&world=6&count=12"),
    (["memory", "--preset", "gpt2", "--dp", "4", "--zero", "3"], "preset=gpt2&dp=4&zero=3"),
])
def test_api_prints_the_json_of_the_route(capsys, client, argv, query):
    code, out, _ = run(capsys, "api", *argv)
    assert code == 0
    assert out.encode() == client.get(f"/api/{argv[0]}?{query}").content + b"\n"


def test_svg_writes_the_frame_the_route_answers(capsys, client, tmp_path):
    target = tmp_path / "zbv.svg"
    assert run(capsys, "svg", "pipeline", "--schedule", "zbv", "--frame", "3", "-o",
               str(target))[0] == 0
    assert target.read_bytes() == client.get("/svg/pipeline?schedule=zbv&frame=3").content


@pytest.mark.parametrize("argv,param", [
    (["api", "pipeline", "--stages", "400"], "stages"),
    (["api", "collective", "--op", "reduce_scatter", "--world", "4", "--count", "10"], "count"),
    (["svg", "pipeline", "--frame", "100000"], "frame"),
])
def test_bad_values_exit_2_with_the_message(capsys, argv, param):
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert param.replace("_", "-") in err or param in err


@pytest.mark.parametrize("scene", SCENES, ids=lambda s: s.slug)
def test_help_lists_every_parameter_with_its_range(capsys, scene):
    with pytest.raises(SystemExit) as done:
        main(["api", scene.slug, "--help"])
    assert done.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    for name in scene.params.model_fields:
        assert f"--{name.replace('_', '-')}" in text
        assert " ".join(describe(scene.params, name).split()) in text, name
