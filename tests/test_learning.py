"""Issue 19 through MemoryStore: a citation never lowers what it cites, the gate serves frozen relevance while the
learner has not earned trust, and neighbouring memories of one session lift each other."""
from collections import deque
import numpy as np
import pytest
from earmem.memory import MemoryStore, StoreConfig
from earmem.memory.rules.hygiene import HashingEncoder
from earmem.memory.store.learner import GATE_MIN_PAIRS
from earmem.memory.store.ranking import SESSION_BETA

NOTES = ["Dana chose Postgres for the orders service", "Dana moved the orders service to Postgres 16",
         "Sam reviews the orders service schema", "the orders service runs on three nodes",
         "backups of the orders database run nightly", "Dana prefers dark mode", "the billing service uses Redis",
         "orders are archived after a year"]


def _store(path, **cfg):
    st = MemoryStore(path, encoder=HashingEncoder(256), config=StoreConfig(min_relevance=0.0, dedupe_threshold=0.99, **cfg))
    st.add_many([dict(text=t, kind="fact") for t in NOTES])
    return st


@pytest.mark.parametrize("position", [0, 2, 4])
def test_a_memory_cited_once_ranks_no_lower(tmp_path, position):
    st = _store(tmp_path / "s")
    q = "where do the orders live and who looks after them?"
    before = st.search(q, k=8).ids
    hits = st.search(q, k=5)
    cited = hits.ids[position]
    st.feedback(hits, cited=[cited])
    after = st.search(q, k=8).ids
    assert after.index(cited) <= before.index(cited), (before, after)
    st.close()


def test_an_untrusted_learner_leaves_the_frozen_ranking(tmp_path):
    learned, frozen = (_store(tmp_path / n, recency_weight=0.0, retriever="dense") for n in ("learned", "frozen"))
    q = "which database runs the orders service?"
    for _ in range(5): learned.feedback(h := learned.search(q, k=5), cited=[h.ids[-1]])
    learned._learner.gate = deque([(2.0, 1.0, 2)] * GATE_MIN_PAIRS)          # the learner ordered worse than frozen
    assert not learned.learner_trusted
    got, twin = learned.search(q, k=5), frozen.search(q, k=5)
    assert got.ids == twin.ids
    np.testing.assert_allclose([h.relevance for h in got], [h.frozen_relevance for h in got])
    learned._learner.gate = deque([(1.0, 2.0, 2)] * GATE_MIN_PAIRS)          # better than frozen: its scores are used
    assert learned.learner_trusted
    z = learned._learner.scores(learned.search(q, k=5).candidates)
    assert not np.allclose(z, learned.search(q, k=5).candidates.scores)
    learned.close(); frozen.close()


def test_neighbouring_memories_of_a_session_lift_each_other(tmp_path):
    st = MemoryStore(tmp_path / "s", encoder=HashingEncoder(256),
                     config=StoreConfig(min_relevance=-1.0, recency_weight=0.0, importance_weight=0.0, retriever="dense"))
    st.add_many([dict(text="Caroline: I went to the LGBTQ support group yesterday", kind="episode", id="a", metadata={"session": "S1"}),
                 dict(text="Melanie: that sounds powerful, how did it feel?", kind="episode", id="b", metadata={"session": "S1"}),
                 dict(text="Melanie: my kids love the pottery class", kind="episode", id="c", metadata={"session": "S2"})])
    hits = {h.id: h for h in st.search("when did Caroline go to the support group?", k=3)}
    assert hits["b"].relevance == pytest.approx(hits["b"].frozen_relevance + SESSION_BETA * hits["a"].frozen_relevance, abs=1e-6)
    assert hits["a"].relevance == pytest.approx(hits["a"].frozen_relevance + SESSION_BETA * hits["b"].frozen_relevance, abs=1e-6)
    st.close()


def _session_store(path, sessions: bool):
    "Six short notes on orders (each its own session), then a question turn and its unrelated-sounding answer."
    st = MemoryStore(path, encoder=HashingEncoder(256),
                     config=StoreConfig(min_relevance=-1.0, recency_weight=0.0, importance_weight=0.0, retriever="dense", candidates=4))
    meta = lambda s: {"session": s} if sessions else {}
    st.add_many([dict(text=f"orders note {i}", kind="episode", id=f"n{i}", metadata=meta(f"N{i}")) for i in range(6)]
                + [dict(text="Dana: where did the orders service move?", kind="episode", id="ask", metadata=meta("S")),
                   dict(text="Sam: the service went to Frankfurt", kind="episode", id="answer", metadata=meta("S"))])
    return st


def test_a_session_neighbour_enters_the_candidates_through_the_wider_pool(tmp_path):
    from earmem.memory.store.ranking import SESSION_POOL
    q = "where did the orders service move?"
    plain, sess = _session_store(tmp_path / "plain", False), _session_store(tmp_path / "sess", True)
    ranked = plain.search(q, k=20).ids                       # the plain cosine order over all 8 turns
    assert 4 <= ranked.index("answer") < SESSION_POOL * 4    # outside the first K = 4, inside the pool of 3 K
    assert "answer" not in plain.search(q, k=4).ids          # without sessions: ranked exactly as before
    got = sess.search(q, k=4)
    assert got.ids[0] == "ask" and "answer" in got.ids      # its question turn lifts it into the K candidates
    assert len(got.candidates.ids) == 4                      # the learner still sees K candidates
    plain.close(); sess.close()


def _no_checkpoints(s):
    "Checkpoints fail as on a full disk (the feedback still commits; the learner is saved later, or never)."
    import errno
    s._backend.save_learner = lambda *a, **k: (_ for _ in ()).throw(OSError(errno.ENOSPC, "No space left on device"))


def _lazy(s):
    import dataclasses
    s.config = dataclasses.replace(s.config, checkpoint_every=1000)


SAVES = {"every call": lambda s: None, "deferred (disk full)": _no_checkpoints, "lazy (every 1000)": _lazy}


@pytest.mark.parametrize("saves", list(SAVES))
@pytest.mark.parametrize("stream", ["poison", "poison, rollback, honest", "honest"])
@pytest.mark.parametrize("guard_at_reopen", [False, True])
def test_the_reopened_learner_is_the_live_one(tmp_path, saves, stream, guard_at_reopen):
    "After guarded feedback (steps kept whole, shortened or refused), a reopened store serves what the live one served: the same top 5 for every question, the same trust — however its checkpoints were saved, with or without a guard at reopen."
    import warnings
    from earmem.memory.store.trust import Guard, feed_stream, poison_store
    warnings.simplefilter("ignore")
    s, Q, right = poison_store(tmp_path / "s", lr=0.05)
    s.guard = Guard(); SAVES[saves](s)
    feed_stream(s, Q, right, 60, stream.split(",")[0])
    if "rollback" in stream:   # the rollback itself must save (it raises on a full disk): the disk has room for it, not after
        s._backend.__dict__.pop("save_learner", None); s.rollback(to=0); SAVES[saves](s); feed_stream(s, Q, right, 30, "honest")
    live = [s.search(Q[i:i + 1], k=5).ids for i in range(len(right))]
    trusted, refused = s.learner_trusted, getattr(s, "guard_refused", 0)
    s.close()
    again = MemoryStore(tmp_path / "s")
    if guard_at_reopen: again.guard = Guard()
    assert [again.search(Q[i:i + 1], k=5).ids for i in range(len(right))] == live
    assert again.learner_trusted == trusted
    if stream == "poison": assert refused > 0            # the guard did act: the case is not vacuous
    again.close()
