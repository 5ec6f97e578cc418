"""Tests of the framework retrievers (earmem.serve.frameworks): LangChain documents and LlamaIndex nodes with their metadata,
filters, feedback from cited documents (including after a later retrieval), async use, bad input, and both frameworks
missing."""
import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("langchain_core")
pytest.importorskip("llama_index.core")

from earmem.serve.frameworks import (cited_ids, langchain_retriever, langchain_retriever_class, llamaindex_retriever,
                               llamaindex_retriever_class)
from earmem.memory.rules.hygiene import HashingEncoder, StoreConfig
from earmem.memory.store import MemoryStore

ROOT = Path(__file__).resolve().parents[1]
QUESTION = "which database for orders?"


@pytest.fixture
def store(tmp_path):
    cfg = StoreConfig(recency_weight=0, importance_weight=0, min_relevance=-1.0, candidates=8, balanced=False,
                      learner_gate=0, ear={"lr": 0.05, "B": 4, "s": 3})
    s = MemoryStore(tmp_path / "s", encoder=HashingEncoder(64), config=cfg)
    s.add("Dana picked Postgres for the orders service database", "decision", ["Dana"], id="m1", timestamp="2026-03-04")
    s.add("Dana said the orders database question keeps coming up in standups", "episode", ["Dana"], id="m2")
    s.add("Lee prefers tea over coffee in the afternoon", "preference", ["Lee"], id="m3")
    return s


def test_langchain_documents(store):
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
    r = langchain_retriever(store, k=3)
    assert isinstance(r, BaseRetriever)
    docs = r.invoke(QUESTION)
    assert all(isinstance(d, Document) for d in docs)
    assert [d.metadata["id"] for d in docs][:2] == ["m2", "m1"]
    md = docs[1].metadata
    assert md["kind"] == "decision" and md["timestamp"].startswith("2026-03-04") and md["search_id"] == "s1"
    assert md["score"] == pytest.approx(md["relevance"]) and md["rank"] == 2
    assert docs[0].metadata["score"] >= docs[1].metadata["score"] >= docs[2].metadata["score"]


def test_langchain_feedback_from_documents_of_an_earlier_retrieval(store):
    r = langchain_retriever(store, k=2)
    first = r.invoke(QUESTION)
    r.invoke("tea")  # a later retrieval must not capture the feedback on the first one
    fb = r.feedback([d for d in first if d.metadata["id"] == "m1"])
    assert fb["search_id"] == "s1" and fb["labels"] == {"m2": -1, "m1": 1}
    assert r.invoke(QUESTION)[0].metadata["id"] == "m1"
    assert store.stats()["feedback"] == 1


def test_langchain_filters_async_and_batch(store):
    r = langchain_retriever(store, k=5, entities=["Lee"])
    assert [d.metadata["id"] for d in r.invoke(QUESTION)] == ["m3"]
    docs = asyncio.run(langchain_retriever(store, k=1).ainvoke(QUESTION))
    assert len(docs) == 1
    assert [len(x) for x in langchain_retriever(store, k=1).batch([QUESTION, "tea"])] == [1, 1]


def test_langchain_bad_input(store):
    with pytest.raises(TypeError, match="colour: unknown argument of search_kwargs"): langchain_retriever(store, colour="red")
    with pytest.raises(ValueError, match="did you mean 'kinds'"): langchain_retriever(store, kind=["fact"])
    with pytest.raises(ValueError, match="kinds: expected one of"): langchain_retriever(store, kinds=["rumour"])
    with pytest.raises(ValueError, match="k"): langchain_retriever(store, k=0)
    r = langchain_retriever(store)
    with pytest.raises(ValueError, match="query"): r.invoke("   ")
    with pytest.raises(ValueError, match="no search"): r.feedback(["m1"])
    r.invoke(QUESTION)
    with pytest.raises(ValueError, match="not among the hits"): r.feedback(["m404"])
    with pytest.raises(ValueError, match="disagrees"): r.feedback(r.invoke(QUESTION)[:1], search_id="s1")


def test_llamaindex_nodes_and_feedback(store):
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import MetadataMode, NodeWithScore
    r = llamaindex_retriever(store, k=2)
    assert isinstance(r, BaseRetriever) and isinstance(r, llamaindex_retriever_class())
    nodes = r.retrieve(QUESTION)
    assert all(isinstance(n, NodeWithScore) for n in nodes)
    assert [n.node.node_id for n in nodes] == ["m2", "m1"] and nodes[0].score >= nodes[1].score
    llm_text = nodes[1].node.get_content(MetadataMode.LLM)
    assert "kind: decision" in llm_text and "search_id" not in llm_text and "score" not in llm_text
    fb = r.feedback([nodes[1].node])  # a bare TextNode works too
    assert fb["labels"] == {"m2": -1, "m1": 1}
    assert r.retrieve(QUESTION)[0].node.node_id == "m1"
    assert asyncio.run(r.aretrieve("tea"))[0].node.node_id == "m3"


def test_llamaindex_filters(store):
    assert [n.node.node_id for n in llamaindex_retriever(store, k=5, kinds=["preference"]).retrieve(QUESTION)] == ["m3"]
    with pytest.raises(TypeError, match="colour: unknown argument of search_kwargs"): llamaindex_retriever(store, colour="red")
    assert [n.node.node_id for n in llamaindex_retriever(store, k=5, store="episodic").retrieve(QUESTION)] == ["m2"]


def test_every_filter_field_and_the_shared_tool_layer(store):
    "search_kwargs take SearchFilter's fields and min_relevance; retrievers on one store share its search ids."
    ids = lambda **kw: [d.metadata["id"] for d in langchain_retriever(store, k=5, **kw).invoke(QUESTION)]
    assert ids(kinds=["decision"]) == ["m1"] and ids(entities=["Lee"]) == ["m3"] and ids(store="episodic") == ["m2"]
    assert ids(since="2026-03-04T00:00:00Z", until="2026-03-04T00:00:01Z") == ["m1"] and ids(min_relevance=0.99) == []
    try: assert ids(metadata={"project": "orders"}) == []                    # no memory carries that metadata
    except ValueError as e: assert str(e).startswith("metadata:")           # or the backend names what it cannot filter yet
    lc, li = langchain_retriever(store, k=2), llamaindex_retriever(store, k=2)
    assert lc.tools is li.tools is store.tools
    nodes = li.retrieve(QUESTION)
    fb = lc.feedback([nodes[1].node.node_id], search_id=nodes[1].node.metadata["search_id"])   # cited through the other door
    assert fb["labels"] == {"m2": -1, "m1": 1} and set(fb) >= {"search_id", "labels", "loss"}


def test_cited_ids_shapes():
    assert cited_ids("m1") == (["m1"], None)
    assert cited_ids([]) == ([], None)
    with pytest.raises(TypeError): cited_ids([object()])


def test_without_the_frameworks(tmp_path):
    code = ("import sys; sys.modules['langchain_core'] = None; sys.modules['llama_index'] = None\n"
            "import earmem.serve.frameworks as f\n"
            "from earmem.memory.rules.hygiene import HashingEncoder\n"
            "from earmem.memory.store import MemoryStore\n"
            f"s = MemoryStore({str(tmp_path / 's')!r}, encoder=HashingEncoder(16))\n"
            "for make in (f.langchain_retriever, f.llamaindex_retriever):\n"
            "    try: make(s)\n"
            "    except ImportError as e: print(e)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "pip install 'earmem[langchain]'" in r.stdout and "pip install 'earmem[llamaindex]'" in r.stdout
