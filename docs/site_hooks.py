"""MkDocs hook (mkdocs.yml `hooks:`): the site's logo and favicon are the app's own
static/favicon.svg, added to the build as assets/favicon.svg rather than kept twice."""

from __future__ import annotations

from pathlib import Path

from mkdocs.structure.files import File

FAVICON = Path(__file__).resolve().parent.parent / "static" / "favicon.svg"


def on_files(files, config):
    files.append(File.generated(config, "assets/favicon.svg", abs_src_path=str(FAVICON)))
    return files
