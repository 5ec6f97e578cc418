"""Tests of the agent-framework integrations against the real packages: the LangGraph `BaseStore` (earmem.serve.langgraph_store)
— its contract (put, get, search, delete, list_namespaces, batch and the async twins), exact-key writes, user isolation and
LangGraph's own long-term-memory example end to end — and the OpenAI Agents SDK tools (earmem.serve.agents_sdk), run by the
SDK's own Runner against a scripted model; each integration's message naming its extra when the package is missing."""
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
langgraph = pytest.importorskip("langgraph")
from langgraph.store.base import BaseStore, GetOp, PutOp, SearchOp  # noqa: E402
from earmem.serve.langgraph_store import item_id, langgraph_store  # noqa: E402


@pytest.fixture
def pool(tmp_path):
    with StorePool(tmp_path / "users", encoder=HashingEncoder(64)) as p: yield p


@pytest.fixture
def lg(pool):
    return langgraph_store(pool, fields=["text"])


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


def test_langgraph_list_namespaces(lg):
    for ns in [("alice", "memories"), ("alice", "docs", "2026"), ("bob", "memories")]:
        lg.put(ns, "k", {"text": "x"})
    assert lg.list_namespaces() == [("alice", "docs", "2026"), ("alice", "memories"), ("bob", "memories")]
    assert lg.list_namespaces(prefix=("alice",)) == [("alice", "docs", "2026"), ("alice", "memories")]
    assert lg.list_namespaces(suffix=("memories",)) == [("alice", "memories"), ("bob", "memories")]
    assert lg.list_namespaces(prefix=("*", "memories")) == [("alice", "memories"), ("bob", "memories")]
    assert lg.list_namespaces(max_depth=2) == [("alice", "docs"), ("alice", "memories"), ("bob", "memories")]
    assert lg.list_namespaces(limit=1, offset=2) == [("bob", "memories")]


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
