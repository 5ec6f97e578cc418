"""Issue 36: every memory knows when it held. A fact that changed twice, asked at several times through every door
(the store on both backends, the tool layer's search / list / inject, HTTP, MCP, the CLI, the LangChain and LlamaIndex
retrievers); an old store (no `valid_to` stamped) answers the same; `history` shows the chain from any version."""
import json, uuid
import anyio, pytest
from hypothesis import given, settings, strategies as st
from earmem.memory import MemoryStore
from earmem.memory.rules.hygiene import HashingEncoder, StoreConfig, iso, to_epoch
from earmem.memory.store.agent_view import MemoryTools

TIMELINE = [("Ana lives in Paris", "2024-01-10"), ("Ana lives in Berlin", "2025-03-01"), ("Ana lives in Rome", "2026-06-01")]
# (as_of, the one place that held then); None = before anything was known
ASKED = [("2023-12-31", None), ("2024-01-10T00:00:00Z", "Paris"), ("2024-06-01", "Paris"), ("2025-02-28T23:59:59Z", "Paris"),
         ("2025-03-01", "Berlin"), ("2026-05-31", "Berlin"), ("2026-06-01", "Rome"), ("2026-12-01", "Rome")]
QUESTION = "where does Ana live"


def _fill(s):
    rs = [s.add(t, timestamp=at) for t, at in TIMELINE]
    assert [r.action for r in rs] == ["inserted", "updated", "updated"], rs
    return rs


def _place(texts) -> str | None:
    found = [p for p in ("Paris", "Berlin", "Rome") for t in texts if p in t]
    assert len(found) <= 1, texts   # exactly one version of the fact held at any time
    return found[0] if found else None


@pytest.fixture
def store(tmp_path):
    s = MemoryStore(tmp_path / "s", encoder=HashingEncoder(64), config=StoreConfig(min_relevance=-1))
    _fill(s)
    yield s
    s.close()


@pytest.mark.parametrize("at,place", ASKED)
def test_store_search_as_of(store, at, place):
    hits = store.search(QUESTION, k=5, as_of=at)
    assert _place([h.text for h in hits]) == place
    for h in hits:   # each hit held at that time by its own window
        assert to_epoch(h.valid_from, "v") <= to_epoch(at, "t") and (h.valid_to is None or to_epoch(h.valid_to, "v") > to_epoch(at, "t"))


@pytest.mark.parametrize("at,place", ASKED)
def test_tool_layer_search_list_inject_as_of(store, at, place):
    t = MemoryTools(store)
    assert _place([h["text"] for h in t.search(QUESTION, as_of=at)["hits"]]) == place
    assert _place([m["text"] for m in t.list(as_of=at)["memories"]]) == place
    assert _place(t.inject(QUESTION, as_of=at)["text"].splitlines()) == place


def test_records_carry_their_window(store):
    p, b, r = (store.get(i) for i in store._chain("m3"))
    assert (p.valid_from, p.valid_to, b.valid_to, r.valid_to) == ("2024-01-10T00:00:00Z", "2025-03-01T00:00:00Z", "2026-06-01T00:00:00Z", None)
    assert [(e["id"], e["action"]) for e in store.history(r.id)] == [
        (p.id, "insert"), (b.id, "insert"), (p.id, "supersede"), (r.id, "insert"), (b.id, "supersede")]
    assert store.history(p.id) == store.history(b.id) == store.history(r.id)
    assert json.loads(json.dumps(MemoryTools(store).get(p.id)))["valid_to"] == "2025-03-01T00:00:00Z"


def test_a_store_before_valid_to_answers_the_same(store):
    "An old store has only the superseded_by link: its end is read as the replacement's time of formation."
    b = store._backend
    with store._write() as rev:
        rows = [(mid, (json.dumps({k: v for k, v in json.loads(b.row(mid).metadata).items() if k != "valid_to"}),)) for mid in ("m1", "m2")]
        b.update_many(("metadata",), rows, rev)
    store.close()
    old = MemoryStore(store.path, encoder=HashingEncoder(64))
    try:
        assert "valid_to" not in old.get("m1").metadata and old.get("m1").valid_to == "2025-03-01T00:00:00Z"
        for at, place in ASKED: assert _place([h.text for h in old.search(QUESTION, k=5, as_of=at, min_relevance=-1)]) == place, at
    finally: old.close()


def test_retracted_never_held(store):
    x = store.add("Ana lives in Oslo", timestamp="2024-02-01")   # Paris → Oslo: an update of the fact as it stood
    store.retract(x.id, reason="never true")
    assert all("Oslo" not in h.text for at, _ in ASKED for h in store.search(QUESTION, k=5, as_of=at))


@settings(max_examples=40, deadline=None)
@given(st.floats(min_value=to_epoch("2023-01-01", "t"), max_value=to_epoch("2027-12-31", "t")))
def test_any_time_holds_at_most_one_version(tmp_path_factory, t):
    s = _shared_store(tmp_path_factory)
    got = _place([h.text for h in s.search(QUESTION, k=5, as_of=t)])
    want = None
    for text, at in TIMELINE:
        if to_epoch(at, "t") <= t: want = text.split()[-1]
    assert got == want


_SHARED = {}
def _shared_store(factory):
    if "s" not in _SHARED:
        _SHARED["s"] = s = MemoryStore(factory.mktemp("prop") / "s", encoder=HashingEncoder(64), config=StoreConfig(min_relevance=-1))
        _fill(s)
    return _SHARED["s"]


@pytest.mark.parametrize("at", ["yesterday-ish", "", 1e20, True])
def test_bad_as_of_is_named(store, at):
    with pytest.raises((ValueError, TypeError), match="as_of"): store.search(QUESTION, as_of=at)


def test_postgres_as_of(pg_url):
    s = MemoryStore(pg_url, encoder=HashingEncoder(64), namespace="asof" + uuid.uuid4().hex[:8], config=StoreConfig(min_relevance=-1))
    try:
        _fill(s)
        for at, place in ASKED: assert _place([h.text for h in s.search(QUESTION, k=5, as_of=at)]) == place, at
        assert s.get("m1").valid_to == "2025-03-01T00:00:00Z"
        with s._write() as rev:   # an old namespace: the end comes from the replacement's row, in SQL
            s._backend.update_many(("metadata",), [("m1", (json.dumps({"superseded_by": "m2"}),))], rev)
        for at, place in ASKED: assert _place([h.text for h in s.search(QUESTION, k=5, as_of=at)]) == place, at
    finally: s.close()


# ------------------------------------------------------------------------------------------------------------ the doors
@pytest.fixture
def pool(tmp_path):
    from earmem.memory.service.users import StorePool
    with StorePool(tmp_path / "mem", encoder=HashingEncoder(64), config=StoreConfig(min_relevance=-1)) as p:
        _fill(p.store("ana"))
        yield p


@pytest.mark.parametrize("at,place", ASKED[::2])
def test_http_as_of(pool, at, place):
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient
    from earmem.serve.http import create_app
    c = TestClient(create_app(pool))
    r = c.post("/search", json={"user_id": "ana", "query": QUESTION, "as_of": at})
    assert r.status_code == 200, r.text
    assert _place([h["text"] for h in r.json()["hits"]]) == place
    assert _place(c.post("/inject", json={"user_id": "ana", "query": QUESTION, "as_of": at}).json()["text"].splitlines()) == place
    assert _place([m["text"] for m in c.get("/memories", params={"user_id": "ana", "as_of": at}).json()["memories"]]) == place
    assert c.post("/search", json={"user_id": "ana", "query": QUESTION, "as_of": "soon"}).status_code == 400


@pytest.mark.parametrize("at,place", ASKED[1::2])
def test_mcp_as_of(pool, at, place):
    pytest.importorskip("mcp")
    from earmem.serve.mcp import build_mcp_server
    server = build_mcp_server(pool)
    out = anyio.run(server._tool_manager.get_tool("search").run, {"user_id": "ana", "query": QUESTION, "as_of": at})
    assert _place([h["text"] for h in out["hits"]]) == place
    assert "as_of" in server._tool_manager.get_tool("search").parameters["properties"]


@pytest.mark.parametrize("at,place", ASKED[::3])
def test_cli_as_of(tmp_path, capsys, at, place):
    from earmem.cli import main
    s = MemoryStore(tmp_path / "s", encoder=HashingEncoder(64), config=StoreConfig(min_relevance=-1)); _fill(s); s.close()
    assert main(["memory", "search", QUESTION, "-s", str(tmp_path / "s"), "--as-of", at, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert _place([h["text"] for h in out["hits"]]) == place and out["filters"]["as_of"] == at


def test_retrievers_as_of(store):
    pytest.importorskip("langchain_core"); pytest.importorskip("llama_index.core")
    from earmem.serve.frameworks import langchain_retriever, llamaindex_retriever
    for at, place in ASKED:
        docs = langchain_retriever(store, k=5, as_of=at).invoke(QUESTION)
        assert _place([d.page_content for d in docs]) == place, at
        nodes = llamaindex_retriever(store, k=5, as_of=at).retrieve(QUESTION)
        assert _place([n.node.get_content() for n in nodes]) == place, at
