"""An /api answer asked again with the same query string is sent from memory before routing
(app/routes/answers.py): the same bytes and headers as the first answer, never for an error,
for HEAD too, and only for that exact URL."""

from __future__ import annotations

from app.caches import ANSWERS, LAYERS


def test_the_second_answer_is_the_first_one(client):
    ANSWERS.clear()
    first = client.get("/api/zero?dp=6&stage=3")
    assert ("/api/zero", b"dp=6&stage=3") in ANSWERS.items
    again = client.get("/api/zero?dp=6&stage=3")
    assert again.status_code == first.status_code == 200
    assert again.content == first.content
    assert dict(again.headers) == dict(first.headers)       # security headers included
    head = client.head("/api/zero?dp=6&stage=3")
    assert head.status_code == 200 and head.content == b""
    assert head.headers["content-length"] == str(len(first.content))


def test_errors_are_never_remembered(client):
    for _ in range(2):
        bad = client.get("/api/zero?dp=0")
        assert bad.status_code == 422
        assert bad.json()["detail"][0]["param"] == "dp"
    assert ("/api/zero", b"dp=0") not in ANSWERS.items


def test_only_the_exact_url_is_answered_from_memory(client):
    a = client.get("/api/collective?world=5&count=10")
    b = client.get("/api/collective?count=10&world=5")      # the same params, another URL
    assert a.content == b.content
    assert ("/api/collective", b"count=10&world=5") in ANSWERS.items
    assert client.get("/api/collective?world=5&count=15").json()["count"] == 15
    assert ANSWERS in LAYERS                                  # bounded like every cache
