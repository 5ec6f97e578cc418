"""One contract for every storage backend: the same MemoryStore tests on a store folder (SQLite) and on a
PostgreSQL URL (a fresh namespace of the `pg_url` server per test). Everything goes through MemoryStore, so a
backend passes when the store behaves the same on it: persistence across reopen and across processes, dedupe and
updates with their history, search filters and the relevance floor, the injection budget, feedback learning (the
learner is a cache of the feedback log), repair, and namespaces."""
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import numpy as np
import pytest

from earmem.memory.rules.hygiene import DAY, HashingEncoder, StoreConfig, to_epoch
from earmem.memory.store import MemoryStore
from earmem.memory.backends.boundary import redact_url

ROOT = Path(__file__).resolve().parents[1]
DIM = 64


class Location:
    "Where a test's store lives: `open(**kw)` opens (or creates) it; `args` are what a second process needs."
    def __init__(self, kind, where, namespace="default"):
        self.kind, self.where, self.namespace = kind, str(where), namespace

    def open(self, encoder=True, **kw):
        "The store (hashing vectors score low, so the relevance floor is off unless a test sets a config)."
        enc = HashingEncoder(DIM) if encoder else None
        if encoder and "config" not in kw: kw["config"] = StoreConfig(min_relevance=-1.0)
        return MemoryStore(self.where, encoder=enc, namespace=self.namespace, **kw)

    def other(self, namespace):
        return Location(self.kind, self.where, namespace)


@pytest.fixture(params=["sqlite", "postgres"])
def loc(request, tmp_path):
    if request.param == "sqlite": return Location("sqlite", tmp_path / "store")
    url = request.getfixturevalue("pg_url")
    return Location("postgres", url, f"t-{uuid.uuid4().hex[:12]}")


NOTES = [("User (Dana) chose Postgres over DynamoDB for the orders service", "decision", ["Dana", "orders"], "2026-03-04"),
         ("Dana prefers short answers with code first", "preference", ["Dana"], "2026-02-01"),
         ("The orders service runs on Postgres 16 in eu-west-1", "fact", ["orders"], "2026-01-10"),
         ("Lee works from Lisbon and likes long walks", "fact", ["Lee"], "2025-12-01"),
         ("Dana's deploy of orders failed on a missing migration", "failure", ["Dana", "orders"], "2026-03-10"),
         ("Chatted with Lee about the weather in Lisbon", "episode", ["Lee"], "2026-03-11")]


def fill(st):
    return [st.add(t, k, e, timestamp=ts, source="chat").id for t, k, e, ts in NOTES]


def test_persistence_across_reopen(loc):
    st = loc.open(); ids = fill(st)
    before = st.search("which database did Dana choose?", k=3)
    st.close()
    st = loc.open(encoder=False)  # the encoder comes back from the manifest
    assert isinstance(st.encoder, HashingEncoder) and len(st) == len(NOTES) and all(i in st for i in ids)
    after = st.search("which database did Dana choose?", k=3)
    assert after.ids == before.ids and len(after) == 3
    np.testing.assert_allclose([h.score for h in after], [h.score for h in before], atol=1e-6)
    assert [r.text for r in st.records()] == [n[0] for n in NOTES]
    st.close()
    with pytest.raises(ValueError, match="is closed"): st.search("x")


SECOND = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from earmem.memory.store import MemoryStore
from earmem.memory.backends.boundary import redact_url
st = MemoryStore(sys.argv[2], namespace=sys.argv[3])
hits = st.search("which database did Dana choose?", k=2)
r = st.add("Written by the second process about Kafka", "fact", ["Kafka"])
print(json.dumps({"ids": hits.ids, "len": len(st), "new": r.id}))
st.close()
"""


def test_a_second_process_reads_and_writes(loc):
    st = loc.open(); fill(st)
    here = st.search("which database did Dana choose?", k=2).ids
    out = subprocess.run([sys.executable, "-c", SECOND, str(ROOT), loc.where, loc.namespace], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["ids"] == here and got["len"] == len(NOTES) + 1  # counted after its own add
    assert got["new"] in st and st.search("Kafka", k=1).ids == [got["new"]]  # this store sees its commit
    assert len(st) == len(NOTES) + 1
    st.close()


def test_dedupe_merges_and_counts(loc):
    st = loc.open()
    a = st.add("User (Dana) prefers Go for backend services", "preference", ["Dana"])
    b = st.add("User (Dana) prefers Go for backend services!", "preference", ["dana"], importance=0.9)
    assert (b.action, b.id, b.count) == ("merged", a.id, 2) and len(st) == 1
    assert st.add("User (Dana) prefers Go for backend services", "episode", ["Dana"]).action == "inserted"  # an episode is not a claim
    c = st.add("User (Dana) prefers Go for backend services", "fact", ["Dana"])   # another claim kind, the same claim (issue 36)
    assert (c.action, c.id, c.count) == ("merged", a.id, 3)
    res = st.add_many(["Deploys happen on Fridays", "Deploys happen on Fridays."], kind="fact")
    assert [r.action for r in res] == ["inserted", "merged"] and res[0].id == res[1].id
    with pytest.raises(ValueError, match="already exists"): st.add("x", "fact", id=a.id)
    assert [h["action"] for h in st.history(a.id)] == ["insert", "merge", "merge"] and st.get(a.id).count == 3
    assert st.add("explicit id", "fact", id="custom-1").id == "custom-1" and "custom-1" in st
    st.close()


def test_updates_supersede_with_history(loc):
    st = loc.open(config=StoreConfig(dedupe_threshold=0.4, min_relevance=-1.0))
    a = st.add("The standup moved to 4pm", "decision")
    b = st.add("The standup moved to 3pm", "decision")
    assert (b.action, b.supersedes) == ("updated", a.id)
    assert [h.text for h in st.search("when is the standup?")] == ["The standup moved to 3pm"]
    assert (st.get(a.id).status, st.get(a.id).metadata, st.get(b.id).metadata) == ("superseded", {"superseded_by": b.id, "valid_to": st.get(b.id).timestamp}, {"supersedes": a.id})
    assert (st.get(a.id).valid_to, st.get(b.id).valid_from, st.get(b.id).valid_to) == (st.get(b.id).timestamp, st.get(b.id).timestamp, None)
    assert [(h["id"], h["action"]) for h in st.history(b.id)] == [(a.id, "insert"), (b.id, "insert"), (a.id, "supersede")]
    assert st.stats()["superseded"] == 1 and st.check()["ok"]
    st.close()


def test_update_retract_delete(loc):
    clock = [to_epoch("2026-03-04")]
    st = loc.open(clock=lambda: clock[0])
    ids = fill(st)
    created = st.get(ids[1]).timestamp
    clock[0] += 5 * DAY
    rec = st.update(ids[1], text="Dana prefers short answers, code first, no preamble", reason="sharper")
    assert rec.timestamp == created and "no preamble" in rec.text  # the time of formation is kept
    assert st.search("answers code preamble", k=1).ids == [ids[1]]
    corr = st.retract(ids[2], "wrong region", correction="The orders service runs on Postgres 16 in us-east-1")
    assert st.get(ids[2]).status == "retracted" and ids[2] not in st.search("orders region", k=6).ids
    assert st.get(corr.id).metadata["corrects"] == ids[2]
    st.delete(ids[3])
    assert ids[3] not in st and [h["action"] for h in st.history(ids[3])] == ["insert", "delete"]
    with pytest.raises(KeyError): st.get(ids[3])
    assert len(st) == len(NOTES) - 2 + 1
    st.close()


def test_search_filters(loc):
    st = loc.open(config=StoreConfig(min_relevance=-1.0))
    ids = fill(st)
    q = "Dana orders Postgres Lee"
    assert {h.kind for h in st.search(q, k=6, kinds=["fact"])} == {"fact"}
    assert set(st.search(q, k=6, entities=["lee"]).ids) == {ids[3], ids[5]}  # case-insensitive
    assert set(st.search(q, k=6, since="2026-03-01").ids) == {ids[0], ids[4], ids[5]}
    assert set(st.search(q, k=6, until="2026-01-31").ids) == {ids[2], ids[3]}
    assert {h.store for h in st.search(q, k=6, store="episodic")} == {"episodic"}
    assert st.search(q, k=6, kinds=["correction"]).ids == []
    with pytest.raises(ValueError, match="kinds"): st.search(q, kinds=["gossip"])
    st.close()


def test_relevance_floor_and_k(loc):
    st = loc.open(config=StoreConfig(min_relevance=-1.0)); fill(st)
    all6 = st.search("Dana database choice", k=6)
    assert len(all6) == 6 and [h.rank for h in all6] == list(range(1, 7))
    assert all(a.score >= b.score for a, b in zip(list(all6), list(all6)[1:]))
    floor = sorted(h.relevance for h in all6)[3]
    high = st.search("Dana database choice", k=6, min_relevance=floor)
    assert 0 < len(high) < 6 and all(h.relevance >= floor for h in high)
    assert len(st.search("Dana database choice", k=2)) == 2
    st.close()


def test_inject_budget(loc):
    st = loc.open(config=StoreConfig(min_relevance=-1.0)); fill(st)
    hits = st.search("What did Dana decide about orders?", k=6)
    for budget in (10, 40, 400):
        block = st.inject(hits, budget)
        assert block.tokens <= budget and st.count_tokens(block) <= budget
    assert "[" + hits.ids[0] + "]" in st.inject(hits, 400)
    st.close()


def feedback_rounds(st, n, seed=0):
    rng = np.random.default_rng(seed)
    for i in range(n):
        hits = st.search(["Dana database", "Lee Lisbon", "orders failure"][i % 3], k=4)
        st.feedback(hits, cited=[hits.ids[int(rng.integers(len(hits)))]])


def test_feedback_learning_survives_reopen_and_repair(loc):
    st = loc.open(config=StoreConfig(min_relevance=-1.0, checkpoint_every=4)); fill(st)
    feedback_rounds(st, 6)
    s = st.stats()
    assert s["feedback"] == 6 and s["learner_steps"] == 6 and s["learner"]
    q = "Dana database"
    scores = [h.score for h in st.search(q, k=4)]
    st.close()  # checkpoints the 2 unsaved feedbacks
    st = loc.open()
    s2 = st.stats()
    assert (s2["learner_steps"], s2["feedback"], s2["learner"]) == (6, 6, st._learner_version) and s2["learner"].startswith("v")
    np.testing.assert_allclose([h.score for h in st.search(q, k=4)], scores, atol=1e-5)
    rep = st.repair()
    assert (rep["feedback"], rep["replayed"], rep["steps"]) == (6, 6, 6)
    np.testing.assert_allclose([h.score for h in st.search(q, k=4)], scores, atol=1e-4)
    st.close()


def test_a_second_store_learns_from_the_log(loc):
    a = loc.open(config=StoreConfig(min_relevance=-1.0, checkpoint_every=100)); fill(a)
    b = loc.open()
    feedback_rounds(a, 3)  # not yet checkpointed: b must replay the log
    b.search("Dana", k=1)
    assert b.stats()["learner_steps"] == 3 == a.stats()["learner_steps"]
    feedback_rounds(b, 2, seed=1)
    a.search("Dana", k=1)
    assert a.stats()["learner_steps"] == 5 == b.stats()["feedback"]
    a.close(); b.close()


def test_stats_check_export(loc, tmp_path):
    st = loc.open(); fill(st)
    s = st.stats()
    assert s["memories"] == len(NOTES) and s["by_kind"]["fact"] == 2 and s["bytes_on_disk"] > 0 and s["dim"] == DIM
    assert st.check() == {"ok": True, "memories": len(NOTES)}
    assert st.export(tmp_path / "out.jsonl") == len(NOTES)
    if loc.kind == "postgres":  # the URL is shown without its password
        assert s["namespace"] == loc.namespace and s["path"] == redact_url(loc.where) == str(st.path)
    st.close()


def test_namespaces(loc):  # a folder keeps namespaces in sub-folders; PostgreSQL in a column: the same behaviour
    a, b = loc.other(loc.namespace + "-a").open(), loc.other(loc.namespace + "-b").open()
    ra = a.add("Dana chose Postgres for orders", "decision", ["Dana"])
    rb = b.add("Lee picked DynamoDB for sessions", "decision", ["Lee"])
    assert ra.id == rb.id == "m1"  # ids are per namespace
    assert (len(a), len(b)) == (1, 1) and a.get("m1").text != b.get("m1").text
    assert a.search("database", k=5).ids == ["m1"] and "Lee" not in a.search("database", k=5)[0].text
    feedback_rounds_ns = a.search("database", k=1)
    a.feedback(feedback_rounds_ns, cited=["m1"])
    assert (a.stats()["feedback"], b.stats()["feedback"], b.stats()["learner_steps"]) == (1, 0, 0)
    with pytest.raises(FileNotFoundError, match="no memory store"): loc.other(loc.namespace + "-none").open(readonly=True)
    a.close(); b.close()


# Dense scores are the same numbers on both backends. Hybrid search adds each engine's own full-text ranking (SQLite
# FTS5's BM25, PostgreSQL's ts_rank_cd), so its fused scores differ a little between backends: same hits here, scores
# within LEXICAL_TOL.
LEXICAL_TOL = {"dense": 1e-5, "hybrid": 0.02}


@pytest.mark.parametrize("retriever", ["dense", "hybrid"])
def test_same_ranking_on_both_backends(pg_url, tmp_path, retriever):
    "The same writes and queries give the same hits on SQLite and PostgreSQL (a small store: HNSW is exact here)."
    locs = [Location("sqlite", tmp_path / "s"), Location("postgres", pg_url, f"t-{uuid.uuid4().hex[:12]}")]
    clock = [to_epoch("2026-03-20")]
    stores = [l.open(clock=lambda: clock[0], config=StoreConfig(min_relevance=-1.0, retriever=retriever)) for l in locs]
    for st in stores: fill(st)
    for q in ("which database did Dana choose?", "Lisbon", "orders failure"):
        got = [st.search(q, k=4) for st in stores]
        assert got[0].ids == got[1].ids
        np.testing.assert_allclose([h.score for h in got[0]], [h.score for h in got[1]], atol=LEXICAL_TOL[retriever])
    for st in stores: st.close()


WORKER = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from earmem.memory.store import MemoryStore
st = MemoryStore(sys.argv[2], namespace=sys.argv[3], lock_timeout=120)  # 8 writers queue on 2 shared cores: this test bounds no wait
w, added = int(sys.argv[4]), []
for i in range(8):
    added.append(st.add(f"worker {w} wrote ticket #{w * 100 + i} on topic {i % 3} for service s{w}", "fact", [f"W{w}"]).id)  # distinct tickets (the judge keeps identifiers apart)
    hits = st.search(f"topic {i % 3} service s{w}", k=3, touch=i % 2 == 0)
    if hits: st.feedback(hits, cited=[hits.ids[0]])
st.close()
print(json.dumps(added))
"""


PROCESSES = int(os.environ.get("EARMEM_PG_PROCESSES", "8"))  # issue 13's figure: 8 processes on one store


@pytest.mark.slow
def test_many_processes_on_one_postgres_store(pg_url):
    "PROCESSES processes add, search (touching) and give feedback on one store at once: no errors, nothing lost, learner == log."
    loc = Location("postgres", pg_url, f"t-{uuid.uuid4().hex[:12]}")
    loc.open(config=StoreConfig(min_relevance=-1.0, checkpoint_every=3)).close()
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, str(ROOT), loc.where, loc.namespace, str(w)], cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for w in range(PROCESSES)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0] * PROCESSES, [e[-2000:] for _, e in outs]
    added = [i for out, _ in outs for i in json.loads(out.strip().splitlines()[-1])]
    st = loc.open()
    assert all(i in st for i in added) and len(added) == 8 * PROCESSES == len(set(added))
    s = st.stats()
    assert s["feedback"] == 8 * PROCESSES and s["learner_steps"] == 8 * PROCESSES and st.check()["ok"]
    assert st.repair()["steps"] == 8 * PROCESSES
    print(f"{PROCESSES} processes: {len(added)} adds all present, {s['feedback']} feedback rows, learner steps {s['learner_steps']}, 0 errors")
    st.close()


def test_a_reader_searches_and_never_writes(loc):
    st = loc.open(); ids = fill(st)
    reader = MemoryStore(loc.where, namespace=loc.namespace, readonly=True)
    assert reader.search("Dana database", k=2).ids == st.search("Dana database", k=2).ids
    with pytest.raises(PermissionError, match="read-only"): reader.add("nope", "fact")
    st.delete(ids[0])
    assert ids[0] not in reader and len(reader) == len(NOTES) - 1  # the reader follows the writer's commits
    reader.close(); st.close()


NO_PSYCOPG = r"""
import sys
sys.path.insert(0, sys.argv[1])
sys.modules["psycopg"] = None
from earmem.memory.store import MemoryStore
try: MemoryStore("postgresql://someone@localhost/db", namespace="x")
except ImportError as e: print(e)
"""


def test_a_url_without_psycopg_says_what_to_install():
    out = subprocess.run([sys.executable, "-c", NO_PSYCOPG, str(ROOT)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert 'pip install "earmem[postgres]"' in out.stdout, out.stderr


@pytest.mark.parametrize("retriever", ["dense", "hybrid"])
def test_migrate_round_trip_sqlite_postgres_sqlite(pg_url, tmp_path, retriever):
    "SQLite → PostgreSQL (the CLI) → SQLite (the function): the same search results, history, feedback log and learner."
    from earmem.memory.service.migrate import migrate_store
    now = lambda: to_epoch("2026-03-20")
    cfg = StoreConfig(min_relevance=-1.0, checkpoint_every=2, retriever=retriever)
    src = Location("sqlite", tmp_path / "src").open(clock=now, config=cfg)
    ids = fill(src)
    src.update(ids[1], text="Dana prefers long answers with the reasoning first", reason="changed her mind")
    src.delete(ids[3])
    for q in ("which database did Dana choose?", "Lisbon", "how does Dana like answers?"):
        hits = src.search(q, k=3); src.feedback(hits, cited=hits.ids[:1])
    queries = ("which database did Dana choose?", "orders failure", "Lee", "answers style")
    before = [src.search(q, k=4) for q in queries]
    src_stats, src_rows, src_trail = src.stats(), len(src._backend.dump_rows()), src.history(ids[1]); src.close()
    ns = f"t-{uuid.uuid4().hex[:12]}"
    out = subprocess.run([sys.executable, "-m", "earmem.cli", "memory", "migrate", str(tmp_path / "src"), pg_url,
                          "--dst-namespace", ns, "--json"], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    rep = json.loads(out.stdout)
    assert (rep["memories"], rep["feedback"], rep["check"]) == (src_rows, 3, True) and rep["learner"]
    back = migrate_store(pg_url, tmp_path / "back", src_namespace=ns)
    for where in (Location("postgres", pg_url, ns), Location("sqlite", tmp_path / "back")):
        st = where.open(encoder=True, clock=now, config=cfg)
        after = [st.search(q, k=4) for q in queries]
        assert [h.ids for h in after] == [h.ids for h in before], where.kind
        np.testing.assert_allclose([h.score for r in after for h in r], [h.score for r in before for h in r], err_msg=where.kind,
                                   atol=LEXICAL_TOL[retriever] if where.kind == "postgres" else 1e-6)  # SQLite → SQLite: the same numbers
        s = st.stats()
        assert (s["feedback"], s["learner_steps"], len(st)) == (src_stats["feedback"], src_stats["learner_steps"], len(NOTES) - 1)
        assert [e["action"] for e in st.history(ids[3])] == ["insert", "delete"]
        assert [(e["action"], e["detail"]) for e in st.history(ids[1])] == [(e["action"], e["detail"]) for e in src_trail]
        st.close()
    assert back["check"] and back["memories"] == src_rows


def planted(n, seed, text, target):
    "`n` facts with random embeddings: `text(i)` for n − 1 of them and the `target` text (id 'target') for the last."
    E = np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)
    return E, [{"text": text(i), "kind": "fact"} for i in range(n - 1)] + [{"text": target, "kind": "fact", "id": "target"}]


def test_hybrid_candidates_find_the_rare_word_and_learn(loc):
    "retriever='hybrid': a memory naming the query's rare word is found though its embedding is far; feedback on hybrid hits replays."
    E, items = planted(120, 0, lambda i: f"note {i} about topic {i % 7}", "the flamingo access code is 7713")
    now = lambda: to_epoch("2026-03-20")
    found = {}
    for retriever in ("dense", "hybrid"):
        where = loc.other(f"{loc.namespace}-{retriever}") if loc.kind == "postgres" else Location("sqlite", f"{loc.where}-{retriever}")
        cfg = StoreConfig(min_relevance=-1.0, retriever=retriever, lexical_weight=0.5, checkpoint_every=1)
        st = where.open(config=cfg, clock=now)
        st.add_many(items, embeddings=E)
        hits = st.search("what is the flamingo code?", k=3)
        found[retriever] = hits.ids
        if retriever == "hybrid":
            assert hits.candidates.base is not None and hits.candidates.scale == 1.0
            st.feedback(hits, cited=["target"])
            after = st.search("what is the flamingo code?", k=3)
            st.close()
            st = where.open(encoder=False, clock=now)                 # a reopened store: the same learner
            again = st.search("what is the flamingo code?", k=3)
            assert again.ids == after.ids and np.allclose([h.score for h in again], [h.score for h in after])
            assert st.repair()["steps"] == 1
            again2 = st.search("what is the flamingo code?", k=3)   # rebuilt from the log: same scores
            assert np.allclose([h.score for h in again2], [h.score for h in after])
        st.close()
    assert "target" not in found["dense"] and "target" in found["hybrid"], found


def test_hybrid_keeps_filters_and_the_balance_of_stores(loc):
    "Hybrid candidates pass the same filters, keep K/2 per store when balanced, and an empty filter result is no hits."
    import warnings
    st = loc.open(config=StoreConfig(min_relevance=-1.0, retriever="hybrid", candidates=4, balanced=True))
    fill(st)
    st.add("Lee and Dana had a long chat about Lisbon walks", "episode", ["Lee"], timestamp="2026-03-12")
    hits = st.search("Lisbon walks with Lee", k=4)
    assert sorted(m.store for m in hits.candidates.memories) == ["episodic", "episodic", "semantic", "semantic"]
    assert {h.kind for h in st.search("Dana orders", k=5, kinds=["failure", "decision"])} <= {"failure", "decision"}
    with warnings.catch_warnings():
        warnings.simplefilter("error")                                        # no NaN warnings from an empty candidate set
        assert len(st.search("Lisbon", kinds=["correction"])) == 0
    st.close()


def test_a_selective_filter_keeps_its_lexical_matches(loc):
    "A filter that passes few of the best full-text matches still gets its own matches (SQLite widens its ask)."
    # its word is not flamingo: PostgreSQL's word statistics are per table, shared by the namespaces of these tests
    E, items = planted(80, 3, lambda i: f"heron {i}" if i < 60 else f"note {i} on lunch", "a long and winding note "
                       "that among many other words and things also mentions the heron once")
    for i, it in enumerate(items): it["entities"] = ["Bo"] if i >= 60 else ["Al"]
    st = loc.open(config=StoreConfig(min_relevance=-1.0, retriever="hybrid", lexical_weight=0.5, candidates=4))
    st.add_many(items, embeddings=E)
    q = st.encoder.encode_queries(["heron"])[0]
    assert "target" not in st.search(q, k=3, entities=["Bo"]).ids   # the dense side alone misses it
    hits = st.search("heron", k=3, entities=["Bo"])              # 60 better matches name Al only
    assert "target" in hits.ids and {e for h in hits for e in h.entities} == {"Bo"}, hits.ids
    st.close()


def test_a_word_too_common_for_the_lexical_budget_is_left_to_the_dense_side(loc):
    "Full-text queries ask only for the rarest words whose matches fit in the backend's lexical_budget (chapter 19)."
    E, items = planted(40, 1, lambda i: f"{'common ' if i % 2 else ''}note {i} about thing{i}", "common note with the rare word flamingo")
    st = loc.open(config=StoreConfig(min_relevance=-1.0, retriever="hybrid", lexical_weight=0.5))
    st.add_many(items, embeddings=E)
    q = st.encoder.encode_queries(["common"])[0]
    dense = st.search(q, k=3)                                # an embedding: dense candidates
    assert all("common" in h.text for h in st.search("common", k=3))   # 21 matches: within the default budget
    st._backend.lexical_budget = 10
    if loc.kind == "postgres": st._backend._q("ANALYZE {s}.memories")   # its word counts are the planner's estimates
    narrowed = st.search("common", k=3)                      # 21 matches > 10: the dense side alone
    assert narrowed.ids == dense.ids and np.allclose([h.score for h in narrowed], [h.score for h in dense])
    assert "target" in st.search("common flamingo", k=3).ids   # the rare word is still asked for
    st.close()


def test_the_backend_keeps_the_storage_protocol(loc):
    "The store's backend is a StorageBackend: every member of the protocol, with a signature the store can call."
    import inspect
    from earmem.memory.backends.boundary import StorageBackend, contract_problems, protocol_members
    st = loc.open(); fill(st)
    b = st._backend
    assert isinstance(b, StorageBackend) and contract_problems(b) == [] and contract_problems(type(b)) == []
    for name, want in protocol_members().items():
        if want is None: assert hasattr(b, name), name; continue
        got = inspect.signature(getattr(type(b), name))
        assert list(got.parameters)[:len(want.parameters)] == list(want.parameters), name   # the store's arguments, in place
    st.close()
    assert b.db is None and isinstance(b, StorageBackend)          # closed: db is None, the members stay


META_NOTES = [("Orders run on Postgres", {"project": "orders", "n": 1}), ("Orders deploys on Fridays", {"project": "orders", "n": "1"}),
              ("Billing uses Stripe", {"project": "billing", "n": 1.0}), ("Billing invoices monthly", {"project": "billing", "urgent": True}),
              ("Lee likes Lisbon", {"urgent": 1, "tags": ["orders"]}), ("No metadata here", {})]


def fill_meta(st):
    return [st.add(t, "fact" if i % 2 else "decision", ["Dana"] if i < 3 else ["Lee"], metadata=m, timestamp="2026-03-01").id
            for i, (t, m) in enumerate(META_NOTES)]


METADATA_FILTERS = [  # (filter, indexes of META_NOTES it must return)
    (dict(metadata={"project": "orders"}), [0, 1]), (dict(metadata={"n": 1}), [0, 2]), (dict(metadata={"n": "1"}), [1]),
    (dict(metadata={"urgent": True}), [3]), (dict(metadata={"urgent": 1}), [4]), (dict(metadata={"tags": "orders"}), []),
    (dict(metadata={"project": "orders", "n": 1}), [0]), (dict(metadata={"project": "billing"}, kinds=["fact"]), [3]),
    (dict(metadata={"n": 1}, entities=["dana"]), [0, 2]), (dict(metadata={"project": "billing"}, entities=["Lee"]), [3]),
    (dict(metadata={"nope": None}), [])]


@pytest.mark.parametrize("retriever", ["dense", "hybrid"])
def test_metadata_filters(loc, retriever):
    "Every key: value pair must equal the memory's metadata value (JSON equality: 1 matches 1.0, never '1' or true)."
    st = loc.open(config=StoreConfig(min_relevance=-1.0, retriever=retriever))
    ids = fill_meta(st)
    for flt, want in METADATA_FILTERS:
        got = st.search("orders billing Lisbon", k=10, filters=flt)
        assert sorted(got.ids) == sorted(ids[i] for i in want), flt
    assert st.search("orders", k=10, kinds=["decision"], filters={"metadata": {"project": "orders"}}).ids == [ids[0]]
    with pytest.raises(TypeError, match=r"metadata\['tags'\]: expected a string, number, bool or null"):
        st.search("orders", filters={"metadata": {"tags": ["orders"]}})
    st.close()


def test_metadata_filters_give_the_same_hits_on_both_backends(pg_url, tmp_path):
    locs = [Location("sqlite", tmp_path / "s"), Location("postgres", pg_url, f"t-{uuid.uuid4().hex[:12]}")]
    clock = [to_epoch("2026-03-20")]
    stores = [l.open(clock=lambda: clock[0]) for l in locs]
    for st in stores: fill_meta(st)
    for flt, _ in METADATA_FILTERS:
        got = [st.search("which project runs on Postgres?", k=6, filters=flt) for st in stores]
        assert got[0].ids == got[1].ids, flt
        np.testing.assert_allclose([h.score for h in got[0]], [h.score for h in got[1]], atol=1e-5)
    for st in stores: st.close()


def test_a_url_store_never_shows_its_password(pg_url):
    "repr(store), stats() and the errors of a bad URL pass the URL through redact_url: the planted passwords never show."
    secrets = ("pl%40nted%3As3cret", "Q-S3CRET-2", "pl@nted", "s3cret")
    url = pg_url.replace("postgres:@", f"postgres:{secrets[0]}@") + f"&password={secrets[1]}"
    ns = f"t-{uuid.uuid4().hex[:12]}"
    st = Location("postgres", url, ns).open()
    shown = [repr(st), json.dumps(st.stats()), str(st.path), repr(st._backend)]
    for bad in (dict(readonly=True, namespace=ns + "-none"), dict(url=url.split("?")[0] + "?host=/nonexistent&password=" + secrets[1])):
        with pytest.raises((FileNotFoundError, ValueError)) as e:
            MemoryStore(bad.get("url", url), encoder=HashingEncoder(DIM), namespace=bad.get("namespace", ns), readonly=bad.get("readonly", False))
        shown.append(str(e.value))
    with pytest.raises(TimeoutError) as e:
        other = Location("postgres", url, ns).open(lock_timeout=0.2)
        with st._write():
            other.add("blocked", "fact")
    other.close()
    shown.append(str(e.value))
    for text in shown:
        assert not any(s in text for s in secrets), text
    assert "postgres:***@" in shown[0] and "password=***" in shown[0] and "host=" in shown[0]
    st.close()


# issue 21: both backends reject or accept the same inputs with the same error (the store's checks run before the backend)
SAME_ERRORS = [  # (case id, call on an open store, error type, the message's start)
    ("zero-width-text", lambda s: s.add("\u200b\ufeff", "fact"), ValueError, "text: has only invisible characters"),
    ("lone-surrogate", lambda s: s.add("abc \ud800", "fact"), ValueError, "text: contains a lone surrogate"),
    ("surrogate-metadata", lambda s: s.add("abc", "fact", metadata={"k": "\udfff"}), ValueError, "metadata: contains a lone surrogate"),
    ("nul-in-text", lambda s: s.add("abc \x00 def", "fact"), ValueError, "text: contains a NUL character"),
    ("nul-in-metadata", lambda s: s.add("abc", "fact", metadata={"k": "a\x00b"}), ValueError, "metadata: contains a NUL character"),
    ("zero-embedding", lambda s: s.add_many([{"text": "z", "kind": "fact"}], embeddings=np.zeros((1, DIM), np.float32)), ValueError, "embeddings: row 0 is all zeros"),
    ("zero-query", lambda s: s.search(np.zeros(DIM, np.float32)), ValueError, "query: row 0 is all zeros"),
    ("nan-embedding", lambda s: s.add_many([{"text": "n", "kind": "fact"}], embeddings=np.full((1, DIM), np.nan, np.float32)), ValueError, "embeddings"),
    ("unknown-id", lambda s: s.get("nope"), KeyError, "id: no memory 'nope'"),
    ("huge-importance", lambda s: s.add("x y", "fact", importance=7), ValueError, "importance"),
]


@pytest.mark.parametrize("name, call, exc, start", SAME_ERRORS, ids=[c[0] for c in SAME_ERRORS])
def test_both_backends_name_the_same_faults(loc, name, call, exc, start):
    st = loc.open(); fill(st); n = len(st)
    with pytest.raises(exc) as e: call(st)
    msg = e.value.args[0] if isinstance(e.value, KeyError) else str(e.value)
    assert msg.startswith(start) and "Traceback" not in msg, msg
    assert len(st) == n
    st.close()


def test_accepted_alike_on_both_backends(loc):
    "Inputs one backend takes, the other takes too: unicode, emoji, long entity lists within the limits, big metadata."
    st = loc.open()
    r = [st.add("Zoë 🚀 chose Ωmega — naïve café", "decision", entities=[f"e{i}" for i in range(40)], metadata={"k": "v" * 4000}),
         st.add("quotes ' \" and back\\slash; DROP TABLE memories;--", "fact")]
    assert [x.action for x in r] == ["inserted", "inserted"] and st.get(r[1].id).text.endswith("memories;--")
    st.close()
