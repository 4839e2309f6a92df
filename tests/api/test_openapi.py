"""OpenAPI lists every query parameter of every scene route, read from the params models, and
/api/docs serves Swagger UI from this origin (issue 11)."""

from __future__ import annotations

import re
from typing import Literal, get_args, get_origin

import pytest

from app.main import SCENES
from app.params import _bounds, _unwrap

ROUTES = [(scene, path) for scene in SCENES
          for path in (f"/{scene.slug}", f"/embed/{scene.slug}", f"/api/{scene.slug}",
                       f"/svg/{scene.slug}")]


@pytest.fixture(scope="module")
def spec(client):
    return client.get("/api/openapi.json").json()


@pytest.mark.parametrize("scene,path", ROUTES, ids=[p for _, p in ROUTES])
def test_every_field_is_a_described_query_parameter(spec, scene, path):
    parameters = {p["name"]: p for p in spec["paths"][path]["get"]["parameters"]}
    assert set(scene.params.model_fields) <= set(parameters)
    assert ("frame" in parameters) == (not path.startswith("/api/"))
    for name, field in scene.params.model_fields.items():
        p = parameters[name]
        assert p["in"] == "query" and p["required"] is False
        assert "Allowed:" in p["description"] and len(p["description"]) > 12
        schema = p["schema"]
        inner = next((s for s in schema.get("anyOf", [schema]) if s.get("type") != "null"))
        annotation, _ = _unwrap(field)
        if get_origin(annotation) is Literal:
            assert inner["enum"] == list(get_args(annotation))
        elif annotation in (int, float):
            (low, strict_low), (high, strict_high) = _bounds(field)
            if low is not None:
                assert inner["exclusiveMinimum" if strict_low else "minimum"] == low
            if high is not None:
                assert inner["exclusiveMaximum" if strict_high else "maximum"] == high
        assert schema.get("default") == field.default


@pytest.mark.parametrize("scene", [s for s in SCENES if s.verify is not None],
                         ids=lambda s: s.slug)
def test_verify_routes_are_described(spec, scene):
    operation = spec["paths"][f"/api/verify/{scene.slug}"]["post"]
    assert {p["name"] for p in operation["parameters"]} == set(scene.params.model_fields)
    assert {"202", "422", "429"} <= set(operation["responses"])


def test_the_docs_page_loads_only_from_this_origin(client):
    page = client.get("/api/docs")
    assert page.status_code == 200
    sources = re.findall(r'(?:src|href)="([^"]+)"', page.text)
    assert any("swagger-ui-bundle.js" in s for s in sources)
    assert all(s.startswith(("/", "#")) for s in sources), sources
    assert "<script>" not in page.text  # the CSP allows no inline script
    for asset in (s.split("?")[0] for s in sources if "/vendor/swagger-ui/" in s):
        assert client.get(asset).status_code == 200, asset


@pytest.mark.parametrize("scene", SCENES, ids=lambda s: s.slug)
def test_a_text_field_says_its_pattern_not_a_number(spec, scene):
    """A string parameter's "Allowed:" names what the string must look like (the pattern of
    its schema, its length), never "a number" — /parallelism's ``order`` is the case."""
    for p in spec["paths"][f"/api/{scene.slug}"]["get"]["parameters"]:
        schema = p["schema"]
        inner = next((s for s in schema.get("anyOf", [schema]) if s.get("type") != "null"))
        if inner.get("type") != "string" or "enum" in inner:
            continue
        allowed = p["description"].split("Allowed:", 1)[1]
        assert "number" not in allowed and "integer" not in allowed, (p["name"], allowed)
        if "pattern" in inner:
            assert inner["pattern"] in allowed, (p["name"], allowed)


def test_order_names_its_form(spec):
    order = next(p for p in spec["paths"]["/api/parallelism"]["get"]["parameters"]
                 if p["name"] == "order")
    allowed = order["description"].split("Allowed:", 1)[1]
    assert "^[a-z]{2}(-[a-z]{2}){4}$" in allowed and "tp-cp-ep-dp-pp" in allowed
