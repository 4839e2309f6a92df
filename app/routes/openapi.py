"""OpenAPI descriptions of every scene's query, read from its params model (DESIGN principle 13).

The scene routes parse their query themselves (:func:`app.params.parse`, so that a bad value is
a 422 that names the parameter and its range, and a page can still show its controls), which
leaves FastAPI nothing to describe. :func:`query_parameters` writes the OpenAPI ``parameters``
of a route from the same model instead: each field's type, range, enum values, default and help,
so ``/api/docs`` lists every parameter of every scene and no range is typed twice.
"""

from __future__ import annotations

from functools import lru_cache

from app.params import SceneParams, control_spec, describe, field_comments

FRAME = {"name": "frame", "in": "query", "required": False,
         "schema": {"type": "integer", "minimum": 0, "default": 0},
         "description": "the step shown (0 … steps − 1); the JSON of /api/<scene> has them all"}


def _schema(prop: dict) -> dict:
    """A property of the model's JSON schema as a parameter schema: titles and descriptions
    go to the parameter itself."""
    drop = ("title", "description")
    schema = {k: v for k, v in prop.items() if k not in drop}
    if "anyOf" in schema:  # an optional field: X | None
        schema["anyOf"] = [{k: v for k, v in s.items() if k not in drop}
                           for s in schema["anyOf"]]
    return schema


def _text_allowed(prop: dict) -> str | None:
    """The allowed form of a free-text parameter (a string schema without an enum) in words:
    its pattern, its length and its default as an example; None for any other parameter."""
    inner = next((s for s in prop.get("anyOf", [prop]) if s.get("type") != "null"), prop)
    if inner.get("type") != "string" or "enum" in inner:
        return None
    parts = ["text"]
    if "pattern" in inner:
        parts.append(f"matching the pattern {inner['pattern']}")
    low, high = inner.get("minLength"), inner.get("maxLength")
    if low is not None and low == high:
        parts.append(f"of {low} characters")
    elif low is not None or high is not None:
        parts.append(f"of {low or 0} to {high if high is not None else 'any number of'} "
                     "characters")
    if isinstance(prop.get("default"), str):
        parts.append(f"such as {prop['default']}")
    return ", ".join([" ".join(parts[:2])] + parts[2:]) if len(parts) > 1 else "text"


def _description(model: type[SceneParams], name: str, prop: dict) -> str:
    """The field's own comment in the model (what it means here), else its type's
    description, then its range in words."""
    text = field_comments(model).get(name) or prop.get("description") or next(
        (s["description"] for s in prop.get("anyOf", ()) if "description" in s), "")
    spec = control_spec(model, name)
    if spec is not None and spec.help and spec.help != text:
        text = f"{text} — {spec.help}" if text else spec.help
    allowed = _text_allowed(prop) or describe(model, name)
    return f"{text.rstrip('.')}. Allowed: {allowed}." if text else f"Allowed: {allowed}."


@lru_cache(maxsize=None)
def query_parameters(model: type[SceneParams], frame: bool = False) -> list[dict]:
    """The OpenAPI parameters of a route that takes ``model`` as its query (and ``frame``)."""
    properties = model.model_json_schema(mode="validation")["properties"]
    out = [{"name": name, "in": "query", "required": False, "schema": _schema(prop),
            "description": _description(model, name, prop)}
           for name, prop in properties.items()]
    return out + [FRAME] if frame else out


def problem_response() -> dict:
    """The 422 every scene route answers to a bad query."""
    return {"422": {"description": "a parameter is out of range or two disagree: `detail` "
                                   "lists each problem with the parameter it names",
                    "content": {"application/json": {"schema": {
                        "type": "object",
                        "properties": {"message": {"type": "string"},
                                       "detail": {"type": "array", "items": {
                                           "type": "object",
                                           "properties": {"param": {"type": "string"},
                                                          "message": {"type": "string"}}}}}}}}}}
