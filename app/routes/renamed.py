"""Old permalinks after a rename: a page, embed, /svg, handout or /export query that uses the
names a scene's params had before (``renamed`` of its params model, app.params.Renamed) is
answered with a 308 to the same state under the new names.

The target is the canonical query of the params the old query means (``params.query()``), with
the query's other keys (``frame``, the export's options) after it in their order; a query the
params refuse is sent on with its names renamed, to meet its 422 there. A query that mixes old
and new names is no redirect: the params refuse it (422 naming the old parameter). /api answers
an old query directly — the params model reads it the old way — so scripts that do not follow
redirects keep their numbers (docs/parameters.md).
"""

from __future__ import annotations

from urllib.parse import urlencode

from fastapi import Request
from fastapi.responses import RedirectResponse

from app.params import Invalid, ParamsError, parse


def moved(request: Request, params_model) -> RedirectResponse | None:
    """The 308 for an old-style query of ``params_model``, or None."""
    renamed = params_model.renamed
    query = request.query_params
    if renamed is None or not renamed.is_old(params_model, query):
        return None
    try:
        pairs = renamed.rename(params_model, query.multi_items())
    except Invalid:
        return None                          # mixed old and new names: the handler's 422
    fields = params_model.model_fields
    try:
        target = parse(params_model, dict(pairs)).query()
        rest = [(k, v) for k, v in pairs if k not in fields]
        if rest:
            target += "&" + urlencode(rest)
    except ParamsError:
        target = urlencode(pairs)
    return RedirectResponse(f"{request.url.path}?{target}", status_code=308)
