"""Issue 40: the metadata filter's operators mean the same everywhere. Hypothesis draws random metadata and random
filters; the SQLite store's search and list, and PostgreSQL's search and list, must return exactly the memories the
reference matcher `metadata_matches` accepts. Then the malformed-filter matrix at every door: ValueError in Python,
422 over HTTP, isError over MCP."""
import uuid

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from earmem.memory.rules.hygiene import DAY, HashingEncoder, StoreConfig
from earmem.memory.rules.metadata_filter import FILTER_OPERATORS, FilterError, check_metadata_filter, metadata_matches
from earmem.memory.store import MemoryStore
from earmem.memory.store.agent_view import MemoryTools

KEYS = ["a", "b", "c"]
POOL = [None, True, False, 0, 1, -2, 1.0, 0.5, 2.0, "", "x", "xy", "X", "1", "é", "2026-03-04", "2026-03-04T10:00:00Z", "2026-05-01"]
scalars = st.one_of(st.sampled_from(POOL), st.integers(-3, 3), st.sampled_from([-1.5, "yx", "2026-04"]))
values = st.one_of(scalars, st.lists(scalars, max_size=3), st.fixed_dictionaries({"x": scalars}))
metas = st.dictionaries(st.sampled_from(KEYS), values, max_size=3)


def leaf():
    order = st.one_of(st.integers(-3, 3), st.sampled_from([0.5, 1.5]), st.sampled_from(["", "x", "y", "2026-03-04", "2026-04"]))
    op = st.sampled_from(FILTER_OPERATORS).flatmap(lambda o: st.builds(lambda v: {o: v},
        st.booleans() if o == "$exists" else st.lists(scalars, min_size=1, max_size=3) if o in ("$in", "$nin")
        else order if o in ("$gt", "$gte", "$lt", "$lte") else scalars))
    return st.dictionaries(st.sampled_from(KEYS), st.one_of(scalars, op, op), min_size=1, max_size=1)


filters = st.recursive(leaf(), lambda inner: st.one_of(
    st.builds(lambda fs: {"$and": fs}, st.lists(inner, min_size=1, max_size=3)),
    st.builds(lambda fs: {"$or": fs}, st.lists(inner, min_size=1, max_size=3)),
    st.builds(lambda f: {"$not": f}, inner),
    st.builds(lambda f, g: {**f, "$or": [g]}, leaf(), inner)), max_leaves=6)

N = 40   # memories in the fixed population the filters run over


def population():
    "A fixed random population (drawn once, seeded) plus the edge cases: no metadata, nulls, lists, nested dicts, dates."
    import random
    rng = random.Random(40)
    pick = POOL
    out = [{}, {"a": None}, {"a": [1, "x"]}, {"a": {"x": 1}}, {"b": "2026-03-04"}, {"c": ["2026-04"]}]
    while len(out) < N:
        out.append({k: (rng.choice(pick) if rng.random() < .8 else rng.sample(pick, rng.randint(0, 3))) for k in KEYS if rng.random() < .7})
    return out


def fill(store, metas):
    "One memory per metadata dict, texts far apart (no dedupe); their ids in order."
    words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo", "lima"]
    return [store.add(f"note {i} {words[i % 12]} {words[(i * 5 + 3) % 12]} {i * 7919}", "fact", [], metadata=m,
                      timestamp=1.7e9 + i * DAY).id for i, m in enumerate(metas)]


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def loaded(request, tmp_path_factory):
    "(store, tools, ids, metadata) of the fixed population on each backend."
    where, ns = (tmp_path_factory.mktemp("mf") / "store", "default") if request.param == "sqlite" else \
        (request.getfixturevalue("pg_url"), f"t-{uuid.uuid4().hex[:12]}")
    store = MemoryStore(str(where), encoder=HashingEncoder(64), namespace=ns, config=StoreConfig(min_relevance=-1.0, dedupe_threshold=1.0))
    metas = population()
    ids = fill(store, metas)
    assert len(set(ids)) == N and len(store.search("note", k=N).ids) == N   # every memory its own, active row
    yield store, MemoryTools(store), ids, metas
    store.close()


def expected(ids, metas, flt):
    return sorted(i for i, m in zip(ids, metas) if metadata_matches(m, check_metadata_filter(flt)))


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(flt=filters)
def test_search_and_list_return_exactly_what_the_matcher_accepts(loaded, flt):
    store, tools, ids, metas = loaded
    want = expected(ids, metas, flt)
    assert sorted(store.search("note", k=N, filters={"metadata": flt}).ids) == want, flt
    assert sorted(m["id"] for m in tools.list(limit=N, metadata=flt)["memories"]) == want, flt
    k = 3   # k stays exact: the first k of a filtered search are all passing rows, as many as there are up to k
    got = store.search("note", k=k, filters={"metadata": flt}).ids
    assert len(got) == min(k, len(want)) and set(got) <= set(want), flt


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(ms=st.lists(metas, min_size=1, max_size=6), flt=filters)
def test_random_metadata_on_a_fresh_sqlite_store(tmp_path_factory, ms, flt):
    store = MemoryStore(str(tmp_path_factory.mktemp("mf1") / "s"), encoder=HashingEncoder(64),
                        config=StoreConfig(min_relevance=-1.0, dedupe_threshold=1.0))
    ids = fill(store, ms)
    assert sorted(store.search("note", k=10, filters={"metadata": flt}).ids) == expected(ids, ms, flt), (ms, flt)
    store.close()


BAD = [({"n": {"$regex": "a"}}, "metadata['n']: unknown operator '$regex'"), ({"n": {"$in": []}}, "metadata['n']['$in']: expected a non-empty list"),
       ({"n": {"$gt": [1]}}, "metadata['n']['$gt']: expected a number or a string"), ({"n": {"$exists": "yes"}}, "expected true or false"),
       ({"$xor": [{"a": 1}]}, "metadata['$xor']: unknown combinator"), ({"n": {"$eq": 1, "$ne": 2}}, "exactly one of"),
       ({"$not": {"$not": {"$not": {"$not": {"$not": {"$not": {"$not": {"$not": {"$not": {"a": 1}}}}}}}}}}, "nested more than 8 levels"),
       ({"n": {"$in": list(range(300))}}, "more than 256 conditions")]


@pytest.mark.parametrize("bad,says", BAD)
def test_a_malformed_filter_is_a_named_value_error(tmp_path, bad, says):
    with pytest.raises(ValueError, match=says.replace("[", r"\[").replace("$", r"\$")):
        check_metadata_filter(bad)
    store = MemoryStore(str(tmp_path / "s"), encoder=HashingEncoder(64))
    for call in (lambda: store.search("x", filters={"metadata": bad}), lambda: MemoryTools(store).search("x", filter={"metadata": bad}),
                 lambda: MemoryTools(store).search("x", metadata=bad), lambda: MemoryTools(store).list(metadata=bad)):
        with pytest.raises(FilterError) as e:
            call()
        assert says in str(e.value) and isinstance(e.value, ValueError)
    store.close()


def test_a_malformed_filter_is_422_over_http(tmp_path):
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient
    from earmem.serve.http import create_app
    client = TestClient(create_app(MemoryStore(str(tmp_path / "s"), encoder=HashingEncoder(64), config=StoreConfig(min_relevance=-1.0))))
    client.post("/memories", json={"text": "orders run on Postgres", "kind": "fact", "metadata": {"n": 3, "day": "2026-03-04"}})
    for bad, says in BAD:
        r = client.post("/search", json={"query": "orders", "metadata": bad})
        assert r.status_code == 422 and says in r.json()["error"], (bad, r.status_code, r.json())
    r = client.get("/memories", params={"metadata": '{"n": {"$in": []}}'})
    assert r.status_code == 422 and "metadata['n']['$in']" in r.json()["error"], r.json()
    assert len(client.post("/search", json={"query": "orders", "metadata": {"n": {"$gte": 2}, "day": {"$lt": "2026-04"}}}).json()["hits"]) == 1
    assert client.post("/search", json={"query": "orders", "metadata": {"$not": {"n": {"$lt": 5}}}}).json()["hits"] == []
    assert client.get("/memories", params={"metadata": '{"n": {"$exists": true}}'}).json()["total"] == 1


def test_a_malformed_filter_is_an_error_over_mcp(tmp_path):
    pytest.importorskip("mcp")
    import anyio, json
    from mcp.client import Client
    from earmem.serve.mcp import build_mcp_server
    server = build_mcp_server(MemoryStore(str(tmp_path / "s"), encoder=HashingEncoder(64), config=StoreConfig(min_relevance=-1.0)))

    async def go():
        async with Client(server) as c:
            await c.call_tool("add", {"text": "orders run on Postgres", "kind": "fact", "metadata": {"n": 3}})
            for bad, says in BAD:
                for tool in ("search", "list"):
                    res = await c.call_tool(tool, {"query": "orders", "metadata": bad} if tool == "search" else {"metadata": bad})
                    assert res.is_error and says in json.loads(res.content[0].text)["error"], (tool, bad, res.content[0].text)
            res = await c.call_tool("search", {"query": "orders", "metadata": {"n": {"$in": [1, 3]}}})
            assert not res.is_error and len(json.loads(res.content[0].text)["hits"]) == 1
    anyio.run(go)
