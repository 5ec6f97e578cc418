"""Issue 37: forgetting that is complete. After `delete`, `clear` and erasing a user through `StorePool`, a canary
string quoted by a memory (its text, metadata, entities or source) and by the queries that cited it is in no file of the
store folder (raw bytes: database, write-ahead log, full-text index, columns, learner checkpoints), nor in any row a
PostgreSQL store keeps; the learner is rebuilt from what remains of the feedback log."""
import json
import uuid
from pathlib import Path

import numpy as np
import pytest

from earmem.memory.rules.hygiene import HashingEncoder, StoreConfig
from earmem.memory.store import MemoryStore
from earmem.memory.service.users import StorePool

DIM = 64
CFG = StoreConfig(min_relevance=-1.0)
TOPICS = ["the build pipeline", "Lee's Lisbon office", "the orders database", "Friday deploys", "the staging cluster",
          "code review habits", "the on-call rota", "the release notes"]


def canary() -> str:
    "A fresh canary word no other test text contains (mixed case: the full-text index keeps it lower-cased)."
    return "Qz" + uuid.uuid4().hex[:10] + "Canary"


def raw_files_with(folder, needle: str) -> list:
    "The files under `folder` whose raw bytes hold `needle`, as written or lower-cased."
    forms = {needle.encode(), needle.lower().encode()}
    return sorted(str(p.relative_to(folder)) for p in Path(folder).rglob("*") if p.is_file()
                  and any(f in p.read_bytes() for f in forms))


def fill(st, rng, secret_field: str, word: str, n_notes: int = 30, n_queries: int = 6) -> tuple:
    "Notes, one secret memory quoting `word` in `secret_field`, queries quoting it that cite it, and others; returns (secret id, other ids)."
    others = [st.add(f"Note {i} about {TOPICS[i % len(TOPICS)]}: step {i * 7}", "fact").id for i in range(n_notes)]
    fields = {"text": "Dana's locker code is written down", "metadata": {}, "entities": ["Dana"], "source": "chat"}
    if secret_field == "text": fields["text"] = f"Dana's locker code is {word}"
    elif secret_field == "metadata": fields["metadata"] = {"note": f"code {word}"}
    elif secret_field == "entities": fields["entities"] = ["Dana", word]
    elif secret_field == "source": fields["source"] = f"chat:{word}"
    secret = st.add_many([dict(kind="fact", **fields)])[0].id
    for j in range(n_queries):
        quoted = rng.random() < 0.7 or j == 0
        q = f"{word}? what did Dana say about the locker" if quoted else f"tell me about {TOPICS[j % len(TOPICS)]}"
        h = st.search(q, k=4)
        st.feedback(h, cited=[secret] if secret in h.ids else h.ids[:1])
    for j in range(3):  # feedback on other topics, which may or may not show the secret among its candidates
        h = st.search(TOPICS[j], k=4)
        st.feedback(h, cited=[i for i in h.ids if i != secret][:1])
    return secret, others


def checkpoints(st) -> list:
    return sorted(p.name for p in (st.path / "learner").iterdir()) if (st.path / "learner").is_dir() else []


def assert_rebuilt(st, gone: str | None = None, files: bool = True):
    "The learner holds exactly the remaining feedback, none of which names `gone`; one checkpoint at most (`files`)."
    rows = st._backend.feedback_rows()
    if gone is not None:
        assert all(gone not in r.candidates["ids"] for r in rows)
    assert (st._learner.steps if st._learner is not None else 0) == len(rows)
    assert st.learner_problem is None
    if files and st.url is None: assert len(checkpoints(st)) <= 1


CASES = [(field, seed) for field in ("text", "metadata", "entities", "source") for seed in (0, 1)]


@pytest.mark.parametrize("field,seed", CASES)
def test_delete_leaves_no_canary(tmp_path, field, seed):
    word, rng = canary(), np.random.default_rng(seed)
    st = MemoryStore(tmp_path / "s", encoder=HashingEncoder(DIM), config=CFG)
    secret, others = fill(st, rng, field, word)
    assert raw_files_with(st.path, word), "the canary must be somewhere before the delete, or the scan proves nothing"
    before = len(st._backend.feedback_rows())
    st.delete(secret)
    assert raw_files_with(st.path, word) == []
    assert_rebuilt(st, secret)
    assert len(st._backend.feedback_rows()) < before
    assert len(st) == len(others)
    st.close()
    assert raw_files_with(st.path, word) == []
    again = MemoryStore(tmp_path / "s", encoder=HashingEncoder(DIM), config=CFG)   # what a reopen loads is the rebuilt learner
    assert_rebuilt(again, secret)
    again.close()


@pytest.mark.parametrize("field,seed", CASES[::2])
def test_clear_leaves_no_canary(tmp_path, field, seed):
    word = canary()
    st = MemoryStore(tmp_path / "s", encoder=HashingEncoder(DIM), config=CFG)
    fill(st, np.random.default_rng(seed), field, word)
    assert raw_files_with(st.path, word)
    assert st.clear(reason="account closed")["deleted"] > 30
    assert raw_files_with(st.path, word) == []
    assert st._backend.feedback_rows() == [] and st._learner.steps == 0 and len(checkpoints(st)) == 1
    st.close()
    assert raw_files_with(st.path, word) == []


def test_erasing_a_user_through_the_pool(tmp_path):
    word = canary()
    with StorePool(tmp_path / "team", encoder=HashingEncoder(DIM), config=CFG) as pool:
        fill(pool.store("dana"), np.random.default_rng(3), "text", word)
        lee = pool.store("lee"); lee.add("Lee prefers coffee", "preference")
        h = lee.search("coffee", k=1); lee.feedback(h, cited=h.ids)
        assert raw_files_with(tmp_path / "team", word)
        pool.clear("dana", reason="user asked to be forgotten")
        assert raw_files_with(tmp_path / "team", word) == []
        assert len(pool.store("lee")._backend.feedback_rows()) == 1         # the other user's log is hers
    assert raw_files_with(tmp_path / "team", word) == []


def test_a_held_search_cannot_bring_it_back(tmp_path):
    word = canary()
    st = MemoryStore(tmp_path / "s", encoder=HashingEncoder(DIM), config=CFG)
    secret, _ = fill(st, np.random.default_rng(4), "text", word, n_queries=2)
    held = st.search(f"Dana's locker code {word}", k=3)
    assert secret in held.candidates.ids
    st.delete(secret)
    with pytest.raises(ValueError, match="were deleted after this search"):
        st.feedback(held, cited=held.ids[:1])
    assert raw_files_with(st.path, word) == []
    st.close()


def test_the_replaced_memorys_audit_forgets_the_newer_text(tmp_path):
    word = "Qzvexmoor"  # fixed: whether the door sees a newer claim depends on the words (hashing vectors)
    st = MemoryStore(tmp_path / "s", encoder=HashingEncoder(DIM), config=CFG)
    old = st.add("Ana lives in Paris", "fact")
    new = st.add(f"Ana lives in {word}", "fact")
    assert new.supersedes == old.id and word in json.dumps(st.history(old.id))
    st.delete(new.id)
    assert word not in json.dumps(st.history(old.id)) and st.get(old.id).status == "active"
    assert raw_files_with(st.path, word) == []
    st.close()


def test_a_crash_after_the_commit_never_loads_what_was_erased(tmp_path, monkeypatch):
    "The feedback rows and the learner pointer go in the delete's commit: a store reopened before the rebuild replays what remains."
    word = canary()
    st = MemoryStore(tmp_path / "s", encoder=HashingEncoder(DIM), config=CFG)
    secret, _ = fill(st, np.random.default_rng(5), "text", word)
    monkeypatch.setattr(MemoryStore, "_relearn", lambda self, seen: (_ for _ in ()).throw(OSError("killed")))
    with pytest.raises(OSError, match="killed"): st.delete(secret)
    monkeypatch.undo()
    assert st._backend.learner == ""
    st._backend.close(); st._backend = None                                 # as if the process died here
    again = MemoryStore(tmp_path / "s", encoder=HashingEncoder(DIM), config=CFG)
    assert_rebuilt(again, secret, files=False)   # the old checkpoint folders go at a reopen once the crashed process is gone
    again.close()


def test_postgres_rows_forget(pg_url):
    "The same on PostgreSQL: no row of memories, audit, feedback or checkpoint files holds the canary after delete, then clear."
    word, ns = canary(), f"t-{uuid.uuid4().hex[:12]}"
    st = MemoryStore(pg_url, encoder=HashingEncoder(DIM), config=CFG, namespace=ns)
    secret, _ = fill(st, np.random.default_rng(6), "text", word, n_notes=20, n_queries=4)
    q = st._backend._q
    def holding() -> dict:
        like = f"%{word}%"
        return {"memories": q("SELECT count(*) FROM {s}.memories WHERE namespace=%s AND (text LIKE %s OR metadata LIKE %s OR entities LIKE %s)", (ns, like, like, like)).fetchone()[0],
                "audit": q("SELECT count(*) FROM {s}.audit WHERE namespace=%s AND detail LIKE %s", (ns, like)).fetchone()[0],
                "feedback": q("SELECT count(*) FROM {s}.feedback WHERE namespace=%s AND query LIKE %s", (ns, like)).fetchone()[0],
                "learner_files": q("SELECT count(*) FROM {s}.learner_files WHERE namespace=%s AND position(%s::bytea in data) > 0", (ns, word.encode())).fetchone()[0]}
    assert holding()["memories"] == 1 and holding()["feedback"] >= 1 and holding()["learner_files"] >= 1
    st.delete(secret)
    assert holding() == {"memories": 0, "audit": 0, "feedback": 0, "learner_files": 0}
    assert_rebuilt(st, secret)
    assert q("SELECT count(*) FROM {s}.learners WHERE namespace=%s", (ns,)).fetchone()[0] == 1
    st.clear()
    assert st._backend.feedback_rows() == [] and st._learner.steps == 0
    st.close()


def test_saved_columns_are_rewritten(tmp_path, monkeypatch):
    "A big store saves its mirror's columns (every live row's text) at close; a delete after reopening re-saves them without it."
    from earmem.memory.backends.sqlite import SQLiteBackend
    monkeypatch.setattr(SQLiteBackend, "columns_min_rows", 10)
    word = canary()
    st = MemoryStore(tmp_path / "s", encoder=HashingEncoder(DIM), config=CFG)
    secret, _ = fill(st, np.random.default_rng(7), "text", word, n_queries=2)
    st.close()
    assert "columns.bin" in raw_files_with(tmp_path / "s", word)
    st = MemoryStore(tmp_path / "s", encoder=HashingEncoder(DIM), config=CFG)
    st.delete(secret)
    assert raw_files_with(tmp_path / "s", word) == [] and (tmp_path / "s" / "columns.bin").exists()
    st.close()
    assert raw_files_with(tmp_path / "s", word) == []


def probe_candidates(k: int = 20):
    "K random unit memories and a query near the first: what two learners are compared on."
    from earmem.core import Candidates, Memory, Query
    g = np.random.default_rng(11)
    M = g.standard_normal((k, DIM)).astype(np.float32); M /= np.linalg.norm(M, axis=1, keepdims=True)
    q = M[0] + 0.3 * g.standard_normal(DIM).astype(np.float32); q /= np.linalg.norm(q)
    return Candidates(Query("probe", "probe"), q, [Memory(f"p{i}", "", "semantic", "fact") for i in range(k)], M, (M @ q).astype(np.float32))


def _forget_in_steps(st, secret, word):
    "Delete `secret` with a budget of one row a call; the canary is gone at once, searches catch the learner up; returns the searches it took."
    st.replay_budget = 0
    st.delete(secret)
    assert st._behind and not st.learner_trusted              # behind the log: search ranks frozen meanwhile
    if st.url is None: assert raw_files_with(st.path, word) == []   # nothing erased waits for the catch-up
    n = 0
    while st._behind:
        st.search(TOPICS[n % len(TOPICS)], k=4); n += 1
        assert n <= len(st._backend.feedback_rows()) + 1, "a search must replay at least one row"
    return n


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_rebuild_in_steps_equals_one_in_one_go(tmp_path, backend, request):
    "Issue 37: a delete's rebuild is bounded by `replay_budget`; finished by later searches, it is the learner a rebuild in one go makes, live and reopened."
    word, made = canary(), []
    url = request.getfixturevalue("pg_url") if backend == "postgres" else None
    for name, budget in (("steps", 0), ("once", None)):
        where = url if url else tmp_path / name
        kw = dict(namespace=f"u{name}{uuid.uuid4().hex[:6]}") if url else {}
        st = MemoryStore(where, encoder=HashingEncoder(DIM), config=CFG, **kw)
        secret, _ = fill(st, np.random.default_rng(7), "text", word, n_queries=8)
        if budget == 0: assert _forget_in_steps(st, secret, word) >= 1
        else: st.delete(secret); assert not st._behind
        assert_rebuilt(st, secret, files=False)
        made.append((st, where, kw))
    ca = probe_candidates()
    a, b = (m[0]._learner.scores(ca) for m in made)
    np.testing.assert_allclose(a, b, atol=1e-6)
    for st, where, kw in made:
        st.close()
        again = MemoryStore(where, encoder=HashingEncoder(DIM), config=CFG, **kw)
        assert not again._behind
        np.testing.assert_allclose(again._learner.scores(ca), a, atol=1e-6)
        again.close()
