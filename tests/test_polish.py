"Issue 20/21 polish: kind optional on every door, bounded unauthenticated feedback, idempotent feedback, read-only named, migrate keeps the probe."
import anyio, json, pytest
pytest.importorskip("fastapi"); pytest.importorskip("mcp")
from fastapi.testclient import TestClient
from earmem.memory.store.agent_view import MemoryTools
from earmem.memory.rules.hygiene import HashingEncoder
from earmem.memory.store import MemoryStore
from earmem.memory.service.users import StorePool
from earmem.serve.http import create_app
from earmem.serve.mcp import build_mcp_server

@pytest.fixture
def pool(tmp_path):
    with StorePool(tmp_path / "mem", encoder=HashingEncoder(64)) as p: yield p

def test_store_and_tools_add_without_kind(tmp_path):
    with MemoryStore(tmp_path / "s", encoder=HashingEncoder(64)) as s:
        assert s.get(s.add("Actually, the standup is at 3pm not 4pm").id).kind == "correction"
        t = MemoryTools(s)
        out = t.call("add", {"text": "I prefer aisle seats"})
        assert "error" not in out and s.get(out["id"]).kind == "preference"
        assert t.call("add", {"kind": "fact"}) == {"error": "text: is required by add"}

def test_http_add_without_kind(pool):
    c = TestClient(create_app(pool))
    r = c.post("/memories", json={"user_id": "dana", "text": "The team standup is at 4pm on weekdays"})
    assert r.status_code == 201, r.text
    assert c.get(f"/memories/{r.json()['id']}", params={"user_id": "dana"}).json()["kind"] == "fact"

def test_mcp_add_without_kind(pool):
    server = build_mcp_server(pool)
    tool = server._tool_manager.get_tool("add")
    assert tool.parameters["required"] == ["text"]
    out = anyio.run(tool.run, {"user_id": "dana", "text": "Looked through the deploy logs"})
    assert pool.store("dana").get(out["id"]).kind == "observation"

def test_repair_keeps_a_rollback(tmp_path):
    import warnings
    from earmem.memory.store.trust import feed_stream, hit_at_k, poison_store
    warnings.simplefilter("ignore")
    s, Q, right = poison_store(tmp_path / "p", lr=1e-2)
    feed_stream(s, Q, right, 6, "honest")
    before = s.search(Q[:1], k=5).ids
    feed_stream(s, Q, right, 10, "poison")
    out = s.rollback(to=6)
    assert out["ignored"] == 10 and s.manifest["rolled_back"] == [[7, 16]]
    rolled = s.search(Q[:1], k=5).ids
    rep = s.repair()
    assert (rep["feedback"], rep["replayed"]) == (6, 6) and s.search(Q[:1], k=5).ids == rolled
    s.feedback(s.search(Q[1:2], k=5), cited=[right[1]])          # feedback after the rollback is learned
    s.close()
    with MemoryStore(tmp_path / "p") as again:                   # the range survives a restart
        assert again.manifest["rolled_back"] == [[7, 16]] and again.repair()["feedback"] == 7

def test_server_pools_guard_unauthenticated_feedback(tmp_path, monkeypatch):
    from earmem.memory.store.trust import Guard, server_guard
    monkeypatch.delenv("EARMEM_FEEDBACK_GUARD", raising=False)
    with StorePool(tmp_path / "m", encoder=HashingEncoder(32), on_open=server_guard(authenticated=False)) as p:
        assert p.store("dana").guard == Guard() and p.store("bo").guard == Guard()
    with StorePool(tmp_path / "m", encoder=HashingEncoder(32), on_open=server_guard(authenticated=True)) as p:
        assert p.store("dana").guard is None
    monkeypatch.setenv("EARMEM_FEEDBACK_GUARD", "on")
    with StorePool(tmp_path / "m", encoder=HashingEncoder(32), on_open=server_guard(authenticated=True)) as p:
        assert p.store("dana").guard == Guard()

def test_read_only_file_system_is_named_read_only(tmp_path):
    import sqlite3
    from unittest import mock
    import earmem.memory.backends.sqlite as sq
    with MemoryStore(tmp_path / "s", encoder=HashingEncoder(32)) as s: s.add("Dana picked Postgres", "decision")
    real = sq.SQLiteBackend._connect
    def readonly_fs(self, p):  # what a read-write open meets on a read-only mount (root ignores chmod, so simulated)
        real(self, p); raise sqlite3.OperationalError("attempt to write a readonly database")
    with mock.patch.object(sq.SQLiteBackend, "_connect", readonly_fs), pytest.raises(PermissionError) as e:
        MemoryStore(tmp_path / "s", encoder=HashingEncoder(32))
    assert "read-only" in str(e.value) and "corrupt" not in str(e.value)
    with MemoryStore(tmp_path / "s", encoder=HashingEncoder(32), readonly=True) as r: assert len(r) == 1

def test_migrate_keeps_the_encoder_fingerprint(tmp_path):
    from earmem.memory.service.migrate import migrate_store
    with MemoryStore(tmp_path / "a", encoder=HashingEncoder(32)) as a: a.add("Dana picked Postgres", "decision"); probe = a.manifest["probe"]
    migrate_store(tmp_path / "a", tmp_path / "b")
    with MemoryStore(tmp_path / "b") as b: assert b.manifest["probe"] == probe and probe

def _seed(store):
    store.add("Dana chose Postgres for orders", "decision"); store.add("Lee prefers tea", "preference")

def test_feedback_request_id_survives_a_restart(tmp_path):
    with MemoryStore(tmp_path / "s", encoder=HashingEncoder(32)) as s:
        _seed(s); t = MemoryTools(s)
        sid = t.call("search", {"query": "what did Dana choose?"})["search_id"]
        first = t.call("feedback", {"cited": ["m1"], "search_id": sid, "request_id": "r-1"})
        assert first["duplicate"] is False and s.stats()["feedback"] == 1
    with MemoryStore(tmp_path / "s", encoder=HashingEncoder(32)) as s:      # a new process: the search is gone, the id is not
        again = MemoryTools(s).call("feedback", {"cited": ["m1"], "search_id": sid, "request_id": "r-1"})
        assert again["duplicate"] is True and again["labels"] == first["labels"] and s.stats()["feedback"] == 1

def test_feedback_request_id_on_http_and_mcp(pool):
    c = TestClient(create_app(pool))
    c.post("/memories", json={"user_id": "dana", "text": "Dana chose Postgres for orders", "kind": "decision"})
    sid = c.post("/search", json={"user_id": "dana", "query": "what did Dana choose?", "min_relevance": -1}).json()["search_id"]
    body = {"user_id": "dana", "cited": ["m1"], "search_id": sid, "request_id": "h-1"}
    a, b = c.post("/feedback", json=body), c.post("/feedback", json=body)
    assert a.status_code == b.status_code == 200, (a.text, b.text)
    assert (a.json()["duplicate"], b.json()["duplicate"], pool.store("dana").stats()["feedback"]) == (False, True, 1)
    server = build_mcp_server(pool)
    search, feedback = (server._tool_manager.get_tool(n) for n in ("search", "feedback"))
    sid = anyio.run(search.run, {"user_id": "dana", "query": "Postgres", "min_relevance": -1})["search_id"]
    args = {"user_id": "dana", "cited": ["m1"], "search_id": sid, "request_id": "m-1"}
    outs = [anyio.run(feedback.run, args) for _ in range(2)]
    assert [o["duplicate"] for o in outs] == [False, True] and pool.store("dana").stats()["feedback"] == 2

def test_feedback_request_id_on_postgres(pg_url):
    import uuid
    ns = "req" + uuid.uuid4().hex[:8]
    with MemoryStore(pg_url, encoder=HashingEncoder(64), namespace=ns) as s:
        _seed(s); t = MemoryTools(s)
        sid = t.call("search", {"query": "what did Dana choose?"})["search_id"]
        first = t.call("feedback", {"cited": ["m1"], "search_id": sid, "request_id": "p-1"})
    with MemoryStore(pg_url, encoder=HashingEncoder(64), namespace=ns) as s:
        again = MemoryTools(s).call("feedback", {"cited": ["m1"], "search_id": sid, "request_id": "p-1"})
        assert (first["duplicate"], again["duplicate"], again["labels"], s.stats()["feedback"]) == (False, True, first["labels"], 1)
