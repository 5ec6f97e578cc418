"""Tests of the agent-framework integrations against the real packages: the LangGraph `BaseStore` (earmem.serve.langgraph_store)
— its contract (put, get, search, delete, list_namespaces, batch and the async twins), exact-key writes, user isolation and
LangGraph's own long-term-memory example end to end —, the OpenAI Agents SDK tools (earmem.serve.agents_sdk), run by the
SDK's own Runner against a scripted model, and the AutoGen memory (earmem.serve.autogen_memory), AutoGen's own memory example
run by an AssistantAgent whose OpenAIChatCompletionClient talks to that scripted model; each integration's message naming
its extra when the package is missing. (CrewAI is not integrated: it pins mcp<2, earmem's MCP door needs mcp>=2.3.)"""
import asyncio
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from earmem.memory.rules.hygiene import HashingEncoder
from earmem.memory.service.users import StorePool
from earmem.memory.store import MemoryStore

ROOT = Path(__file__).resolve().parents[1]


def _without(modules: list, code: str) -> str:
    "Run `code` in a fresh interpreter where `modules` cannot be imported; its stdout."
    head = "import sys\n" + "".join(f"sys.modules[{m!r}] = None\n" for m in modules)
    r = subprocess.run([sys.executable, "-c", head + code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout


# ---------------------------------------------------------------- LangGraph
from earmem.serve.langgraph_store import item_id, langgraph_store  # noqa: E402  (imports without LangGraph)
try: from langgraph.store.base import BaseStore, GetOp, PutOp, SearchOp
except ImportError: BaseStore = None
needs_langgraph = pytest.mark.skipif(BaseStore is None, reason="langgraph is not installed: pip install 'earmem[langgraph]'")


@pytest.fixture
def pool(tmp_path):
    with StorePool(tmp_path / "users", encoder=HashingEncoder(64)) as p: yield p


@pytest.fixture
def lg(pool):
    return langgraph_store(pool, fields=["text"])


@needs_langgraph
def test_langgraph_put_get_overwrite_and_delete(lg, pool):
    ns = ("alice", "memories")
    assert lg.get(ns, "food") is None
    lg.put(ns, "food", {"text": "Alice likes pizza", "n": 1})
    first = lg.get(ns, "food")
    assert (first.namespace, first.key, first.value) == (ns, "food", {"text": "Alice likes pizza", "n": 1})
    lg.put(ns, "food", {"text": "Alice likes ramen", "n": 2})          # the same key: that memory, overwritten in place
    now = lg.get(ns, "food")
    assert now.value == {"text": "Alice likes ramen", "n": 2} and now.created_at == first.created_at and now.updated_at >= first.updated_at
    assert len(pool.store("alice").records()) == 1
    lg.delete(ns, "food")
    assert lg.get(ns, "food") is None and pool.store("alice").records() == []
    lg.delete(ns, "never-there")                                       # deleting what is not there is no error, as in LangGraph


@needs_langgraph
def test_langgraph_put_never_merges_or_supersedes(lg, pool):
    ns = ("alice", "memories")
    lg.put(ns, "a", {"text": "Alice lives in Paris"})
    lg.put(ns, "b", {"text": "Alice lives in Paris"})                   # identical words, another key: a second item
    lg.put(ns, "c", {"text": "Alice lives in Berlin"})                  # what earmem's add would take for an update: kept beside
    st = pool.store("alice")
    assert sorted(r.status for r in st.records()) == ["active"] * 3
    assert [lg.get(ns, k).value["text"] for k in "abc"] == ["Alice lives in Paris", "Alice lives in Paris", "Alice lives in Berlin"]
    # a normal add through another door still dedupes among the agent's memories, and leaves the LangGraph items as put
    st.add("Alice lives in Paris", "fact")
    assert [lg.get(ns, k).value["text"] for k in "abc"] == ["Alice lives in Paris", "Alice lives in Paris", "Alice lives in Berlin"]


@needs_langgraph
def test_langgraph_concurrent_puts_of_one_key(tmp_path):
    "Threads putting the same new key at once (as LangGraph's parallel nodes may) write one memory, no error; the last put holds."
    import time
    from concurrent.futures import ThreadPoolExecutor

    class SlowEncoder(HashingEncoder):   # encoding takes a while, as a real model's does: the window where two puts could race
        def encode_documents(self, texts, progress=None):
            time.sleep(0.02)
            return super().encode_documents(texts, progress)
    pool = StorePool(tmp_path / "slow", encoder=SlowEncoder(64))
    lg = langgraph_store(pool, fields=["text"])
    with ThreadPoolExecutor(8) as ex:
        list(ex.map(lambda i: lg.put(("alice", "memories"), "shared", {"text": f"value {i}", "i": i}), range(16)))
    recs = pool.store("alice").records()
    assert len(recs) == 1 and recs[0].metadata["langgraph_value"] == lg.get(("alice", "memories"), "shared").value


@needs_langgraph
def test_langgraph_search_query_filter_paging(lg):
    ns = ("alice", "docs")
    for k, text, year in [("pg", "the orders service runs on Postgres", 2026), ("my", "the orders service ran on MySQL", 2024),
                          ("tea", "Lee prefers tea in the afternoon", 2026)]:
        lg.put(ns, k, {"text": text, "year": year})
    lg.put(ns, "hidden", {"text": "the orders service password"}, index=False)
    hits = lg.search(("alice",), query="which database does the orders service run on?", limit=2)
    assert {h.key for h in hits} == {"pg", "my"} and all(h.score is not None for h in hits)
    assert hits[0].score >= hits[1].score
    recent = [h.key for h in lg.search(("alice",), query="orders service", filter={"year": 2026})]
    assert recent[0] == "pg" and set(recent) == {"pg", "tea"}                # the filter runs before ranking: MySQL (2024) is out
    assert {h.key for h in lg.search(("alice",), query="orders", filter={"year": {"$lt": 2025}})} == {"my"}
    assert "hidden" not in {h.key for h in lg.search(("alice",), query="orders service password", limit=10)}
    assert [h.key for h in lg.search(("alice",))] == ["pg", "my", "tea", "hidden"]          # no query: every item, in put order
    assert [h.key for h in lg.search(("alice", "docs"), limit=2, offset=1)] == ["my", "tea"]
    assert lg.search(("alice", "elsewhere")) == []
    with pytest.raises(ValueError, match="filter"):
        lg.search(("alice",), filter={"tags": ["a"]})


@needs_langgraph
def test_langgraph_list_namespaces(lg):
    for ns in [("alice", "memories"), ("alice", "docs", "2026"), ("bob", "memories")]:
        lg.put(ns, "k", {"text": "x"})
    assert lg.list_namespaces() == [("alice", "docs", "2026"), ("alice", "memories"), ("bob", "memories")]
    assert lg.list_namespaces(prefix=("alice",)) == [("alice", "docs", "2026"), ("alice", "memories")]
    assert lg.list_namespaces(suffix=("memories",)) == [("alice", "memories"), ("bob", "memories")]
    assert lg.list_namespaces(prefix=("*", "memories")) == [("alice", "memories"), ("bob", "memories")]
    assert lg.list_namespaces(max_depth=2) == [("alice", "docs"), ("alice", "memories"), ("bob", "memories")]
    assert lg.list_namespaces(limit=1, offset=2) == [("bob", "memories")]


@needs_langgraph
def test_langgraph_user_isolation(lg, pool):
    lg.put(("alice", "memories"), "secret", {"text": "Alice's door code is 4711"})
    lg.put(("bob", "memories"), "note", {"text": "Bob likes chess"})
    for query in ("door code", "4711", "Alice"):
        assert all(h.namespace[0] == "bob" for h in lg.search(("bob",), query=query, limit=10))
    assert lg.get(("bob", "memories"), "secret") is None
    assert [r.metadata["langgraph_key"] for r in pool.store("bob").records()] == ["note"]
    assert lg.search(("carol",), query="door code") == [] and not pool.stored("carol")   # a read creates no user
    with pytest.raises(ValueError, match="names its user"):
        lg.search((), query="door code")                                # with a pool, a search names its user


@needs_langgraph
def test_langgraph_batch_and_async(lg):
    ns = ("alice", "memories")
    out = lg.batch([PutOp(ns, "a", {"text": "one"}), GetOp(ns, "a"), SearchOp(("alice",), query="one", limit=1),
                    PutOp(ns, "a", None), GetOp(ns, "a")])
    assert out[0] is None and out[1].value == {"text": "one"} and out[2][0].key == "a" and out[3] is None and out[4] is None

    async def run():
        await lg.aput(ns, "b", {"text": "async two"})
        got = await lg.aget(ns, "b")
        hits = await lg.asearch(("alice",), query="two")
        spaces = await lg.alist_namespaces()
        await lg.adelete(ns, "b")
        return got, hits, spaces, await lg.aget(ns, "b")
    got, hits, spaces, gone = asyncio.run(run())
    assert got.value == {"text": "async two"} and hits[0].key == "b" and spaces == [ns] and gone is None


@needs_langgraph
def test_langgraph_one_store_and_bad_input(tmp_path):
    st = MemoryStore(tmp_path / "one", encoder=HashingEncoder(32))
    one = langgraph_store(st)
    assert isinstance(one, BaseStore)
    one.put(("a",), "k", {"x": 1})
    one.put(("b", "c"), "k", {"x": 2})
    assert one.get(("a",), "k").value == {"x": 1} and one.get(("b", "c"), "k").value == {"x": 2}
    assert st.get(item_id(("a",), "k")).source == "langgraph"
    assert one.list_namespaces() == [("a",), ("b", "c")]
    with pytest.raises(TypeError, match="stores: expected a StorePool or a MemoryStore"): langgraph_store(object())
    with pytest.raises(ValueError, match="user_label"): langgraph_store(st, user_label=-1)
    with pytest.raises(TypeError, match="fields"): langgraph_store(st, fields="text")


@needs_langgraph
def test_langgraph_docs_example_end_to_end(pool):
    "LangGraph's long-term-memory example (its model replaced by a rule): a node searching and writing ('memories', user_id)."
    from langchain_core.messages import AIMessage
    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import START, MessagesState, StateGraph

    def call_model(state: MessagesState, config: RunnableConfig, *, store: BaseStore):
        namespace = ("memories", config["configurable"]["user_id"])
        last = state["messages"][-1].content
        info = "; ".join(d.value["data"] for d in store.search(namespace, query=str(last)))
        if "remember" in last.lower():
            store.put(namespace, str(uuid.uuid4()), {"data": last.split("remember", 1)[1].strip(" :.")})
        return {"messages": [AIMessage(f"I know: {info or 'nothing'}")]}

    builder = StateGraph(MessagesState)
    builder.add_node("call_model", call_model)
    builder.add_edge(START, "call_model")
    graph = builder.compile(checkpointer=InMemorySaver(), store=langgraph_store(pool, fields=["data"], user_label=1))
    ask = lambda thread, user, text: graph.invoke({"messages": [{"role": "user", "content": text}]},
                                                  {"configurable": {"thread_id": thread, "user_id": user}})["messages"][-1].content
    assert ask("1", "u1", "Hi! Please remember: my name is Bob") == "I know: nothing"
    assert ask("2", "u1", "what is my name?") == "I know: my name is Bob"
    assert ask("3", "u2", "what is my name?") == "I know: nothing"
    assert [r.text for r in pool.store("u1").records()] == ["my name is Bob"] and not pool.stored("u2")


def test_langgraph_missing_names_the_extra():
    out = _without(["langgraph"], "import earmem.serve.langgraph_store as m\n"
                                  "try: m.langgraph_store(None)\n"
                                  "except ImportError as e: print(e)\n")
    assert "pip install 'earmem[langgraph]'" in out


# ---------------------------------------------------------------- OpenAI Agents SDK
class ScriptedChat:
    "An OpenAI-compatible /v1/chat/completions on 127.0.0.1 answering from a script: each step a tool call (name, arguments) or a function of the request giving the final text; the requests kept."
    def __init__(self, script):
        import json, threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
        self.script, self.requests, outer = list(script), [], self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a): pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append(body)
                step = outer.script.pop(0)
                if callable(step): msg, why = {"role": "assistant", "content": step(body)}, "stop"
                else: msg, why = {"role": "assistant", "content": None, "tool_calls": [{"id": f"call_{len(outer.requests)}", "type": "function",
                                  "function": {"name": step[0], "arguments": json.dumps(step[1])}}]}, "tool_calls"
                data = json.dumps({"id": f"r{len(outer.requests)}", "object": "chat.completion", "created": 0, "model": body["model"],
                                   "choices": [{"index": 0, "message": msg, "finish_reason": why}],
                                   "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}).encode()
                self.send_response(200); self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data))); self.end_headers(); self.wfile.write(data)
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self): self.server.shutdown(); self.server.server_close()


def _tool_result(body) -> dict:
    import json
    return json.loads([m for m in body["messages"] if m["role"] == "tool"][-1]["content"])


@pytest.fixture
def sdk():
    agents = pytest.importorskip("agents")
    agents.set_tracing_disabled(True)
    return agents


def _agent(sdk, chat, tools):
    from openai import AsyncOpenAI
    model = sdk.OpenAIChatCompletionsModel("scripted", AsyncOpenAI(base_url=chat.url, api_key="not-used"))
    return sdk.Agent(name="assistant", instructions="Use your memory tools.", tools=tools, model=model)


def test_agents_sdk_example_end_to_end(sdk, pool):
    "The SDK's Runner, its chat-completions model against a scripted server: remember in one run, recall in the next, delete, and another user sees nothing."
    from earmem.serve.agents_sdk import memory_tools
    from earmem.memory.store.agent_view import tool_schema
    chat = ScriptedChat([("memory_add", {"text": "Dana's favourite editor is Helix", "kind": "preference"}),
                         lambda b: "stored " + _tool_result(b)["id"],
                         ("memory_search", {"query": "Which editor does Dana like?"}),
                         lambda b: _tool_result(b)["memories"][0]["text"],
                         ("memory_list", {}),
                         lambda b: f"{_tool_result(b)['total']} memories",
                         ("memory_search", {"query": "editor", "user_id": "dana"}),   # run as Lee's agent: naming Dana is refused
                         lambda b: _tool_result(b)["error"]])
    try:
        dana = _agent(sdk, chat, memory_tools(pool, user_id="dana", agent_id="assistant", run_id="r1"))
        lee = _agent(sdk, chat, memory_tools(pool, user_id="lee"))

        async def runs():
            return [(await sdk.Runner.run(a, q)).final_output for a, q in
                    [(dana, "Remember my favourite editor is Helix."), (dana, "Which editor do I like?"), (dana, "How much do you remember?"),
                     (lee, "Which editor does Dana like?")]]
        stored, recalled, counted, refused = asyncio.run(runs())
    finally:
        chat.close()
    assert stored.startswith("stored ") and recalled == "Dana's favourite editor is Helix" and counted == "1 memories"
    assert refused.startswith("user_id: unknown argument of search")
    rec = pool.store("dana").records()[0]
    assert (rec.metadata, rec.source) == ({"agent_id": "assistant", "run_id": "r1"}, "agents-sdk")
    offered = {t["function"]["name"]: t["function"] for t in chat.requests[0]["tools"]}
    assert list(offered) == ["memory_search", "memory_add", "memory_list", "memory_delete"]
    assert offered["memory_add"]["parameters"] == tool_schema("add", scoped=False) and not pool.stored("lee")


def test_agents_sdk_delete_and_tool_errors(sdk, tmp_path):
    import json
    from earmem.serve.agents_sdk import memory_tools
    st = MemoryStore(tmp_path / "one", encoder=HashingEncoder(32))
    mid = st.add("Lee parks on level 3", "fact").id
    tools = {t.name: t for t in memory_tools(st, operations=["delete", "get", "search"])}
    call = lambda name, args: json.loads(asyncio.run(tools[name].on_invoke_tool(None, args)))
    assert call("memory_get", json.dumps({"id": mid}))["text"] == "Lee parks on level 3"
    assert call("memory_delete", json.dumps({"id": mid})) == {"deleted": mid} and mid not in st
    assert "error" in call("memory_get", json.dumps({"id": mid}))
    assert call("memory_search", '{"query": 3}') == {"error": "query: expected string, got int 3"}
    assert call("memory_search", "[1]") == {"error": "arguments: expected a JSON object"}
    with pytest.raises(PermissionError, match="holds user 'default'"): memory_tools(st, user_id="dana")
    with pytest.raises(ValueError, match="not offered"): memory_tools(st, operations=["users"])


def test_agents_sdk_missing_names_the_extra(tmp_path):
    out = _without(["agents"], "import earmem.serve.agents_sdk as m\n"
                               "from earmem.memory.rules.hygiene import HashingEncoder\n"
                               "from earmem.memory.store import MemoryStore\n"
                               f"s = MemoryStore({str(tmp_path / 's')!r}, encoder=HashingEncoder(16))\n"
                               "try: m.memory_tools(s)\n"
                               "except ImportError as e: print(e)\n")
    assert "pip install 'earmem[agents]'" in out


# ---------------------------------------------------------------- AutoGen
@pytest.fixture(scope="module")
def encoder():
    from earmem.core import Encoder
    return Encoder()   # the bundled all-MiniLM-L6-v2: the store's relevance floor is calibrated for a real model


@pytest.fixture
def autogen():
    pytest.importorskip("autogen_agentchat")
    from autogen_core import memory
    return memory


def _memory_lines(body) -> list:
    return [line for m in body["messages"] if m["role"] == "system" for line in m["content"].splitlines() if "From memory (" in line]


def _assistant(chat, memory):
    from autogen_agentchat.agents import AssistantAgent
    from autogen_ext.models.openai import OpenAIChatCompletionClient
    client = OpenAIChatCompletionClient(model="scripted", base_url=chat.url, api_key="not-used",
                                        model_info={"vision": False, "function_calling": True, "json_output": False, "family": "unknown",
                                                    "structured_output": False, "multiple_system_messages": True})
    return AssistantAgent(name="assistant", model_client=client, memory=[memory], system_message="You are a helpful assistant.")


def test_autogen_example_end_to_end(autogen, encoder, tmp_path):
    "AutoGen's memory example: an AssistantAgent with EarmemMemory run on a task; the user's memory reaches the model's request, after a reopen too, and another user's request carries none of it."
    from earmem.serve.autogen_memory import INJECT_HEADER, EarmemMemory
    answer = lambda b: " | ".join(line.split("): ", 1)[1] for line in _memory_lines(b)) or "nothing"
    chat = ScriptedChat([answer] * 3)
    try:
        with StorePool(tmp_path / "users", encoder=encoder) as pool:
            dana = EarmemMemory(pool, user_id="dana", agent_id="assistant")
            asyncio.run(dana.add(autogen.MemoryContent(content="Dana's favourite editor is Helix", mime_type=autogen.MemoryMimeType.TEXT,
                                                       metadata={"kind": "preference"})))
            asyncio.run(dana.add(autogen.MemoryContent(content="Dana waters the office plants on Tuesdays", mime_type="text/markdown")))
            first = asyncio.run(_assistant(chat, dana).run(task="Which editor do I like?"))
            lee = asyncio.run(_assistant(chat, EarmemMemory(pool, user_id="lee", agent_id="assistant")).run(task="Which editor do I like?"))
            assert not pool.stored("lee")
        with StorePool(tmp_path / "users", encoder=encoder) as again:   # a new process's view: only the folder carries anything over
            later = asyncio.run(_assistant(chat, EarmemMemory(again, user_id="dana", agent_id="assistant")).run(task="Which editor do I like?"))
    finally:
        chat.close()
    dana_req, lee_req, later_req = chat.requests
    system = [m["content"] for m in dana_req["messages"] if m["role"] == "system"]
    assert system[0] == "You are a helpful assistant." and system[1].startswith(INJECT_HEADER + "\n"), system
    assert any(line.endswith("Dana's favourite editor is Helix") and "preference" in line for line in _memory_lines(dana_req)), dana_req
    assert "Helix" in first.messages[-1].content and "Helix" in later.messages[-1].content
    assert _memory_lines(lee_req) == [] and "Helix" not in str(lee_req) and lee.messages[-1].content == "nothing"
    kinds = [type(m).__name__ for m in first.messages]
    assert kinds == ["TextMessage", "MemoryQueryEvent", "TextMessage"], kinds   # AutoGen reports what the memory gave the model
    assert first.messages[1].content[0].content == "Dana's favourite editor is Helix"


def test_autogen_scopes_mimes_and_clear(autogen, encoder, tmp_path):
    from autogen_core import CancellationToken
    from earmem.serve.autogen_memory import EarmemMemory, MimeTypeError
    M = autogen.MemoryContent
    with StorePool(tmp_path / "users", encoder=encoder) as pool:
        helper, planner = (EarmemMemory(pool, user_id="dana", agent_id=a, run_id="r1") for a in ("helper", "planner"))
        asyncio.run(helper.add(M(content="Dana's favourite editor is Helix", mime_type="text/plain")))
        asyncio.run(planner.add(M(content={"editor_theme": "gruvbox"}, mime_type="application/json")))
        got = asyncio.run(helper.query("Which editor does Dana like?")).results
        assert [c.content for c in got] == ["Dana's favourite editor is Helix"] and got[0].metadata["agent_id"] == "helper"
        assert got[0].metadata["score"] > 0 and got[0].mime_type == "text/plain"
        theme = asyncio.run(planner.query(M(content="Which editor theme does Dana use?", mime_type="text/plain"))).results
        assert [(c.content, c.mime_type) for c in theme] == [({"editor_theme": "gruvbox"}, "application/json")]
        assert asyncio.run(helper.query("What did the quarterly tax filing say about depreciation?")).results == []   # below the floor
        with pytest.raises(MimeTypeError, match="'image/png'"):
            asyncio.run(helper.add(M(content="x", mime_type="image/png")))
        with pytest.raises(MimeTypeError, match="application/octet-stream"):
            asyncio.run(helper.add(M(content=b"x", mime_type=autogen.MemoryMimeType.BINARY)))
        token = CancellationToken(); token.cancel()
        asyncio.run(helper.add(M(content="never written", mime_type="text/plain"), token))
        assert "never written" not in [r.text for r in pool.store("dana").records()]
        asyncio.run(helper.clear())                                           # the helper's scope only
        assert [r.text for r in pool.store("dana").records() if r.status == "active"] == ['{"editor_theme": "gruvbox"}']
        asyncio.run(EarmemMemory(pool, user_id="dana").clear())               # no scope: the user's whole store
        assert [r for r in pool.store("dana").records() if r.status == "active"] == []
        with pytest.raises(ValueError, match="user_id: is required"): EarmemMemory(pool)
    with pytest.raises(PermissionError, match="holds user 'default'"):
        EarmemMemory(MemoryStore(tmp_path / "one", encoder=HashingEncoder(16)), user_id="dana")


def test_autogen_missing_names_the_extra():
    out = _without(["autogen_core"], "import earmem.serve.autogen_memory as m\n"
                                     "try: from earmem.serve.autogen_memory import EarmemMemory\n"
                                     "except ImportError as e: print(e)\n")
    assert "pip install 'earmem[autogen]'" in out
