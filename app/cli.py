"""``shardscope``: serve the app, or ask any scene for its JSON or one frame's SVG from the shell.

    shardscope serve [--host H] [--port P] [--workers N]   N: one per core by default
    shardscope api pipeline --schedule zbv --stages 4          the trace as JSON on stdout
    shardscope svg pipeline --schedule zbv --frame 3 -o f.svg  one step as an SVG file
    shardscope export pipeline --schedule zbv --stages 4 --format pdf -o zbv.pdf
                                                           GIF, MP4, PDF, PPTX, HTML or PNG
    shardscope api pipeline --help                             every parameter with its range
    shardscope exercise zero-model-states --seed 7 --answer "41.25 GB"
                                                           a problem; check an answer, --reveal
    shardscope plan --hf-config config.json --gpus 512        the best mixes for your model

The options of each scene are its params model's fields (``--t-f`` or ``--t_f`` for ``t_f``),
validated exactly as the query of ``/api/<scene>`` is: a bad value prints the same message as
the 422 and exits with status 2.
"""

from __future__ import annotations

import argparse
import os
import sys

from app.params import ParamsError, describe, field_comments, parse


def _scene_options(parser: argparse.ArgumentParser, scene) -> None:
    """One option per field of the scene's params model, its help from the model."""
    comments = field_comments(scene.params)
    for name, field in scene.params.model_fields.items():
        flags = [f"--{name.replace('_', '-')}"] + ([f"--{name}"] if "_" in name else [])
        what = comments.get(name) or field.description or ""
        default = "" if field.default is None else f" (default {field.default})"
        parser.add_argument(*flags, dest=name, metavar="V", default=None,
                            help=f"{what}; {describe(scene.params, name)}{default}"
                            .replace("%", "%%"))  # argparse formats help with %


def _scene_parsers(sub, command: str, help_text: str, scenes) -> None:
    group = sub.add_parser(command, help=help_text)
    per_scene = group.add_subparsers(dest="scene", required=True, metavar="SCENE")
    for scene in scenes:
        p = per_scene.add_parser(scene.slug, help=scene.title, description=scene.summary)
        _scene_options(p, scene)
        if command == "svg":
            p.add_argument("--frame", type=int, default=0, help="the step to draw (default 0)")
            p.add_argument("-o", "--output", default="-", help="file to write (default stdout)")
        if command == "export":
            _export_options(p, scene)


def _export_options(p: argparse.ArgumentParser, scene) -> None:
    """The options of GET /export/<scene>.<ext> (app/export/), validated as its query is. The
    file's format is ``--format`` (``--export-format`` too, and the only spelling where the
    scene has a ``format`` field of its own, as precision has), else the extension of ``-o``."""
    from app.export import FORMATS, OPTION_HELP
    flags = ["--export-format"] + ([] if "format" in scene.params.model_fields else ["--format"])
    p.add_argument(*flags, dest="export_format_", choices=list(FORMATS), default=None,
                   help="the file's format (default: the extension of -o)")
    p.add_argument("-o", "--output", default=None,
                   help="file to write (default shardscope-<scene>.<format>; - for stdout)")
    for name, text in OPTION_HELP.items():
        p.add_argument(f"--{name}", dest=f"export_{name}", metavar="V", default=None,
                       help=text.replace("%", "%%"))


def _export(scene, params, args: argparse.Namespace) -> int:
    from app.export import FORMATS, export, filename, options_for
    from app.scene import trace_of
    fmt = args.export_format_ or (args.output or "").rpartition(".")[2]
    if fmt not in FORMATS:
        print(f"shardscope: --format must be one of {', '.join(FORMATS)} (or -o with one of "
              f"those extensions)", file=sys.stderr)
        return 2
    args.format = fmt
    query = {k[len("export_"):]: v for k, v in vars(args).items()
             if k.startswith("export_") and not k.endswith("_") and v is not None}
    opts = options_for(scene, query, fmt)
    trace = trace_of(scene, params)
    started = [False]

    def progress(done: int, total: int) -> None:
        if total < 2 or not sys.stderr.isatty() and done < total:
            return
        started[0] = True
        bar = "#" * (30 * done // total)
        print(f"\r{args.format} [{bar:<30}] {done}/{total} frames", end="", file=sys.stderr,
              flush=True)

    body = export(args.format, scene, params, trace, opts, progress=progress)
    if started[0]:
        print(file=sys.stderr)
    output = args.output or filename(args.format, scene, opts)
    if output == "-":
        sys.stdout.buffer.write(body)
    else:
        with open(output, "wb") as f:
            f.write(body)
        print(f"wrote {output} ({len(body):,} bytes)", file=sys.stderr)
    return 0


def default_workers() -> int:
    """One uvicorn worker per core (``WEB_CONCURRENCY`` overrides, as uvicorn's own)."""
    return max(1, int(os.environ.get("WEB_CONCURRENCY") or os.cpu_count() or 1))


def _params(scene, args: argparse.Namespace):
    query = {k: v for k, v in vars(args).items() if k in scene.params.model_fields
             and v is not None}
    return parse(scene.params, query)


def main(argv: list[str] | None = None) -> int:
    from app.main import SCENES
    parser = argparse.ArgumentParser(prog="shardscope", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="serve the app over HTTP")
    serve.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
    serve.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
    serve.add_argument("--workers", type=int, default=default_workers(),
                       help="uvicorn worker processes (default: one per core, here "
                            f"{default_workers()}; they share one job store, docs/serving.md)")
    _scene_parsers(sub, "api", "print a scene's trace as JSON (as GET /api/<scene>)", SCENES)
    _scene_parsers(sub, "svg", "write one step of a scene as SVG (as GET /svg/<scene>)", SCENES)
    plan = sub.add_parser("plan", help="search every parallel mix of a model on a cluster")
    _scene_options(plan, next(s for s in SCENES if s.slug == "planner"))
    plan.add_argument("--json", action="store_true", help="print the /api/planner JSON")
    plan.add_argument("--top", type=int, default=10, help="rows of the table")
    plan.add_argument("--hf-config", metavar="FILE", default=None,
                      help="a Hugging Face config.json: its shape fills --layers … --vocab "
                           "(an MoE config picks the matching MoE preset); explicit options win")
    _scene_parsers(sub, "export", "write a scene as GIF, MP4, PDF, PPTX, HTML or PNG "
                                  "(as GET /export/<scene>.<format>)", SCENES)
    _exercise_parser(sub)
    args = parser.parse_args(argv)

    if args.command == "exercise":
        return _exercise(args)
    if args.command == "plan":
        return _plan(args, next(s for s in SCENES if s.slug == "planner"))

    if args.command == "serve":
        import uvicorn

        from app.jobs.election import data_dir
        print(f"shardscope: {args.workers} worker{'s' if args.workers != 1 else ''} on "
              f"http://{args.host}:{args.port}, jobs kept in {data_dir()}", file=sys.stderr)
        uvicorn.run("app.main:create_app", factory=True, host=args.host, port=args.port,
                    workers=args.workers, log_level="info",
                    access_log=os.environ.get("SHARDSCOPE_ACCESS_LOG") == "1")
        return 0

    from app.scene import json_of, trace_of
    from app.view import scene_box
    scene = next(s for s in SCENES if s.slug == args.scene)
    try:
        params = _params(scene, args)
        if args.command == "api":
            sys.stdout.buffer.write(json_of(scene, params) + b"\n")
            return 0
        if args.command == "export":
            return _export(scene, params, args)
        trace = trace_of(scene, params)
        frames = scene.frame_count(trace)
        if not 0 <= args.frame < frames:
            print(f"shardscope: frame must be an integer from 0 to {frames - 1} "
                  f"(got {args.frame})", file=sys.stderr)
            return 2
    except ParamsError as error:
        for problem in error.problems:
            print(f"shardscope: --{problem.param.replace('_', '-')}: {problem.message}",
                  file=sys.stderr)
        return 2
    from app.export.frames import frame_svg
    body = frame_svg(scene, params, trace, args.frame, describe=True,   # as GET /svg answers it
                     box=scene_box(scene, {}, export=True))
    if args.output == "-":
        sys.stdout.write(body)
    else:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(body)
    return 0


def _exercise_parser(sub) -> None:
    ex = sub.add_parser("exercise", help="print a problem (as GET /api/exercises/<id>) and check "
                                         "an answer given on the command line")
    ex.add_argument("id", help="the problem's id (\"list\" lists them all)")
    ex.add_argument("--seed", default="1", help="which numbers (default 1)")
    ex.add_argument("--answer", default=None, help='an answer: "41.25 GB", "0.375", "25 %%", '
                                                   '"tp=1, cp=0, dp=1, pp=1", "0, 4, 8"')
    ex.add_argument("--reveal", action="store_true", help="show the worked solution")
    ex.add_argument("--json", action="store_true", help="print the API's JSON instead")


def _exercise(args: argparse.Namespace) -> int:
    """``shardscope exercise``: 0 when the answer is right (or none was given), 1 when it is
    wrong, 2 for an unknown id, a bad seed or an answer that cannot be read."""
    import json
    from app.exercises import template, templates
    from app.exercises.check import check, parse_seed, problem
    from app.exercises.units import AnswerError, given_text
    if args.id == "list":
        for t in templates():
            print(f"{t.chapter:>2}  {t.id:34} {t.title}")
        return 0
    t = template(args.id)
    if t is None:
        print(f"shardscope: no exercise {args.id!r} (shardscope exercise list)", file=sys.stderr)
        return 2
    try:
        seed = parse_seed(args.seed)
        body = problem(t, seed)
        verdict = (check(t, seed, args.answer, args.reveal)
                   if args.answer is not None or args.reveal else None)
    except AnswerError as error:
        print(f"shardscope: --{error.field}: {error.message}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(verdict if verdict is not None else body, ensure_ascii=False, indent=1))
    else:
        print(f"{t.title} (chapter {t.chapter}, /exercises/{t.id}?seed={seed})\n")
        print(body["prompt"] + "\n")
        for k, v in body["given"].items():
            print(f"  {k:>18} = {given_text(v)}")
        if verdict is not None:
            print()
            if args.answer is not None:
                print(("right: " if verdict["correct"] else "not yet: ")
                      + (verdict.get("expected_text", "") if verdict["correct"]
                         else verdict.get("hint", "")))
                print(f"  (read as {verdict['unit_understood']})")
            if "solution" in verdict:
                for k, step in enumerate(verdict["solution"], start=1):
                    print(f"  {k}. {step['line']}")
                print(f"answer: {verdict['expected_text']}\nscene: {verdict['scene_url']}")
    return 0 if verdict is None or verdict["correct"] or args.answer is None else 1


def _apply_hf_config(args: argparse.Namespace) -> str | None:
    """Fill the shape options from a config.json (as POST /api/model-shape reads it), leaving
    any option given on the command line; the problem in words, or None."""
    import orjson

    from app.sim.planner.hf_config import MAX_BYTES, ConfigError, shape_of
    try:
        with open(args.hf_config, "rb") as f:
            data = f.read(MAX_BYTES + 1)
    except OSError as error:
        return f"cannot read {args.hf_config}: {error.strerror}"
    if len(data) > MAX_BYTES:
        return f"{args.hf_config} is over {MAX_BYTES:,} bytes: not a config.json"
    try:
        answer = shape_of(orjson.loads(data))
    except orjson.JSONDecodeError:
        return f"{args.hf_config} is not JSON"
    except ConfigError as error:
        return f"{args.hf_config}: {error}"
    if args.preset is None:
        args.preset = answer.extra["preset"]
    if answer.extra["family"] != "moe":
        for name, value in answer.shape.items():
            if hasattr(args, name) and getattr(args, name) is None:
                setattr(args, name, value)
    return None


def _plan(args: argparse.Namespace, scene) -> int:
    """``shardscope plan``: the planner's best mixes as a table, or its JSON."""
    from app.scene import json_of, trace_of
    if args.hf_config is not None:
        problem = _apply_hf_config(args)
        if problem:
            print(f"shardscope: --hf-config: {problem}", file=sys.stderr)
            return 2
    try:
        params = _params(scene, args)
    except ParamsError as error:
        for problem in error.problems:
            print(f"shardscope: --{problem.param.replace('_', '-')}: {problem.message}",
                  file=sys.stderr)
        return 2
    if args.json:
        sys.stdout.buffer.write(json_of(scene, params) + b"\n")
        return 0
    plan = trace_of(scene, params).plan
    print(plan.message)
    head = ("tp", "pp", "v", "dp", "cp", "ep", "zero", "b", "recompute", "fits", "peak_GB",
            "tokens/s", "TFLOP/s", "MFU", "bound")
    print(" ".join(f"{h:>9}" for h in head))
    for c in plan.candidates[:args.top]:
        row = (c.tp, c.pp, c.chunks, c.dp, c.cp, c.ep, c.zero, c.micro_batch, c.recompute,
               "yes" if c.fits else "no", f"{c.peak_bytes / 1e9:.1f}", f"{c.tokens_per_s:,.0f}",
               f"{c.tflops_per_gpu:.0f}", f"{100 * c.mfu:.1f}%", c.bound)
        print(" ".join(f"{str(x):>9}" for x in row))
    return 0 if plan.best else 1


if __name__ == "__main__":
    sys.exit(main())
