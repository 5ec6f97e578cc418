"""Whom a request acts for (issue 37): a generated matrix of door × operation × how the user is named × key scope,
driven through the real HTTP app (FastAPI's TestClient) and the MCP server's streamable-HTTP app behind the same access
guard. For every cell the expected answer is derived from one rule — the user the operation will act for is the one
the key is checked against — and the store is inspected afterwards: nothing happened for a user the key may not act
for, and an erase never reached a user nobody named. The erases are `clear` and the delete-by-scope `delete_all` (issue
40), whose MCP cells go through the real MCP app, not a stand-in."""
import itertools, json
import pytest

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402
from earmem.memory.rules.hygiene import HashingEncoder  # noqa: E402
from earmem.memory.service.users import StorePool  # noqa: E402
from earmem.serve.access import Key, protect  # noqa: E402
from earmem.serve.http import create_app  # noqa: E402

SECRET = {"all": "a" * 32, "ana": "b" * 32, "bo": "c" * 32}
KEYS = [Key(SECRET["all"], name="all"), Key(SECRET["ana"], users=frozenset({"ana"}), name="ana-only"),
        Key(SECRET["bo"], users=frozenset({"bo"}), name="bo-only")]

# how a request names its user: (query user_id, body user_id); None = not given
NAMINGS = {"query ana": ("ana", None), "body ana": (None, "ana"), "query bo": ("bo", None), "body bo": (None, "bo"),
           "omitted": (None, None), "empty query": ("", None), "empty body": (None, ""),
           "query ana, body bo": ("ana", "bo"), "spaced": (" ana", None), "zero-width": ("an\u200ba", None)}
# operation -> (method, path, body or None when the route takes no body, whether it erases)
OPS = {"search": ("POST", "/search", {"query": "coffee"}, False), "add": ("POST", "/memories", {"text": "drinks tea", "kind": "fact"}, False),
       "list": ("GET", "/memories", None, False), "clear": ("DELETE", "/memories", None, True),
       "delete_all": ("POST", "/memories/delete-all", {"run_id": "r-matrix"}, True)}
RUN_NOTE = "{} ran the matrix step"   # each user's memory of run r-matrix, which delete_all erases

def _expected(op: str, naming: str, scope: str) -> int:
    q, b = NAMINGS[naming]
    method, _, body, erases = OPS[op]
    named = [u for u in ((q,) if body is None else (q, b)) if u is not None]   # a body-less route reads the query only
    if body is None and b is not None: named = [q] if q is not None else []
    if any(u == "" or u != u.strip() or "\u200b" in u for u in named): return 422
    if len(set(named)) > 1: return 400
    user = named[0] if named else None
    if scope != "all" and (user if user is not None else "default") != scope: return 403
    if erases and user is None: return 422
    return 201 if op == "add" else 200

@pytest.fixture
def pool(tmp_path):
    with StorePool(tmp_path / "m", encoder=HashingEncoder(64)) as p:
        for user in ("ana", "bo", "default"):
            p.store(user).add(f"{user} drinks coffee", "fact"); p.store(user).add(RUN_NOTE.format(user), "fact", run_id="r-matrix")
        yield p

def _request(client, op, naming, scope):
    method, path, body, _ = OPS[op]
    q, b = NAMINGS[naming]
    params = {} if q is None else {"user_id": q}
    headers = {"authorization": f"Bearer {SECRET[scope]}"}
    if body is None:
        return client.request(method, path, params=params, headers=headers)
    payload = {**body, **({} if b is None else {"user_id": b})}
    if op == "add": payload["text"] = f"note {next(_NOTES)} of the matrix"   # a new text each time: no merge hides whom it went to
    return client.request(method, path, params=params, headers=headers, json=payload)

CELLS = list(itertools.product(OPS, NAMINGS, SECRET))
_NOTES = itertools.count()

def _acting(op: str, naming: str) -> str:
    "The user a successful request must have acted for: the one it names (query or body), else the default user."
    q, b = NAMINGS[naming]
    named = [u for u in ((q,) if OPS[op][2] is None else (q, b)) if u is not None]
    return named[0] if named else "default"

def _acted_for(op: str, r, changed: set) -> set:
    "The users whose memories a successful answer shows (search, list) or changed (add, clear, delete_all)."
    owners = {"ana", "bo", "default"}   # each user's own memory says "<user> drinks coffee"
    if op == "search": return {h["text"].split()[0] for h in r.json()["hits"]} & owners
    if op == "list": return {m["text"].split()[0] for m in r.json()["memories"]} & owners
    return changed

def test_the_identity_matrix_over_http(pool):
    app = protect(create_app(pool), pool, keys=KEYS, environ={})
    wrong, seen = [], 0
    with TestClient(app, base_url="http://127.0.0.1") as c:
        for op, naming, scope in CELLS:
            before = {u: len(pool.store(u)) for u in ("ana", "bo", "default")}
            r = _request(c, op, naming, scope)
            want, seen = _expected(op, naming, scope), seen + 1
            if r.status_code != want: wrong.append((op, naming, scope, r.status_code, want, r.text[:120]))
            after = {u: len(pool.store(u)) for u in ("ana", "bo", "default")}
            changed = {u for u in after if after[u] != before[u]}
            if r.status_code >= 400 and changed: wrong.append((op, naming, scope, "changed on refusal", changed))
            if scope != "all" and changed - {scope}: wrong.append((op, naming, scope, "changed another user", changed))
            if r.status_code < 300 and _acted_for(op, r, changed) != {_acting(op, naming)}:   # the user the key was checked against
                wrong.append((op, naming, scope, "acted for", _acted_for(op, r, changed), "not", _acting(op, naming)))
            if op == "clear" and r.status_code == 200:   # put the user's memories back for the next cell
                u = NAMINGS[naming][0]; pool.store(u).add(f"{u} drinks coffee", "fact"); pool.store(u).add(RUN_NOTE.format(u), "fact", run_id="r-matrix")
            if op == "delete_all" and r.status_code == 200:
                u = _acting(op, naming)
                if r.json() != {"user_id": u, "deleted": 1, "ids": r.json()["ids"]} or len(pool.store(u).list(run_id="r-matrix")):
                    wrong.append((op, naming, scope, "erased", r.json()))
                pool.store(u).add(RUN_NOTE.format(u), "fact", run_id="r-matrix")
    assert seen == len(OPS) * len(NAMINGS) * len(SECRET) == 150
    assert not wrong, "\n".join(map(str, wrong))

def _rpc(tool: str, arguments: dict, id: int = 1) -> dict:
    return {"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}

def _expected_mcp(naming: str, scope: str) -> tuple:
    "(HTTP status, isError) of an MCP delete_all call named as `naming` with key `scope`: the user is the tool call's user_id argument only."
    q, b = NAMINGS[naming]
    if q is not None: return 422, None                       # the MCP door reads the tool call only: a user in the URL is refused
    if b is not None and (b == "" or b != b.strip() or "\u200b" in b): return 422, None
    if scope != "all" and (b if b is not None else "default") != scope: return 403, None
    return 200, b is None                                    # an erase through a door for many users names its user: else a tool error

def test_the_delete_all_matrix_over_mcp(pool):
    "The real MCP app (streamable HTTP, stateless, JSON answers) behind the guard: delete_all × how the user is named × key scope."
    from earmem.serve.mcp import build_mcp_server
    app = protect(build_mcp_server(pool).streamable_http_app(host="127.0.0.1", stateless_http=True, json_response=True), pool, keys=KEYS, environ={})
    wrong, cells = [], list(itertools.product(NAMINGS, SECRET))
    with TestClient(app, base_url="http://127.0.0.1:8765") as c:   # the SDK's own Host check wants the port
        for naming, scope in cells:
            q, b = NAMINGS[naming]
            before = {u: len(pool.store(u)) for u in ("ana", "bo", "default")}
            r = c.post("/mcp", params={} if q is None else {"user_id": q}, json=_rpc("delete_all", {"run_id": "r-matrix", **({} if b is None else {"user_id": b})}),
                       headers={"authorization": f"Bearer {SECRET[scope]}", "accept": "application/json, text/event-stream"})
            status, is_error = _expected_mcp(naming, scope)
            got = (r.status_code, r.json()["result"]["isError"] if r.status_code == 200 else None)
            if got != (status, is_error): wrong.append((naming, scope, got, (status, is_error), r.text[:160]))
            changed = {u for u in before if len(pool.store(u)) != before[u]}
            if changed != ({b} if got == (200, False) else set()): wrong.append((naming, scope, "changed", changed))
            if got == (200, False):
                answer = json.loads(r.json()["result"]["content"][0]["text"])
                if (answer["user_id"], answer["deleted"]) != (b, 1): wrong.append((naming, scope, "answer", answer))
                pool.store(b).add(RUN_NOTE.format(b), "fact", run_id="r-matrix")
    assert len(cells) == 30 and not wrong, "\n".join(map(str, wrong))

@pytest.mark.parametrize("scope", list(SECRET))
def test_the_guard_reads_the_user_the_mcp_tool_call_uses(pool, scope):
    "The MCP door behind the same guard: the user of a tool call is its `user_id` argument, checked before the app runs."
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route
    reached = []
    async def mcp(request):   # stands in for the MCP app: records what got through the guard
        reached.append(json.loads(await request.body())); return JSONResponse({"ok": True})
    app = protect(Starlette(routes=[Route("/mcp", mcp, methods=["POST"])]), pool, keys=KEYS, environ={})
    with TestClient(app, base_url="http://127.0.0.1") as c:
        h = {"authorization": f"Bearer {SECRET[scope]}"}
        opened = c.post("/mcp", json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}}, headers=h)
        assert opened.status_code == 200                       # every valid key may open a session
        for user in ("ana", "bo", None, ""):
            args = {"query": "coffee", **({} if user is None else {"user_id": user})}
            got = c.post("/mcp", json=_rpc("search", args), headers=h).status_code
            want = 422 if user == "" else 200 if scope == "all" or (user or "default") == scope else 403
            assert got == want, (scope, user, got)
        for q in ("user_id=ana", "user_id=bo", "user_id="):   # the MCP door reads only the tool call: a user in the URL is refused
            assert c.post(f"/mcp?{q}", json=_rpc("search", {"query": "x"}), headers=h).status_code == 422
        batch = [_rpc("search", {"query": "x", "user_id": "ana"}), _rpc("clear", {"user_id": "bo"}, 2)]
        assert c.post("/mcp", json=batch, headers=h).status_code == 400   # two users in one request
        lists = c.post("/mcp", json=_rpc("users", {}), headers=h).status_code
        assert lists == (200 if scope == "all" else 403)
    assert all(isinstance(m, (dict, list)) for m in reached)

@pytest.mark.parametrize("depth", [33, 1_000, 200_000])
def test_deep_json_is_refused_before_parsing(pool, depth):
    "A body nested deeper than the door's limit answers 422 naming the limit (no RecursionError, no 500), with or without a key."
    app = protect(create_app(pool), pool, keys=KEYS, environ={})
    body = b'{"query": "coffee", "user_id": "ana", "metadata": ' + b"[" * depth + b"]" * depth + b"}"
    with TestClient(app, base_url="http://127.0.0.1") as c:
        r = c.post("/search", content=body, headers={"authorization": f"Bearer {SECRET['all']}", "content-type": "application/json"})
        assert r.status_code == 422 and "nested more than 32 levels" in r.json()["error"], r.text
        assert c.post("/search", json={"query": "coffee", "user_id": "ana"}, headers={"authorization": f"Bearer {SECRET['all']}"}).status_code == 200

def _fds() -> int:
    import os
    return len(os.listdir("/proc/self/fd"))

@pytest.mark.skipif(not __import__("os").path.isdir("/proc/self/fd"), reason="counts descriptors through /proc")
def test_a_bounded_pool_serves_many_users_in_turn_within_its_descriptors(tmp_path):
    "300 users in turn through the tool layer a server uses: open stores never exceed max_open, descriptors stay bounded, every user keeps their memory."
    from earmem.memory.store.agent_view import UserTools
    with StorePool(tmp_path / "many", encoder=HashingEncoder(64), max_open=8) as pool:
        tools, base, peak = UserTools(pool), _fds(), 0
        for i in range(300):
            assert tools.run("add", {"text": f"user {i} drinks tea", "kind": "fact", "user_id": f"u{i}"})["action"] == "inserted"
            assert len(pool._stores) <= 8
            peak = max(peak, _fds())
        assert peak - base <= 8 * 6 + 10, (base, peak)                        # about 4 descriptors per open store
        for i in (0, 137, 299):                                               # evicted or not, each user's memory is there
            assert [h["text"] for h in tools.run("search", {"query": "drinks tea", "user_id": f"u{i}"})["hits"]][:1] == [f"user {i} drinks tea"]
        assert set(pool.namespaces()) == {"default", *(f"u{i}" for i in range(300))}   # the folder's root store is 'default'


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
@pytest.mark.parametrize("op,where", [(op, w) for op in OPS for w in ("query", "body") if w == "query" or OPS[op][2] is not None])
def test_a_nul_in_the_user_is_a_named_422_on_every_backend(tmp_path, request, backend, op, where):
    "Issue 37 (faults answer at once): a NUL or other control character in a user name is refused by name before any backend sees it, PostgreSQL included."
    root = request.getfixturevalue("pg_url") if backend == "postgres" else tmp_path / "m"
    method, path, body, _ = OPS[op]
    with StorePool(root, encoder=HashingEncoder(64)) as p:
        client = TestClient(create_app(p))
        for bad in ("a\x00b", "ana\x07", "bo\x1b[0m"):
            params, payload = ({"user_id": bad}, body) if where == "query" else ({}, {**body, "user_id": bad})
            r = client.request(method, path, params=params, json=payload) if payload is not None else client.request(method, path, params=params)
            assert r.status_code == 422, (bad, r.status_code, r.text)
            assert "user_id" in r.text
