"""Tests of the MCP door (earmem.serve.mcp): the JSON layer's bad input, the MCP server in-process through the SDK's
client (tools, schemas, errors, feedback moving the ranking, the prompt), the optional dependency missing, and one end
to end session over stdio with a real client subprocess."""
import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

pytest.importorskip("mcp")

from earmem.memory.rules.hygiene import HashingEncoder, StoreConfig
from earmem.memory.store import MemoryStore

ROOT = Path(__file__).resolve().parents[1]
DECISION = "Dana picked Postgres for the orders service database"
CHATTER = "Dana said the orders database question keeps coming up in standups"
QUESTION = "which database for orders?"


def toy_store(path, lr=0.05) -> MemoryStore:
    cfg = StoreConfig(recency_weight=0, importance_weight=0, min_relevance=-1.0, candidates=8, balanced=False,
                      learner_gate=0, ear={"lr": lr, "B": 4, "s": 3})
    return MemoryStore(path, encoder=HashingEncoder(64), config=cfg)


def run_client(server, script):
    "Run `script(call, client)` against `server` in-process; `call(tool, args)` returns the parsed JSON result."
    from mcp.client import Client

    async def go():
        async with Client(server) as c:
            async def call(name, args):
                res = await c.call_tool(name, args)
                out = json.loads(res.content[0].text)   # an answer, or {"error": …} on a call flagged is_error
                assert res.is_error == (set(out) == {"error"}), (name, args, res.is_error, out)
                return out
            return await script(call, c)
    return anyio.run(go)


@pytest.fixture
def server(tmp_path):
    from earmem.serve.mcp import build_mcp_server
    return build_mcp_server(toy_store(tmp_path / "s"))


def test_tool_schemas(server):
    async def script(call, c):
        return {t.name: t for t in (await c.list_tools()).tools}
    tools = run_client(server, script)
    from earmem.memory.store.agent_view import TOOL_NAMES
    assert set(tools) == set(TOOL_NAMES) >= {"search", "add", "feedback", "get", "list", "update", "delete", "clear", "users"}
    s = tools["search"].input_schema
    assert s["required"] == ["query"] and {"k", "kinds", "entities", "since", "until", "store", "metadata", "min_relevance"} <= set(s["properties"])
    assert tools["add"].input_schema["required"] == ["text"]   # kind is inferred when omitted
    from earmem.memory.store.agent_view import tool_schema
    assert all(t.input_schema == tool_schema(name) for name, t in tools.items())   # one schema, the tool layer's


def test_add_search_feedback_changes_ranking(server):
    async def script(call, c):
        a = await call("add", {"text": DECISION, "kind": "decision", "entities": ["Dana"]})
        b = await call("add", {"text": CHATTER, "kind": "episode", "entities": ["Dana"]})
        s1 = await call("search", {"query": QUESTION, "k": 2})
        fb = await call("feedback", {"cited": [a["id"]], "search_id": s1["search_id"]})
        s2 = await call("search", {"query": QUESTION, "k": 2})
        return a, b, s1, fb, s2
    a, b, s1, fb, s2 = run_client(server, script)
    assert [h["id"] for h in s1["hits"]] == [b["id"], a["id"]]
    assert fb["labels"] == {b["id"]: -1, a["id"]: 1} and fb["search_id"] == s1["search_id"] and isinstance(fb["loss"], float)
    assert [h["id"] for h in s2["hits"]] == [a["id"], b["id"]]
    h = s2["hits"][0]
    assert h["rank"] == 1 and h["score"] > s2["hits"][1]["score"] and h["relevance"] != h["frozen_relevance"]


def test_relevance_floor_and_filters(server):
    async def script(call, c):
        await call("add", {"text": DECISION, "kind": "decision", "entities": ["Dana"]})
        await call("add", {"text": "Lee prefers tea over coffee", "kind": "preference", "entities": ["Lee"]})
        high = await call("search", {"query": QUESTION, "min_relevance": 0.99})
        kinds = await call("search", {"query": QUESTION, "kinds": ["preference"]})
        ents = await call("search", {"query": QUESTION, "entities": ["Lee"]})
        store = await call("search", {"query": QUESTION, "store": "episodic"})
        meta = await call("search", {"query": QUESTION, "metadata": {"project": "orders"}})
        return high, kinds, ents, store, meta
    high, kinds, ents, store, meta = run_client(server, script)
    assert high["hits"] == [] and "relevance floor" in high["note"]
    assert [h["kind"] for h in kinds["hits"]] == ["preference"]
    assert [h["entities"] for h in ents["hits"]] == [["Lee"]]
    assert store["hits"] == []                                # both memories are semantic
    assert "hits" in meta or meta["error"].startswith("metadata:")   # passed on: filtered, or refused by name until backends do it


def test_structured_errors_never_crash(server):
    async def script(call, c):
        out = [await call("search", {"query": ""}),
               await call("add", {"text": "x", "kind": "gossip"}),
               await call("feedback", {"cited": ["m1"]}),  # no search yet
               await call("history", {"id": "m404"}),
               await call("retract", {"id": "m404", "reason": "wrong"}),
               await call("search", {"query": "x", "k": "many"}),  # wrong type: the tool layer's check, an {"error"} result
               await call("search", {"query": "x", "kind": ["fact"]}),  # misspelt argument: refused, not dropped
               await call("add", {"text": "x", "kind": "fact", "colour": "red"})]
        out.append(await call("add", {"text": DECISION, "kind": "decision"}))  # still serving
        return out
    empty, kind, nosearch, hist, retr, schema, misspelt, unknown, ok = run_client(server, script)
    assert empty["error"].startswith("query:")
    assert "kind" in kind["error"]
    assert "no search has been made" in nosearch["error"]
    assert "no memory" in hist["error"] and "no memory" in retr["error"]
    assert schema == {"error": "k: expected integer, got str 'many'"}
    assert misspelt["error"].startswith("kind: unknown argument of search (did you mean 'kinds'?)")
    assert unknown["error"].startswith("colour: unknown argument of add")
    assert ok["action"] == "inserted"


WRONG = [("string", "x"), ("integer", 12345), ("array", ["x"]), ("object", {"x": 1}), ("boolean", True)]  # a value of each JSON type
SAMPLES = {"query": QUESTION, "text": DECISION, "id": "m1", "reason": "checked by hand",   # a valid value of each required argument
           "messages": [{"role": "user", "name": "Dana", "content": "I prefer aisle seats on flights."}]}
ALSO = {"update": {"importance": 0.9}, "delete_all": {"agent_id": "a1"}}   # a tool that needs more than its required arguments to do something (delete_all: a scope)


def valid_arguments(tool) -> dict:
    "Arguments with which `tool` (as the server lists it) succeeds on the seeded store."
    return {**{r: SAMPLES[r] for r in tool.input_schema.get("required", [])}, **ALSO.get(tool.name, {})}


def wrong_value(prop: dict):
    "A value of a JSON type `prop` (a property's schema) does not allow."
    allowed = {prop.get("type", "string")} if isinstance(prop.get("type", "string"), str) else set(prop["type"])
    if "number" in allowed: allowed.add("integer")
    return next(v for t, v in WRONG if t not in allowed)


def failing_calls(tool) -> list:
    "(what, arguments, the argument the error must name) for `tool` (as the server lists it): valid arguments but one thing wrong."
    schema, ok = tool.input_schema, valid_arguments(tool)
    calls = [("unknown argument", {**ok, "not_an_argument": 1}, "not_an_argument")]
    calls += [(f"wrong type of {p}", {**ok, p: wrong_value(prop)}, p) for p, prop in schema["properties"].items()]
    calls += [(f"missing {r}", {k: v for k, v in ok.items() if k != r}, r) for r in schema.get("required", [])]
    if "id" in schema["properties"]: calls.append(("unknown memory id", {**ok, "id": "m404"}, "id"))
    return calls


def seeded_server(path):
    "A server over a store holding m1 (the decision) after one search, so every tool has something to act on."
    from earmem.serve.mcp import build_mcp_server
    store = toy_store(path)
    store.add(DECISION, "decision", entities=["Dana"])
    server = build_mcp_server(store)
    server.memory_tools.call("search", {"query": QUESTION})
    return server


def listed_tools(server) -> list:
    async def script(call, c): return (await c.list_tools()).tools
    return run_client(server, script)


def test_every_tool_has_samples_for_its_required_arguments(server):
    missing = {(t.name, r) for t in listed_tools(server) for r in t.input_schema.get("required", []) if r not in SAMPLES}
    assert not missing, f"add a valid sample value to SAMPLES for: {sorted(missing)}"


def test_every_failing_call_is_an_error_a_host_sees(tmp_path):
    "Every tool the server lists × every way to get one argument wrong: is_error true, one {'error': …} naming the argument."
    server = seeded_server(tmp_path / "s")
    tools = listed_tools(server)
    async def script(call, c):
        out = []
        for tool in tools:
            for what, args, arg in failing_calls(tool):
                res = await c.call_tool(tool.name, args)
                out.append((tool.name, what, arg, res.is_error, res.content[0].text))
        res = await c.call_tool("forget_everything", {})
        return out + [("forget_everything", "unknown tool", "name", res.is_error, res.content[0].text)]
    results = run_client(server, script)
    assert {r[0] for r in results} == {t.name for t in tools} | {"forget_everything"} and len(results) > 3 * len(tools)
    for name, what, arg, is_error, text in results:
        assert is_error is True, (name, what, text)
        body = json.loads(text)
        assert list(body) == ["error"] and body["error"].startswith(f"{arg}:"), (name, what, body)


def test_every_tool_succeeds_without_error(tmp_path):
    "One call per tool with valid arguments, each on a fresh seeded store (retract, delete or clear change what the next sees)."
    tools = listed_tools(seeded_server(tmp_path / "listed"))
    for i, tool in enumerate(tools):
        args = valid_arguments(tool)
        async def script(call, c): return await c.call_tool(tool.name, args)
        res = run_client(seeded_server(tmp_path / f"s{i}"), script)
        assert res.is_error is False, (tool.name, args, res.content[0].text)
        assert "error" not in json.loads(res.content[0].text), (tool.name, res.content[0].text)
    from earmem.serve.mcp import MCP_TOOLS
    assert [t.name for t in tools] == list(MCP_TOOLS)


def test_initialize_reports_the_version(server):
    import configparser
    import earmem
    async def script(call, c): return c.server_info
    info = run_client(server, script)
    cfg = configparser.ConfigParser(); cfg.read(ROOT / "settings.ini")
    assert (info.name, info.version) == ("earmem", earmem.__version__) == ("earmem", cfg["DEFAULT"]["version"])


def test_correct_history_and_prompt(server):
    async def script(call, c):
        a = await call("add", {"text": DECISION, "kind": "decision", "entities": ["Dana"]})
        fix = await call("correct", {"id": a["id"], "text": "Dana picked MySQL for the orders database", "reason": "review"})
        hist = await call("history", {"id": a["id"]})
        s = await call("search", {"query": QUESTION})
        block = await call("inject", {"query": QUESTION, "budget_tokens": 60})
        prompt = (await c.get_prompt("memory_context", {"query": QUESTION})).messages[0].content.text
        return a, fix, hist, s, block, prompt
    a, fix, hist, s, block, prompt = run_client(server, script)
    new = fix["correction"]["id"]
    assert len(hist["history"]) == 2 and hist["history"][-1]["action"] == "retract"
    assert hist["history"][-1]["detail"]["correction"] == new
    assert [h["id"] for h in s["hits"]] == [new]  # the retracted memory is never retrieved
    assert block["ids"] == [new] and block["tokens"] <= 60 and "MySQL" in block["text"]
    assert prompt.startswith("From long-term memory:") and f"[{new}]" in prompt


def test_import_without_mcp_installed(tmp_path):
    code = ("import sys; sys.modules['mcp'] = None\n"
            "import earmem, earmem.serve.mcp as m\n"
            "from earmem.memory.rules.hygiene import HashingEncoder\n"
            "from earmem.memory.store import MemoryStore\n"
            f"t = m.MemoryTools(MemoryStore({str(tmp_path / 's')!r}, encoder=HashingEncoder(16)))\n"
            "print(t.call('add', {'text': 'a fact about Dana', 'kind': 'fact'})['action'])\n"
            "try: m.build_mcp_server(t.store)\n"
            "except ImportError as e: print(e)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == "inserted"
    assert "pip install 'earmem[mcp]'" in r.stdout


def test_stdio_end_to_end(tmp_path):
    from earmem.serve.mcp import show_transcript, stdio_transcript
    toy_store(tmp_path / "s").close()
    steps = [("add", {"text": DECISION, "kind": "decision", "entities": ["Dana"]}),
             ("add", {"text": CHATTER, "kind": "episode", "entities": ["Dana"]}),
             ("search", {"query": QUESTION, "k": 2}),
             ("feedback", {"cited": lambda out: [out[0][2]["id"]]}),
             ("search", {"query": QUESTION, "k": 2})]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    t = anyio.run(stdio_transcript, tmp_path / "s", steps, env)
    first, again = ([h["id"] for h in t[i][2]["hits"]] for i in (2, 4))
    assert first == [t[1][2]["id"], t[0][2]["id"]] and again == first[::-1]
    text = show_transcript(t)
    assert text.count(">>> ") == 5 and DECISION in text
    with MemoryStore(tmp_path / "s", readonly=True) as s:  # the server process wrote to the folder
        assert len(s) == 2 and s.stats()["feedback"] == 1 and s.stats()["learner"]


def test_streamable_http_on_localhost(tmp_path):
    "serve_mcp(transport='http') binds 127.0.0.1 and answers a real client at /mcp."
    import socket
    import time
    from mcp.client import Client
    toy_store(tmp_path / "s").close()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code = f"from earmem.serve.mcp import serve_mcp; serve_mcp({str(tmp_path / 's')!r}, transport='http', port={port})"
    proc = subprocess.Popen([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(ROOT)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(600):
            try: socket.create_connection(("127.0.0.1", port), timeout=0.2).close(); break
            except OSError: time.sleep(0.1)

        async def go():
            async with Client(f"http://127.0.0.1:{port}/mcp") as c:
                a = json.loads((await c.call_tool("add", {"text": DECISION, "kind": "decision"})).content[0].text)
                s = json.loads((await c.call_tool("search", {"query": QUESTION})).content[0].text)
                return a, s
        a, s = anyio.run(go)
        assert [h["id"] for h in s["hits"]] == [a["id"]]
    finally:
        proc.terminate()
        proc.wait(30)


RAISED = [RuntimeError("disk on fire"), OSError(28, "No space left on device"), KeyError("m1"), ValueError("query: too long"),
          TimeoutError(), AssertionError("a bug")]   # what a tool may raise that its checks did not turn into an answer


def test_every_raised_error_is_an_error_a_host_sees(tmp_path):
    "Every tool × every kind of exception raised inside it (the tool layer let it through): is_error true, one {'error': …}."
    server = seeded_server(tmp_path / "s")
    tools, t = listed_tools(server), server.memory_tools
    async def script(call, c):
        out = []
        for tool in tools:
            for e in RAISED:
                def boom(*args, e=e, **kwargs): raise e
                t.call = boom                                # an instance attribute: the tools look it up per call
                res = await c.call_tool(tool.name, valid_arguments(tool))
                out.append((tool.name, type(e).__name__, res.is_error, res.content[0].text))
        del t.call
        res = await c.call_tool("search", {"query": QUESTION})   # the server still answers
        return out, res
    results, after = run_client(server, script)
    assert len(results) == len(tools) * len(RAISED) and after.is_error is False
    for name, kind, is_error, text in results:
        body = json.loads(text)
        assert is_error is True and list(body) == ["error"] and body["error"], (name, kind, text)


NO_STORE_READ = {"users"}   # lists the door's users: a single-store server names its one user without reading the store


def test_a_closed_store_fails_every_tool_as_an_error(tmp_path):
    """The store closed under the server: every tool that reads or writes it is flagged is_error with the one error shape
    (inject is asked with a query, which searches the store; without one it formats the hits of a search it already holds)."""
    server = seeded_server(tmp_path / "s")
    tools = [t for t in listed_tools(server) if t.name not in NO_STORE_READ]
    server.memory_tools.store.close()
    async def script(call, c):
        return [(t.name, await c.call_tool(t.name, {**valid_arguments(t), **({"query": QUESTION} if t.name == "inject" else {})}))
                for t in tools]
    results = run_client(server, script)
    assert len(results) == len(tools) > 10
    for name, res in results:
        assert res.is_error is True and json.loads(res.content[0].text)["error"].startswith("store:"), (name, res.content[0].text)
