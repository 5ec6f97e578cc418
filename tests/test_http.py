"""Tests of the HTTP door (earmem.serve.http): every route through FastAPI's TestClient, validation (pydantic 422, the
store's own checks 400, unknown ids 404), the CDN-free docs page and OpenAPI schema, the optional dependency missing,
and one session against a real uvicorn on 127.0.0.1 (ephemeral port, started and stopped here)."""
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
pytest.importorskip("httpx")
from fastapi.testclient import TestClient  # noqa: E402

from earmem.serve.http import create_app
from earmem.memory.rules.hygiene import HashingEncoder, StoreConfig
from earmem.memory.store import MemoryStore

ROOT = Path(__file__).resolve().parents[1]
DECISION = "Dana picked Postgres for the orders service database"
CHATTER = "Dana said the orders database question keeps coming up in standups"
QUESTION = "which database for orders?"


def toy_store(path) -> MemoryStore:
    cfg = StoreConfig(recency_weight=0, importance_weight=0, min_relevance=-1.0, candidates=8, balanced=False,
                      learner_gate=0, ear={"lr": 0.05, "B": 4, "s": 3})
    return MemoryStore(path, encoder=HashingEncoder(64), config=cfg)


@pytest.fixture
def client(tmp_path):
    return TestClient(create_app(toy_store(tmp_path / "s")))


def add(client, text, kind, **kw):
    r = client.post("/memories", json={"text": text, "kind": kind, **kw})
    assert r.status_code == 201, r.text
    return r.json()["id"]


def test_search_feedback_flips_ranking(client):
    a, b = add(client, DECISION, "decision", entities=["Dana"]), add(client, CHATTER, "episode", entities=["Dana"])
    s1 = client.post("/search", json={"query": QUESTION, "k": 2}).json()
    assert [h["id"] for h in s1["hits"]] == [b, a]
    assert all({"score", "relevance", "recency", "frozen_relevance", "rank", "label"} <= set(h) for h in s1["hits"])
    fb = client.post("/feedback", json={"cited": [a], "search_id": s1["search_id"]})
    assert fb.status_code == 200 and fb.json()["labels"] == {b: -1, a: 1} and fb.json()["search_id"] == s1["search_id"]
    s2 = client.post("/search", json={"query": QUESTION, "k": 2}).json()
    assert [h["id"] for h in s2["hits"]] == [a, b] and s2["search_id"] != s1["search_id"]
    assert client.get("/stats").json()["feedback"] == 1


def test_memory_crud_and_history(client):
    a = add(client, DECISION, "decision", entities=["Dana"], importance=0.9, timestamp="2026-03-04")
    rec = client.get(f"/memories/{a}").json()
    assert rec["timestamp"].startswith("2026-03-04") and rec["importance"] == 0.9 and rec["entities"] == ["Dana"]
    up = client.put(f"/memories/{a}", json={"text": "Dana picked Postgres 16 for the orders database", "reason": "version"})
    assert up.status_code == 200 and up.json()["text"].startswith("Dana picked Postgres 16")
    hist = client.get(f"/memories/{a}/history").json()["history"]
    assert hist[-1]["action"] == "update" and hist[-1]["detail"]["reason"] == "version"
    r = client.post(f"/memories/{a}/retract", json={"reason": "wrong", "correction": "Dana picked MySQL for orders"}).json()
    fix = r["correction"]["id"]
    listed = client.get("/memories").json()
    assert listed["total"] == 1 and [m["id"] for m in listed["memories"]] == [fix]
    assert client.get("/memories", params={"include_retracted": True}).json()["total"] == 2
    assert client.delete(f"/memories/{fix}").json() == {"deleted": fix}
    assert client.get(f"/memories/{fix}").status_code == 404
    assert client.get(f"/memories/{fix}/history").json()["history"][-1]["action"] == "delete"


def test_list_filters_and_paging(client):
    for i in range(5): add(client, f"Lee note number {i} about the deploy {i * 'x'}", "observation", entities=["Lee"])
    add(client, DECISION, "decision", entities=["Dana"])
    assert client.get("/memories", params={"kind": "decision"}).json()["total"] == 1
    assert client.get("/memories", params={"entity": "lee"}).json()["total"] == 5
    page = client.get("/memories", params={"limit": 2, "offset": 4}).json()
    assert page["total"] == 6 and len(page["memories"]) == 2
    assert client.get("/memories", params={"limit": 0}).status_code == 422


def test_inject(client):
    a = add(client, DECISION, "decision", entities=["Dana"])
    r = client.post("/inject", json={"query": QUESTION, "budget_tokens": 40, "header": "Memory:"}).json()
    assert r["ids"] == [a] and r["tokens"] <= 40 and r["text"].startswith("Memory:\n[")
    assert client.post("/inject", json={"query": QUESTION, "budget_tokens": 2}).json()["ids"] == []
    same = client.post("/inject", json={"search_id": r["search_id"], "budget_tokens": 40, "header": "Memory:"}).json()
    assert same["text"] == r["text"]


@pytest.mark.parametrize("method,path,body,status,words", [
    ("post", "/memories", {"text": "x", "kind": "gossip"}, 422, "kind: expected one of"),
    ("post", "/memories", {"text": "x", "kind": "fact", "importance": 2}, 422, "importance: expected at most 1"),
    ("post", "/memories", {"text": "x", "kind": "fact", "colour": "red"}, 422, "colour: unknown argument of add"),
    ("post", "/memories", {"kind": "fact"}, 422, "text: is required"),
    ("post", "/memories", {"text": "x", "kind": "fact", "timestamp": "yesterday-ish"}, 400, "timestamp"),
    ("post", "/memories", [1, 2], 422, "body:"),
    ("post", "/search", {"query": "  "}, 400, "query: is empty"),
    ("post", "/search", {"query": "x", "k": 0}, 422, "k: expected at least 1"),
    ("post", "/search", {"query": "x", "k": "many"}, 422, "k: expected integer"),
    ("post", "/search", {"query": "x", "kind": ["fact"]}, 422, "did you mean 'kinds'"),
    ("post", "/search", {"query": "x", "since": "not a date"}, 400, "since"),
    ("post", "/search", {"query": "x", "store": "attic"}, 422, "store: expected one of"),
    ("post", "/feedback", {"cited": ["m1"]}, 400, "no search has been made"),
    ("post", "/feedback", {"cited": ["m1"], "search_id": "s9"}, 400, "no search"),
    ("post", "/feedback", {"cited": "m1"}, 422, "cited: expected array"),
    ("post", "/inject", {"query": "x", "search_id": "s1"}, 400, "not both"),
    ("get", "/memories/m404", None, 404, "no memory"),
    ("put", "/memories/m404", {"importance": 0.5}, 404, "no memory"),
    ("put", "/memories/m1", {"id": "m2"}, 422, "id: comes from the path"),
    ("delete", "/memories/m404", None, 404, "no memory"),
    ("get", "/memories/m404/history", None, 404, "no memory"),
    ("post", "/memories/m404/retract", {"reason": "x"}, 404, "no memory"),
    ("get", "/memories", {"limit": 0}, 422, "limit:"),
])
def test_bad_input(client, method, path, body, status, words):
    kw = {} if body is None else {"params": body} if method == "get" else {"json": body}
    r = getattr(client, method)(path, **kw)
    assert r.status_code == status, r.text
    assert list(r.json()) == ["error"] and words in r.json()["error"]          # one error shape at every door


def test_search_takes_the_filter(client):
    a = add(client, DECISION, "decision", entities=["Dana"], timestamp="2026-03-04")
    add(client, CHATTER, "episode", entities=["Dana"], timestamp="2026-01-04")
    ids = lambda body: [h["id"] for h in client.post("/search", json={"query": QUESTION, **body}).json()["hits"]]
    assert ids({"kinds": ["decision"]}) == [a] and ids({"store": "semantic"}) == [a] and ids({"since": "2026-02-01"}) == [a]
    assert ids({"entities": ["Lee"]}) == [] and ids({"until": "2025-12-31"}) == []
    r = client.post("/search", json={"query": QUESTION, "metadata": {"project": "orders"}})
    assert r.status_code == 200 or r.json()["error"].startswith("metadata:")   # passed on; backends filter or name it
    body = client.get("/openapi.json").json()["paths"]["/search"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert {"kinds", "entities", "since", "until", "store", "metadata", "as_of", "min_relevance", "k", "query", "user_id", "agent_id", "run_id",
            "rerank"} == set(body["properties"])
    r = client.post("/search", json={"query": QUESTION, "rerank": True})   # issue 38: no reranker configured where the server was built
    assert r.status_code >= 400 and r.json()["error"].startswith("rerank: True asks for the store's reranker"), r.json()


def test_update_needs_a_change(client):
    a = add(client, DECISION, "decision")
    r = client.put(f"/memories/{a}", json={"reason": "nothing"})
    assert r.status_code == 400 and "nothing to update" in r.json()["error"]


def test_docs_and_openapi(client):
    spec = client.get("/openapi.json").json()
    assert {"/memories", "/memories/{id}", "/memories/{id}/history", "/search", "/feedback", "/inject"} <= set(spec["paths"])
    assert set(spec["paths"]["/memories/{id}"]) == {"get", "put", "delete"}
    page = client.get("/docs")
    assert page.status_code == 200 and "<script" not in page.text and "cdn" not in page.text.lower()
    for p in spec["paths"]: assert f"<code>{p}</code>" in page.text


def test_import_without_fastapi():
    code = ("import sys; sys.modules['fastapi'] = None\n"
            "import earmem, earmem.memory.store.operations, earmem.serve.mcp\n"
            "try: import earmem.serve.http\n"
            "except ImportError as e: print(e)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "pip install 'earmem[server]'" in r.stdout


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(url, body):
    req = urllib.request.Request(url, json.dumps(body).encode(), {"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r: return r.status, json.loads(r.read())


def test_real_uvicorn(tmp_path):
    toy_store(tmp_path / "s").close()
    port = free_port()
    code = f"from earmem.serve.http import serve_http; serve_http({str(tmp_path / 's')!r}, port={port})"
    proc = subprocess.Popen([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        for _ in range(600):
            try: socket.create_connection(("127.0.0.1", port), timeout=0.2).close(); break
            except OSError: time.sleep(0.1)
        url = f"http://127.0.0.1:{port}"
        st, a = post(f"{url}/memories", {"text": DECISION, "kind": "decision", "entities": ["Dana"]})
        assert st == 201
        _, b = post(f"{url}/memories", {"text": CHATTER, "kind": "episode", "entities": ["Dana"]})
        _, s1 = post(f"{url}/search", {"query": QUESTION, "k": 2})
        _, fb = post(f"{url}/feedback", {"cited": [a["id"]], "search_id": s1["search_id"]})
        _, s2 = post(f"{url}/search", {"query": QUESTION, "k": 2})
        assert [h["id"] for h in s1["hits"]] == [b["id"], a["id"]] and [h["id"] for h in s2["hits"]] == [a["id"], b["id"]]
        with urllib.request.urlopen(f"{url}/docs", timeout=30) as r: assert b"/feedback" in r.read()
        with pytest.raises(urllib.error.HTTPError) as e: post(f"{url}/search", {"query": "x", "k": 0})
        assert e.value.code == 422
    finally:
        proc.terminate()
        proc.wait(30)
    with MemoryStore(tmp_path / "s", readonly=True) as s:  # the server closed the store cleanly; the learner was saved
        assert len(s) == 2 and s.stats()["feedback"] == 1 and s.stats()["learner"]


def test_base_install_without_any_extra(tmp_path):
    "earmem, its command line and the memory store work with none of mcp, fastapi, uvicorn, langchain, llama-index."
    code = ("import sys\n"
            "for m in ('mcp', 'fastapi', 'uvicorn', 'starlette', 'langchain_core', 'llama_index'): sys.modules[m] = None\n"
            "import earmem, earmem.cli, earmem.memory.store.operations, earmem.serve.mcp, earmem.serve.frameworks\n"
            "from earmem.cli import main\n"
            f"store = {str(tmp_path / 's')!r}\n"
            "main(['memory', 'add', '--store', store, '--encoder', 'hashing', '--kind', 'fact', 'Dana picked Postgres'])\n"
            "main(['memory', 'search', '--store', store, 'Dana picked Postgres'])\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "Dana picked Postgres" in r.stdout
