"""Issue 38: EARM in the store beyond the chapter's cells — the experience survives reopening and is shared by a second
handle, scores are never bought twice across handles, it is per user and erased with its memories (these on SQLite and on
PostgreSQL, the `pg_url` server), the tool layer and the CLI rerank through a scripted OpenAI-compatible LLM (the real
client), and the matrix survives SIGKILL during reranked searches (slow)."""
import json, os, signal, sqlite3, subprocess, sys, textwrap, threading, time, uuid
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import numpy as np
import pytest

from earmem.memory.rules.hygiene import HashingEncoder, StoreConfig
from earmem.memory.backends.sqlite import has_experience
from earmem.memory.store import MemoryStore, MemoryTools, Rerank, SimulatedScorer, LLMRelevanceScorer

ROOT = Path(__file__).resolve().parents[1]
PEOPLE = ["Ann", "Bob", "Cleo", "Dev", "Eli"]
THINGS = ["cats", "cello", "chess", "sailing", "pottery", "running", "baking", "tennis"]
CONFIG = StoreConfig(min_relevance=-1.0, recency_weight=0.0, importance_weight=0.0)


def fill(path, **kw):
    st = MemoryStore(path, encoder=HashingEncoder(64), config=CONFIG, **kw)
    st.add_many([{"text": f"{p} likes {t}", "kind": "fact", "source": f"D{i + 1}:{j + 1}"}
                 for i, p in enumerate(PEOPLE) for j, t in enumerate(THINGS)])
    return st


GOLD = {f"what does {p} like?": [f"D{i + 1}:{j + 1}" for j in range(len(THINGS))] for i, p in enumerate(PEOPLE)}


class Scripted(BaseHTTPRequestHandler):
    "An OpenAI-compatible chat endpoint: 9 for a memory sharing a word of 3+ letters with the question, else 0."
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        user = body["messages"][-1]["content"]
        q = json.loads(user.split("<question>\n")[1].split("\n</question>")[0])
        recs = json.loads(user.split("<memories>\n")[1].split("\n</memories>")[0])
        words = {w.strip("?.,").lower() for w in q.split() if len(w) >= 3}
        scores = [{"index": r["index"], "score": 9 if words & {w.lower() for w in r["text"].split()} else 0} for r in recs]
        out = json.dumps({"choices": [{"message": {"content": json.dumps({"scores": scores})}}]}).encode()
        self.send_response(200); self.send_header("Content-Type", "application/json"); self.end_headers(); self.wfile.write(out)

    def log_message(self, *a): pass


@pytest.fixture(params=["sqlite", "postgres"])
def place(request, tmp_path):
    "open(user=None) -> (where, keyword arguments) of one store: a folder, or a namespace of the tests' PostgreSQL server only this test uses."
    if request.param == "sqlite":
        return lambda user=None: (tmp_path / "s", {} if user is None else {"namespace": user})
    url, tag = request.getfixturevalue("pg_url"), uuid.uuid4().hex[:8]
    return lambda user=None: (url, {"namespace": f"{user or 'default'}-{tag}"})


def reopen(place, user=None):
    where, kw = place(user)
    return MemoryStore(where, encoder=HashingEncoder(64), config=CONFIG, **kw)


@pytest.fixture(scope="module")
def llm_url():
    server = HTTPServer(("127.0.0.1", 0), Scripted)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}/v1"
    server.shutdown()


def test_experience_survives_reopen_and_is_never_bought_twice(place):
    plan = Rerank(SimulatedScorer(GOLD), n_candidates=20, block_size=1, rank=2)
    where, kw = place()
    with fill(where, **kw) as st:
        first = st.search("what does Ann like?", k=5, rerank=plan)
        assert first.rerank["scorer_calls"] == 20 and plan.scorer.calls == 20
    with reopen(place) as st, reopen(place) as other:
        again = st.search("what does Ann like?", k=5, rerank=plan)       # reopened: the scores are read back, none bought
        assert (again.rerank["scorer_calls"], again.rerank["reused"]) == (0, 20)
        assert again.ids == first.ids
        bob = other.search("what does Bob like?", k=5, rerank=plan)     # a second handle continues the same schedule
        assert bob.rerank["stage"] == 3 and bob.rerank["scorer_calls"] == plan.budget(2, 20)[1]
        assert st.experience_stats()["queries"] == 3
        assert plan.scorer.calls == 20 + bob.rerank["scorer_calls"]    # the simulator was asked only for what was bought
        assert [r[0] for r in st._backend.experience_rows()] == [1, 2, 3]


def test_tool_layer_and_refusal(tmp_path, llm_url):
    with fill(tmp_path / "s") as st:
        tools = MemoryTools(st)
        with pytest.raises(ValueError, match="rerank: True asks for the store's reranker"):
            tools.search("what does Cleo like?", rerank=True)
        st.set_reranker(Rerank(LLMRelevanceScorer(llm_url, "scripted", batch_size=8), n_candidates=20, rank=2))
        out = tools.search("what does Cleo like?", k=5, rerank=True)
        assert out["rerank"]["scorer"] == "llm" and out["rerank"]["scorer_calls"] == 20 and out["rerank"]["failure"] is None
        assert all(h["text"].startswith("Cleo") and h["reranked"]["source"] == "observed" for h in out["hits"])
        with pytest.raises(TypeError, match="rerank: expected true or false"):
            tools.search("x", rerank="yes")


def test_llm_failure_is_named_and_not_fatal(tmp_path):
    with fill(tmp_path / "s") as st:
        dead = LLMRelevanceScorer("http://127.0.0.1:9/v1", "none", timeout=0.5, retries=0)
        hits = st.search("what does Dev like?", k=5, rerank=Rerank(dead, n_candidates=20))
        assert "llm failed" in hits.rerank["failure"] and len(hits) == 5
        assert st.experience_stats()["queries"] == 0     # nothing observed, nothing logged


def test_cli_search_rerank(tmp_path, llm_url):
    fill(tmp_path / "s").close()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("EARMEM_LLM_BASE_URL", None); env.pop("OPENAI_BASE_URL", None)
    run = lambda *a: subprocess.run([sys.executable, "-m", "earmem.cli", "memory", "search", *a, "-s", str(tmp_path / "s")],
                                    capture_output=True, text=True, env=env, cwd=ROOT)
    r = run("what does Eli like?", "--rerank", "--scorer-url", llm_url, "--scorer-model", "scripted", "--rerank-candidates", "20", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["rerank"]["scorer_calls"] == 20 and all(h["text"].startswith("Eli") for h in out["hits"])
    r = run("what does Eli like?", "--rerank")
    assert r.returncode != 0 and "scorer-url: --rerank needs a relevance scorer" in r.stderr


KILLED = textwrap.dedent("""
    import sys
    from pathlib import Path
    sys.path.insert(0, {root!r})
    from tests.test_rerank import GOLD, CONFIG
    from earmem.memory.rules.hygiene import HashingEncoder
    from earmem.memory.store import MemoryStore, Rerank, SimulatedScorer
    st = MemoryStore(Path({path!r}), encoder=HashingEncoder(64), config=CONFIG)
    plan = Rerank(SimulatedScorer(GOLD), n_candidates=20, block_size=1, rank=2)
    qs = list(GOLD)
    i = 0
    print("ready", flush=True)
    while True:
        st.search(qs[i % len(qs)] + " " * (i // len(qs)), k=5, rerank=plan); i += 1
""")


@pytest.mark.slow
def test_matrix_survives_sigkill(tmp_path, trials=int(os.environ.get("EARMEM_SIGKILL_TRIALS", "10"))):
    fill(tmp_path / "s").close()
    rng = np.random.default_rng(0)
    for trial in range(trials):
        p = subprocess.Popen([sys.executable, "-c", KILLED.format(root=str(ROOT), path=str(tmp_path / "s"))], stdout=subprocess.PIPE, text=True)
        assert p.stdout.readline().strip() == "ready"
        time.sleep(float(rng.uniform(0.05, 0.6)))
        p.send_signal(signal.SIGKILL); p.wait()
        con = sqlite3.connect(tmp_path / "s" / "memories.sqlite")
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        orphans = con.execute("SELECT COUNT(*) FROM experience_queries WHERE seq NOT IN (SELECT query FROM experience_scores)").fetchone()[0] \
            if has_experience(con) else 0   # killed before its first reranked search committed
        con.close()
        assert orphans == 0, f"trial {trial}: a query row without its scores"
        with MemoryStore(tmp_path / "s", encoder=HashingEncoder(64), config=CONFIG) as st:   # reopens, reads and extends the matrix
            n = st.experience_stats()["queries"]
            st.search("what does Ann like?", k=5, rerank=Rerank(SimulatedScorer(GOLD), n_candidates=20, block_size=1, rank=2))
            assert st.experience_stats()["queries"] == n + 1


def test_door_reranker_from_environment(tmp_path, llm_url, monkeypatch):
    monkeypatch.setenv("EARMEM_RERANK_URL", llm_url); monkeypatch.setenv("EARMEM_RERANK_MODEL", "scripted")
    with fill(tmp_path / "s") as st:
        out = MemoryTools(st).search("what does Bob like?", k=3, rerank=True)   # what HTTP and MCP call
        assert out["rerank"]["scorer"] == "llm" and all(h["text"].startswith("Bob") for h in out["hits"])


def test_experience_is_per_user(place):
    plan = Rerank(SimulatedScorer(GOLD), n_candidates=20, rank=2)
    dana, lee = reopen(place, "dana"), reopen(place, "lee")
    for st in (dana, lee): st.add_many([f"{p} likes {t}" for p in PEOPLE for t in THINGS])
    dana.search("what does Ann like?", rerank=plan)
    assert dana.experience_stats()["queries"] == 1 and lee.experience_stats()["queries"] == 0
    assert lee.search("what does Ann like?", rerank=plan).rerank["reused"] == 0   # Lee's store never saw Dana's scores
    dana.clear(); assert dana.experience_stats()["scores"] == 0 and lee.experience_stats()["queries"] == 1
    dana.close(); lee.close()


def test_cli_stats_shows_the_matrix(tmp_path):
    with fill(tmp_path / "s") as st: st.search("what does Ann like?", rerank=Rerank(SimulatedScorer(GOLD), n_candidates=20))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-m", "earmem.cli", "memory", "stats", "-s", str(tmp_path / "s"), "--json"],
                       capture_output=True, text=True, env=env, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["reranking"] == {"queries": 1, "scores": 20, "memories": 20, "scorers": {"simulated": 20},
                                                 "completed": 0, "completed_share": 0.0}


def test_an_update_in_another_handle_drops_the_old_scores(place):
    plan = Rerank(SimulatedScorer(GOLD), n_candidates=20, block_size=1, rank=2)
    where, kw = place()
    with fill(where, **kw) as st, reopen(place) as other:
        first = st.search("what does Ann like?", k=5, rerank=plan)
        other.update(first.ids[0], text="Ann gave up on that")            # another handle rewrites a scored memory
        again = st.search("what does Ann like?", k=5, rerank=plan)        # this handle rebuilds: the old score is not reused
        assert again.rerank["reused"] == 19 and first.ids[0] not in [h.id for h in again if h.reranked["source"] == "observed"]


def scored(st) -> dict:
    "memory id -> how many stored scores name it (read from the backend's tables)."
    out = {}
    for _, _, _, cells in st._backend.experience_rows():
        for m, _, _ in cells: out[m] = out.get(m, 0) + 1
    return out


def test_scores_go_with_their_memory(place):
    "Delete, retract, text update, supersede and clear erase the scores of the memories they touch, in their own commit, on both backends."
    plan = Rerank(SimulatedScorer(GOLD), n_candidates=50, block_size=1, rank=2)
    where, kw = place()
    with fill(where, **kw) as st, reopen(place) as other:
        old = st.add("The standup moved to 4pm", "decision").id
        first = st.search("what does Ann like?", k=5, rerank=plan)
        ids = first.ids
        st.search("what does Bob like?", k=5, rerank=plan)
        before = scored(st)
        assert first.rerank["scorer_calls"] == 41 and all(before.get(m) for m in [*ids[:4], old])
        assert st._backend.experience_erasures() == 0
        st.delete(ids[0]); st.retract(ids[1], "wrong"); st.update(ids[2], text="Ann gave up on that")
        assert st.add("The standup moved to 3pm", "decision").supersedes == old
        after = scored(other)                                           # another handle reads the committed state
        assert not any(after.get(m) for m in [*ids[:3], old]) and after[ids[3]] == before[ids[3]]
        assert other._backend.experience_erasures() == 4                # each write that took scores away counted once
        again = other.search("what does Ann like?", k=5, rerank=plan)   # rebuilt from what remains: the erased are not reused
        assert again.rerank["reused"] == 41 - 4                          # every score of the first asking but the 4 erased
        st.clear()
        assert scored(other) == {} and other.experience_stats() == {"queries": 0, "scores": 0, "memories": 0, "scorers": {},
                                                                                  "completed": 0, "completed_share": 0.0}


def test_a_failed_write_logs_nothing(place):
    "The experience is written in the search's transaction: a write that fails leaves neither the query nor its scores."
    where, kw = place()
    with fill(where, **kw) as st:
        first = st._backend.ids()[0]
        with pytest.raises(KeyError):
            with st._write():
                st._backend.log_experience(1.0, "lost", np.zeros(64, np.float32).tobytes(), [first], [0.5], "sim")
                raise KeyError("the search failed before its commit")
        assert st._backend.experience_rows() == [] and st.experience_stats()["queries"] == 0
        with st._write(): seq = st._backend.log_experience(2.0, "kept", np.zeros(64, np.float32).tobytes(), [first], [0.5], "sim")
        assert seq == 1 and [r[1] for r in st._backend.experience_rows()] == ["kept"]


def test_an_older_schema_gets_the_tables(pg_url):
    "A PostgreSQL schema an earlier earmem made has no experience tables: a reader finds no experience, the next writer makes them."
    from earmem.memory.backends import PostgresBackend
    schema = f"old_{uuid.uuid4().hex[:8]}"
    b = PostgresBackend(pg_url, 8, schema=schema)
    b._q("DROP TABLE {s}.experience_scores, {s}.experience_queries"); b.close()
    r = PostgresBackend(pg_url, 8, schema=schema, readonly=True)
    assert (r.experience_rows(), r.experience_counts()["queries"], r.experience_erasures(), r.has_experience()) == ([], 0, 0, False)
    w = PostgresBackend(pg_url, 8, schema=schema)                    # a writer's _ensure_schema runs chapter 20c's UPGRADES
    with w.write(): assert w.log_experience(1.0, "q", np.ones(8, np.float32).tobytes(), ["m1"], [0.5], "sim") == 1
    assert [(x[0], x[3]) for x in r.experience_rows()] == [(1, [("m1", 0.5, "sim")])]   # the reader sees them now
    w._q("ALTER TABLE {s}.experience_queries DROP COLUMN completed"); w.close()   # tables made before searches counted completions
    assert r.experience_counts()["completed"] == 0                                 # a reader copes without the column
    w = PostgresBackend(pg_url, 8, schema=schema)                                  # the next writer adds it
    with w.write(): w.log_experience(2.0, "q2", np.ones(8, np.float32).tobytes(), ["m2"], [0.4], "sim", completed=6)
    assert (r.experience_counts()["completed"], w.experience_counts()["queries"]) == (6, 2)
    w._q("DROP SCHEMA {s} CASCADE"); r.close(); w.close()


def tiny_cross_encoder(where: Path) -> Path:
    "A real one-label BERT cross-encoder, two small layers with random weights and the bundled MiniLM's tokenizer, saved to `where`."
    import shutil, torch
    from transformers import BertConfig, BertForSequenceClassification
    from earmem.core import _bundled_model_path
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                     max_position_embeddings=128, num_labels=1)
    BertForSequenceClassification(cfg).save_pretrained(where)
    src = Path(_bundled_model_path())
    for f in ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"): shutil.copy(src / f, where / f)
    return where


def test_a_real_cross_encoder_reranks_by_its_own_scores(tmp_path):
    """A sentence-transformers CrossEncoder loaded by path (a tiny one built here: none ships offline) scores the candidates;
    the observed scores are exactly the model's, the hits are in their order, and the matrix keeps them under its name."""
    pytest.importorskip("sentence_transformers")
    from sentence_transformers import CrossEncoder
    from earmem.memory.store import CrossEncoderScorer
    path = tiny_cross_encoder(tmp_path / "ce")
    scorer = CrossEncoderScorer(str(path))
    with fill(tmp_path / "s") as st:
        hits = st.search("what does Cleo like?", k=5, rerank=Rerank(scorer, n_candidates=12))
        assert hits.rerank["failure"] is None and hits.rerank["scorer_calls"] == 12 == scorer.calls
        assert all(h.reranked["source"] == "observed" for h in hits)
        own = CrossEncoder(str(path)).predict([("what does Cleo like?", h.text) for h in hits])
        np.testing.assert_allclose([h.reranked["score"] for h in hits], own, rtol=1e-4, atol=1e-5)
        assert all(0.0 <= s <= 1.0 for s in own) and list(own) == sorted(own, reverse=True)
        assert st.experience_stats()["scorers"] == {f"cross-encoder:{path}": 12}


def test_a_migration_carries_the_experience_both_ways(tmp_path, pg_url):
    "migrate_store copies the bought scores (with each query's completed count) from SQLite to PostgreSQL and back; the copy reuses them."
    from earmem.memory.service.migrate import migrate_store
    ns = f"mig-{uuid.uuid4().hex[:8]}"
    plan = Rerank(SimulatedScorer(GOLD), n_candidates=20, block_size=1, rank=2)
    with fill(tmp_path / "s") as st:
        for q in GOLD: st.search(q, k=5, rerank=plan)
        paid = st.experience_stats()
    assert paid["queries"] == 5 and paid["completed"] > 0
    assert migrate_store(tmp_path / "s", pg_url, dst_namespace=ns)["experience"] == 5
    assert migrate_store(pg_url, tmp_path / "back", src_namespace=ns)["experience"] == 5
    for where, kw in ((pg_url, {"namespace": ns}), (tmp_path / "back", {})):
        with MemoryStore(where, encoder=HashingEncoder(64), config=CONFIG, **kw) as st:
            assert st.experience_stats() == paid
            again = st.search("what does Ann like?", k=5, rerank=plan)   # asked before the move: nothing bought again
            assert again.rerank["scorer_calls"] == 0 and again.rerank["reused"] > 0
