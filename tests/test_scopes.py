"""agent_id / run_id first-class (issue 40, chapter 23dy): a generated matrix of operations × scopes × filters on both
backends (the contract suite's `loc` fixture: a store folder, and a fresh namespace of a PostgreSQL server), a
property-based check that a delete-by removes exactly its scope, and the doors (HTTP, MCP, the tool layer) agreeing
with Python: the same lists and hits on one store, and a delete-by at each door erasing what Python's delete_all erases."""
import itertools, json, uuid

import anyio
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st_

from earmem.memory.rules.hygiene import ScopeError
from test_contract import Location, loc  # noqa: F401  (the fixture: [sqlite] and [postgres])

AGENTS, RUNS = ["planner", "coder", None], ["r1", "r2", None]
SCOPES = {"agent": {"agent_id": "planner"}, "run": {"run_id": "r1"}, "both": {"agent_id": "coder", "run_id": "r2"}, "none": {}}
FILTERS = {"unfiltered": None, "filtered": {"metadata": {"n": {"$gte": 4}}}}


def fill(st):
    "Nine memories, one for each (agent, run) pair, with metadata n = 0..8; their (id, agent, run, n)."
    out = []
    for n, (a, r) in enumerate(itertools.product(AGENTS, RUNS)):
        res = st.add(f"note {n}: the {a or 'nobody'} worked on item {n * 7} in {r or 'no run'}", kind="fact", agent_id=a, run_id=r, metadata={"n": n})
        out.append((res.id, a, r, n))
    return out


def expected(rows, scope: dict, flt) -> list:
    "Ids of `rows` in `scope` passing the test filter `flt`, in insertion order."
    return [i for i, a, r, n in rows if scope.get("agent_id", a) == a and scope.get("run_id", r) == r and (flt is None or n >= 4)]


@pytest.mark.parametrize("op, scope, flt", list(itertools.product(["search", "list", "delete_all"], SCOPES, FILTERS)))
def test_scope_matrix(loc, op, scope, flt):
    st = loc.open(); rows = fill(st)
    want, kw = expected(rows, SCOPES[scope], FILTERS[flt]), {**SCOPES[scope], **({"filters": FILTERS[flt]} if FILTERS[flt] else {})}
    if op == "search": assert sorted(st.search("which item was worked on", k=20, **kw).ids) == sorted(want)
    elif op == "list": assert [r.id for r in st.list(**kw)] == want
    elif not kw:
        with pytest.raises(ValueError, match="give at least one"): st.delete_all()
        assert len(st) == len(rows)
    else:
        assert st.delete_all(**kw)["ids"] == want
        assert [r.id for r in st.list()] == [i for i, *_ in rows if i not in want]
        assert all(i not in st for i in want)
    st.close()


@pytest.mark.parametrize("scope", list(SCOPES))
def test_add_keeps_the_scope_as_metadata(loc, scope):
    st = loc.open()
    r = st.add("the release is on Thursday", kind="fact", metadata={"k": 1}, **SCOPES[scope])
    assert st.get(r.id).metadata == {"k": 1, **SCOPES[scope]}
    many = st.add_many(["alpha beta gamma", {"text": "delta epsilon", "run_id": "r9"}], kind="fact", **SCOPES[scope])
    assert [st.get(m.id).metadata for m in many] == [SCOPES[scope], {**SCOPES[scope], "run_id": "r9"}]   # an item's own run_id wins over the batch's
    st.close()


@pytest.mark.parametrize("call, says", [
    (lambda s: s.add("x y", kind="fact", agent_id=""), "agent_id: is empty"),
    (lambda s: s.add("x y", kind="fact", run_id=7), "run_id: expected a non-empty string, got int"),
    (lambda s: s.add_many(["x y"], agent_id=" a"), "agent_id: ' a' has surrounding spaces"),
    (lambda s: s.search("x", agent_id=["a"]), "agent_id: expected a non-empty string, got list"),
    (lambda s: s.list(run_id=""), "run_id: is empty"),
    (lambda s: s.delete_all(agent_id=1.5), "agent_id: expected a non-empty string, got float"),
    (lambda s: s.add("x y", kind="fact", agent_id="a", metadata={"agent_id": "b"}), "agent_id: 'a', but metadata holds agent_id='b'")])
def test_bad_scopes_are_named_alike_on_both_backends(loc, call, says):
    st = loc.open()
    with pytest.raises(ScopeError, match=says.replace("(", r"\(").replace(")", r"\)")): call(st)
    assert len(st) == 0   # nothing written
    st.close()


SCOPE_VALUES = st_.sampled_from(["a", "b", None])


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tags=st_.lists(st_.tuples(SCOPE_VALUES, SCOPE_VALUES), min_size=1, max_size=8),
       target=st_.tuples(SCOPE_VALUES, SCOPE_VALUES).filter(lambda t: t != (None, None)))
def test_delete_by_removes_exactly_its_scope(loc, tags, target):
    "A delete-by agent A (and/or run R) never removes another agent's, another run's or an unscoped memory, and list-by returns exactly the scoped set."
    here = loc.other(f"p-{uuid.uuid4().hex[:10]}") if loc.kind == "postgres" else Location("sqlite", f"{loc.where}-{uuid.uuid4().hex[:8]}")
    st = here.open()
    ids = [st.add(f"memory {i} about subject {i * 13}", kind="fact", id=f"m{i}", agent_id=a, run_id=r).id for i, (a, r) in enumerate(tags)]
    agent, run = target
    inside = [i for i, (a, r) in zip(ids, tags) if (agent is None or a == agent) and (run is None or r == run)]
    assert [m.id for m in st.list(agent_id=agent, run_id=run)] == inside
    assert st.delete_all(agent_id=agent, run_id=run)["deleted"] == len(inside)
    assert [m.id for m in st.list()] == [i for i in ids if i not in inside]
    st.close()


def test_the_doors_and_python_agree(loc):
    "The tool layer and HTTP (both through MemoryTools) take the scopes as the store's own arguments: same writes, same lists, same hits."
    from fastapi.testclient import TestClient
    from earmem.serve.http import create_app
    st = loc.open(); rows = fill(st)
    c = TestClient(create_app(st))
    r = c.post("/memories", json={"text": "the door wrote this about the login page", "kind": "fact", "agent_id": "planner", "run_id": "r1"})
    assert r.status_code == 201, r.text
    assert st.get(r.json()["id"]).metadata == {"agent_id": "planner", "run_id": "r1"}
    for scope, flt in itertools.product(SCOPES.values(), FILTERS.values()):
        listed = c.get("/memories", params={**scope, "limit": 100, **({"metadata": json.dumps(flt["metadata"])} if flt else {})})
        assert listed.status_code == 200, listed.text
        py = [m.id for m in st.list(**scope, filters=flt)]
        assert [m["id"] for m in listed.json()["memories"]] == py
        assert [m["id"] for m in st.tools.run("list", {**scope, "limit": 100, **(flt or {})})["memories"]] == py
        hits = c.post("/search", json={"query": "which item was worked on", "k": 20, **scope, **(flt or {})})
        assert sorted(h["id"] for h in hits.json()["hits"]) == sorted(st.search("which item was worked on", k=20, **scope, filters=flt).ids)
    bad = c.post("/search", json={"query": "x", "agent_id": ""})
    assert bad.status_code == 422 and "agent_id: is empty" in bad.json()["error"], bad.text
    st.close()


@pytest.mark.parametrize("kw", [{}, {"metadata": {}}, {"filters": {"metadata": {}}}, {"filters": {}}])
def test_delete_all_refuses_what_narrows_nothing(loc, kw):
    "An empty filter passes every memory: delete_all refuses it rather than erase the store (clear() does that)."
    st = loc.open(); rows = fill(st)
    with pytest.raises(ValueError, match="give at least one"): st.delete_all(**kw)
    assert len(st) == len(rows)
    st.close()


def _fresh(loc, tag: str):
    "A new empty store beside `loc`'s: another folder, or another namespace of the same PostgreSQL server."
    here = loc.other(f"{loc.namespace}-{tag}") if loc.kind == "postgres" else Location("sqlite", f"{loc.where}-{tag}")
    return here.open()


def _delete_by(door: str, st, args: dict) -> tuple:
    "Run delete_all with the door's `args` (agent_id, run_id, metadata: a metadata filter, reason) through `door` on `st`: (erased ids or None, the error or None)."
    if door == "tools":
        out = st.tools.call("delete_all", args)
    elif door == "http":
        from fastapi.testclient import TestClient
        from earmem.serve.http import create_app
        r = TestClient(create_app(st)).post("/memories/delete-all", json=args)
        out = r.json()
        assert (r.status_code == 422) == ("error" in out), (r.status_code, out)   # a refusal is a 422, never a 400 or a 500
    else:
        from mcp.client import Client
        from earmem.serve.mcp import build_mcp_server
        async def call():
            async with Client(build_mcp_server(st)) as c: return await c.call_tool("delete_all", args)
        res = anyio.run(call)
        out = json.loads(res.content[0].text)
        assert res.is_error == ("error" in out), (res.is_error, out)           # a refusal is an error result a host sees
    return (None, out["error"]) if "error" in out else (out["ids"], None)


@pytest.mark.parametrize("scope, flt", list(itertools.product(SCOPES, FILTERS)))
def test_delete_by_at_every_door_erases_what_python_erases(loc, scope, flt):
    "HTTP's POST /memories/delete-all, MCP's delete_all tool and the tool layer each erase, on a store filled alike, exactly the ids Python's delete_all erases (and refuse alike where it refuses)."
    pytest.importorskip("fastapi"); pytest.importorskip("mcp")
    kw, F = SCOPES[scope], FILTERS[flt]
    py = loc.open(); rows = fill(py)
    try: want, refusal = py.delete_all(**kw, **({"filters": F} if F else {}), reason="door test")["ids"], None
    except ScopeError as e: want, refusal = None, str(e)
    assert (want is None) == (not kw and not F) and (want is None or want == expected(rows, kw, F))
    left = [r.id for r in py.list(include_retracted=True)]
    py.close()
    for door in ("tools", "http", "mcp"):
        st = _fresh(loc, door); assert [i for i, *_ in fill(st)] == [i for i, *_ in rows]   # the same ids, written alike
        got, error = _delete_by(door, st, {**kw, **(F or {}), "reason": "door test"})   # the door takes list's filter fields, as Python does
        assert (got, error) == (want, refusal), (door, got, error)
        assert [r.id for r in st.list(include_retracted=True)] == left, door
        if want: assert st.history(want[0])[-1]["detail"]["reason"] == "door test"
        st.close()


CHAT = [{"role": "user", "name": "Dana", "content": "The team standup is at 4pm. I prefer aisle seats."},
        {"role": "assistant", "content": "Noted."},
        {"role": "user", "name": "Dana", "content": "Actually, it's 3pm not 4pm."}]
OTHER = [{"role": "user", "name": "Lee", "content": "Lee owns the billing service. Lee moved to Lisbon last spring."}]


def _written(out: dict) -> set:
    "The ids an add_messages answer (JSON) wrote: its turns' and its claims'."
    return {r["id"] for r in out["episodes"] + out["memories"]}


def _add_messages(door: str, st, args: dict) -> dict:
    "add_messages with `args` through `door` on `st`: its JSON answer."
    if door == "python":
        return st.add_messages(**args).to_json()
    if door == "tools":
        return st.tools.run("add_messages", args)
    if door == "http":
        from fastapi.testclient import TestClient
        from earmem.serve.http import create_app
        r = TestClient(create_app(st)).post("/memories/messages", json=args)
        assert r.status_code == 201, r.text
        return r.json()
    from mcp.client import Client
    from earmem.serve.mcp import build_mcp_server
    async def call():
        async with Client(build_mcp_server(st)) as c: return await c.call_tool("add_messages", args)
    res = anyio.run(call)
    assert not res.is_error, res.content[0].text
    return json.loads(res.content[0].text)


@pytest.mark.parametrize("door", ["python", "tools", "http", "mcp"])
def test_add_messages_keeps_the_scope_on_every_turn_and_claim(loc, door):
    "A chat written with agent_id and run_id (through Python or a door): list by either returns exactly its turns and claims, on both backends; a delete-by of its run erases exactly them."
    if door != "python": pytest.importorskip("fastapi"); pytest.importorskip("mcp")
    st = _fresh(loc, f"chat-{door}")
    planner = _add_messages(door, st, {"messages": CHAT, "session": "s1", "agent_id": "planner", "run_id": "r1"})
    coder = _add_messages(door, st, {"messages": OTHER, "agent_id": "coder", "run_id": "r2"})
    loose = st.add("Release day is Thursday", kind="fact").id                        # no scope: in neither list
    mine, theirs = _written(planner), _written(coder)
    assert len(planner["memories"]) >= 3 and len(planner["episodes"]) == 3 and not mine & theirs
    assert {r.id for r in st.list(agent_id="planner", include_retracted=True)} == mine
    assert {r.id for r in st.list(run_id="r1", include_retracted=True)} == mine      # the superseded 4pm claim too: it was this chat's
    assert {r.id for r in st.list(agent_id="coder", run_id="r2")} == theirs
    assert st.list(agent_id="planner", run_id="r2") == []
    assert all(st.get(i).metadata["session"] == "s1" for i in mine)                   # the session is kept beside the scopes
    assert {h.id for h in st.search("when is the standup?", k=20, run_id="r1")} <= mine
    assert sorted(st.delete_all(run_id="r1")["ids"]) == sorted(mine)
    assert {r.id for r in st.list(include_retracted=True)} == theirs | {loose}
    st.close()


@pytest.mark.parametrize("call, says", [
    (lambda s: s.add_messages(CHAT, agent_id=""), "agent_id: is empty"),
    (lambda s: s.add_messages(CHAT, run_id=3), "run_id: expected a non-empty string, got int"),
    (lambda s: s.add_messages(CHAT, agent_id="a\x00b"), "agent_id: 'a\\x00b' holds control or invisible characters")])
def test_add_messages_refuses_a_bad_scope_before_writing(loc, call, says):
    st = loc.open()
    with pytest.raises(ScopeError) as e: call(st)
    assert str(e.value).startswith(says), str(e.value)
    assert len(st) == 0
    st.close()


def test_postgres_reads_a_scope_through_its_index(pg_url):
    "Chapter 20c's scope indexes: made with a schema, rebuilt by a writer's open where an older schema lacks them, and matched by the condition chapter 20d's `_where` writes for a scope (so the planner can read the scope's rows through them)."
    from earmem.memory.index.mirror import SearchFilter
    here = Location("postgres", pg_url, f"ix-{uuid.uuid4().hex[:10]}")
    st = here.open(); rows = fill(st); b = st._backend
    indexes = lambda b: sorted(r[0] for r in b._q("SELECT indexname FROM pg_indexes WHERE schemaname=%s AND indexname IN ('memories_agent_id', 'memories_run_id')", (b.schema,)))
    assert indexes(b) == ["memories_agent_id", "memories_run_id"]
    for scope, index in (({"agent_id": "planner"}, "memories_agent_id"), ({"run_id": "r1"}, "memories_run_id")):
        where, params = b._where(SearchFilter.from_args(scope)[0])
        with b.db.transaction():
            b._q("SET LOCAL enable_seqscan = off")
            plan = " ".join(r[0] for r in b._q(f"EXPLAIN SELECT seq FROM {{s}}.memories WHERE {where}", params))
        assert index in plan, plan
        assert sorted(st.search("which item was worked on", k=20, **scope).ids) == sorted(expected(rows, scope, None))
    b._q("DROP INDEX {s}.memories_agent_id"); b._q("DROP INDEX {s}.memories_run_id")   # a schema made before issue 40
    st.close()
    readonly = here.open(readonly=True); assert readonly.list(agent_id="planner") and indexes(readonly._backend) == []; readonly.close()   # a reader builds nothing
    st = here.open(); assert indexes(st._backend) == ["memories_agent_id", "memories_run_id"]                                              # a writer's open does
    assert [r.id for r in st.list(agent_id="planner")] == expected(rows, {"agent_id": "planner"}, None)
    st.close()
