"""Many users, one process (earmem.memory.service.users, the tool layer's scopes): user A never sees user B's memories through
any door — Python (StorePool / UserTools), HTTP (TestClient), MCP (the SDK's in-memory client), the command line —
on a folder and on PostgreSQL; delete-all is audited; the async API; and (slow) the two-server transcript."""
import asyncio
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from earmem.memory.store.agent_view import tools_for
from earmem.memory.rules.hygiene import HashingEncoder, StoreConfig
from earmem.memory.store import MemoryStore
from earmem.memory.service.users import AsyncMemoryStore, StorePool, list_namespaces

ROOT = Path(__file__).resolve().parents[1]
CFG = StoreConfig(min_relevance=-1.0)  # every memory clears the floor: a search returns all of a user's memories
NOTES = {"ana": ["Ana's team deploys billing on Tuesdays", "Ana prefers tea"], "bo": ["Bo's team deploys search on Fridays"]}


def fill(t):
    "Add NOTES through the tool layer `t`; returns {user: [ids]}."
    return {u: [t.run("add", {"user_id": u, "text": x, "kind": "fact"})["id"] for x in xs] for u, xs in NOTES.items()}


def assert_isolated(texts_of):
    "`texts_of(user)` -> the texts that user sees; each sees exactly their own."
    for u, xs in NOTES.items(): assert sorted(texts_of(u)) == sorted(xs), u


@pytest.fixture(params=["sqlite", "postgres"])
def where(request, tmp_path):
    if request.param == "sqlite": return str(tmp_path / "team")
    return request.getfixturevalue("pg_url")


def test_python_door(where):
    prefix = uuid.uuid4().hex[:6]                   # PostgreSQL namespaces are shared by the tests of one server
    users = {u: f"{prefix}-{u}" for u in NOTES}
    with StorePool(where, encoder=HashingEncoder(64), config=CFG) as pool:
        t = tools_for(pool)
        ids = {u: [t.run("add", {"user_id": users[u], "text": x, "kind": "fact"})["id"] for x in xs] for u, xs in NOTES.items()}
        assert ids["ana"][0] == ids["bo"][0] == "m1"                       # ids are per user
        assert_isolated(lambda u: [h["text"] for h in t.run("search", {"user_id": users[u], "query": "team deploys", "k": 10})["hits"]])
        assert_isolated(lambda u: [m["text"] for m in t.run("list", {"user_id": users[u]})["memories"]])
        assert {users["ana"], users["bo"]} <= set(list_namespaces(where)) and {users["ana"], users["bo"]} <= set(pool.namespaces())
        assert pool.clear(users["ana"], reason="gone") == {"user_id": users["ana"], "deleted": 2}
        assert (len(pool.store(users["ana"])), len(pool.store(users["bo"]))) == (0, 1)
        assert pool.store(users["ana"]).history("m1")[-1]["detail"] == {"cleared": True, "reason": "gone"}
        assert pool.store(users["ana"]).encoder is pool.store(users["bo"]).encoder   # one encoder for every user


def test_http_door(tmp_path):
    pytest.importorskip("fastapi"); pytest.importorskip("httpx")
    from fastapi.testclient import TestClient
    from earmem.serve.http import create_app
    c = TestClient(create_app(StorePool(tmp_path / "team", encoder=HashingEncoder(64), config=CFG)))
    for u, xs in NOTES.items():
        for x in xs: assert c.post("/memories", json={"user_id": u, "text": x, "kind": "fact"}).status_code == 201
    assert_isolated(lambda u: [h["text"] for h in c.post("/search", json={"user_id": u, "query": "team", "k": 10}).json()["hits"]])
    assert_isolated(lambda u: [m["text"] for m in c.get("/memories", params={"user_id": u}).json()["memories"]])
    page = c.get("/memories", params={"user_id": "ana", "limit": 1}).json()
    assert (page["total"], page["next_offset"], len(c.get("/memories", params={"user_id": "ana", "offset": 1}).json()["memories"])) == (2, 1, 1)
    assert c.get("/memories/m2", params={"user_id": "bo"}).status_code == 404     # ana's m2 is not bo's
    for bad in ({"userid": "bo"}, {"user_id": "bo", "colour": "red"}):
        r = c.get("/memories", params=bad)
        assert r.status_code == 422 and set(r.json()) == {"error"}
    assert c.delete("/memories", params={"user_id": "bo"}).json() == {"user_id": "bo", "deleted": 1}
    assert c.get("/memories", params={"user_id": "ana"}).json()["total"] == 2


def test_mcp_door(tmp_path):
    pytest.importorskip("mcp")
    import anyio
    from mcp.client import Client
    from earmem.serve.mcp import build_mcp_server
    server = build_mcp_server(StorePool(tmp_path / "team", encoder=HashingEncoder(64), config=CFG))

    async def go():
        async with Client(server) as c:
            call = lambda n, a: c.call_tool(n, a)
            j = lambda r: json.loads(r.content[0].text)
            for u, xs in NOTES.items():
                for x in xs: await call("add", {"user_id": u, "text": x, "kind": "fact"})
            seen = {u: [h["text"] for h in j(await call("search", {"user_id": u, "query": "team", "k": 10}))["hits"]] for u in NOTES}
            listed = {u: [m["text"] for m in j(await call("list", {"user_id": u}))["memories"]] for u in NOTES}
            errors = [j(await call(n, a)) for n, a in (("get", {"id": "m1", "userid": "bo"}), ("nonexistent", {}), ("users", {"user_id": "x"}))]
            return seen, listed, errors, j(await call("clear", {"user_id": "bo"})), j(await call("users", {}))
    seen, listed, errors, cleared, users = anyio.run(go)
    assert_isolated(lambda u: seen[u]); assert_isolated(lambda u: listed[u])
    assert [set(e) for e in errors] == [{"error"}] * 3 and errors[1]["error"].startswith("name: unknown tool 'nonexistent'")
    assert cleared == {"user_id": "bo", "deleted": 1} and users == {"users": ["default", "ana", "bo"]}


def test_cli_door(tmp_path, capsys):
    from earmem.cli import main
    store = str(tmp_path / "team")
    MemoryStore(store, encoder=HashingEncoder(64), config=CFG).close()
    def run(*a):
        code = main(["memory", *a, "-s", store])
        out = capsys.readouterr()
        return code, out.out, out.err
    for u, xs in NOTES.items():
        for x in xs: assert run("add", x, "--kind", "fact", "--user", u)[0] == 0
    assert_isolated(lambda u: [m["text"] for m in json.loads(run("list", "--user", u, "--json")[1])["memories"]])
    assert run("users")[1].split() == ["default", "ana", "bo"]
    code, _, err = run("clear", "--user", "bo")                         # no terminal to confirm on
    assert code == 2 and "pass --yes to confirm" in err
    assert run("clear", "--user", "bo", "--yes")[1].strip() == "erased 1 memories of user 'bo'"
    assert json.loads(run("list", "--user", "ana", "--json")[1])["total"] == 2


def test_pinned_server_refuses_other_users(tmp_path):
    pool = StorePool(tmp_path / "team", encoder=HashingEncoder(64), namespace="ana")
    t = tools_for(pool)
    assert t.run("add", {"text": "Ana prefers tea", "kind": "preference"})["id"] == "m1"   # no user_id: the pinned user
    assert t.call("list", {"user_id": "bo"}) == {"error": "user_id: this server serves user 'ana' only; got 'bo'"}
    assert t.run("users") == {"users": ["ana"]}
    pool.close()


def test_async_store(tmp_path):
    async def session():
        async with AsyncMemoryStore(tmp_path / "s", encoder=HashingEncoder(64), config=CFG) as mem:
            await asyncio.gather(*(mem.add(f"note {i} about the billing deploy", "episode") for i in range(6)))
            hits, listed = await asyncio.gather(mem.search("billing deploy", k=3), mem.call("list", {"limit": 4}))
            await mem.feedback(hits, cited=[hits[0].id])
            return len(hits), listed["total"], listed["next_offset"], (await mem.stats())["feedback"], await mem.call("get", {"id": "m99"})
    assert asyncio.run(session()) == (3, 6, 4, 1, {"error": "id: no memory 'm99' in " + str(tmp_path / "s")})


@pytest.mark.slow
def test_two_servers_transcript():
    "tools/two_users.py: one `earmem serve http` and one `earmem serve mcp` process serving two users (hashing encoder)."
    out = subprocess.run([sys.executable, "tools/two_users.py", "--encoder", "hashing"], capture_output=True, text=True, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=900)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert out.stdout.strip().endswith("all isolation checks passed") and "FAILED" not in out.stdout
