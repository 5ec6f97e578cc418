"""Issue 42: chapter 19ab's inverted lists through the embedded store, once the recall guard has given the graph up.

Near-copy data (the shape on which the graph gives up), a store forced to use its graph at any size, the graph's guard
set to exact. Generated: a random sequence of adds, text updates and deletions, and after each, searches under several
filters. Invariants: every active memory is found first by its own vector under every filter that lets it through; a
deleted memory is never returned; the answer agrees with the exact scan's (recall@10 ≥ 0.95 over the run)."""
import numpy as np
import pytest

from earmem.memory.index import lists
from earmem.memory.index.mirror import SearchFilter
from earmem.memory.rules.hygiene import HashingEncoder, StoreConfig
from earmem.memory.store import MemoryStore

DIM = 32


def _unit(X):
    return (X / np.linalg.norm(X, axis=-1, keepdims=True)).astype(np.float32)


@pytest.fixture
def small_lists(monkeypatch):
    "Lists at a test's scale: used from 500 allowed rows, built in the search that first needs them."
    monkeypatch.setattr(lists, "LISTS_MIN_ROWS", 500)
    monkeypatch.setattr(lists, "LISTS_BACKGROUND", False)


def _near_copies(rng, sources, copies):
    S = _unit(rng.standard_normal((sources, DIM)))
    return _unit(np.repeat(S, copies, axis=0) + 0.3 * rng.standard_normal((sources * copies, DIM)) / np.sqrt(DIM))


def _given_up_store(path, V):
    s = MemoryStore(path, encoder=HashingEncoder(DIM), config=StoreConfig(min_relevance=-1.0))
    s._backend.approx_min_rows, s._backend.prefilter_rows = 0, 0
    s.add_many([{"text": f"memory {i}", "kind": ["fact", "episode"][i % 2], "id": f"m{i}", "entities": [f"e{i % 5}"]} for i in range(len(V))],
               embeddings=V)
    b = s._backend
    b.save_index()
    b.ann.guard.exact = b.ann.guard.settled = True   # as if the guard had given the graph up
    return s, b


def _exact(s, q, k, flt):
    b = s._backend; saved = b.approx_min_rows; b.approx_min_rows = None
    try: return s.search(q, k=k, min_relevance=-1, filters=flt).ids
    finally: b.approx_min_rows = saved


FILTERS = [None, SearchFilter(kinds=["fact"]), SearchFilter(entities=["e2"]), SearchFilter(kinds=["episode"], entities=["e1", "e3"])]


def _passes(b, mid, flt):
    return flt is None or bool(b.index.mask(flt)[b.index.pos[mid]])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_lists_answer_after_the_graph_is_given_up(tmp_path, small_lists, seed):
    rng = np.random.default_rng(seed)
    V = _near_copies(rng, 40, 30)                       # 1,200 memories: 40 sources × 30 copies at cosine ≈ 0.96
    s, b = _given_up_store(tmp_path / "s", V)
    vec = {f"m{i}": v for i, v in enumerate(V)}
    gone, recalls, nxt = set(), [], len(V)
    for step in range(12):
        op = rng.choice(["add", "update", "delete"])
        live = sorted(vec)
        if op == "add":
            W = _unit(V[rng.choice(len(V), 20)] + 0.3 * rng.standard_normal((20, DIM)) / np.sqrt(DIM))
            ids = [f"m{nxt + j}" for j in range(20)]
            s.add_many([{"text": f"memory {m}", "kind": "fact", "id": m, "entities": ["e2"]} for m in ids], embeddings=W)
            vec.update(zip(ids, W)); nxt += 20
        elif op == "update":
            m = live[rng.integers(len(live))]
            s.update(m, text=f"a new wording of memory {m} number {step}")
            vec[m] = b.index.E[b.index.pos[m]].copy()   # its new vector, from the store's encoder
        else:
            m = live[rng.integers(len(live))]
            s.delete(m); gone.add(m); del vec[m]
        for m in rng.choice(sorted(vec), 5, replace=False):
            for flt in FILTERS:
                got = s.search(vec[m], k=10, min_relevance=-1, filters=flt).ids
                assert not gone & set(got), (m, flt)
                if _passes(b, m, flt): assert got[0] == m, (m, flt, got[:3])   # its own vector finds it first
                want = _exact(s, vec[m], 10, flt)
                if want: recalls.append(len(set(got) & set(want)) / len(want))
    st = b.index._lists
    assert st is not None and st.lists is not None and not st.guard.exact   # the lists answered, and were not given up
    assert np.mean(recalls) >= 0.95, np.mean(recalls)
    s.close()


def test_lists_read_a_part_of_the_rows(tmp_path, small_lists):
    "The point of the lists: a search scores a part of the rows, not all (the exact scan's), and still finds the exact top 10."
    rng = np.random.default_rng(7)
    V = _near_copies(rng, 60, 40)
    s, b = _given_up_store(tmp_path / "s", V)
    allowed = np.ones(b.index.n, bool)
    for q in V[rng.choice(len(V), 10, replace=False)]:
        rows = b._graph_rows(q, allowed, 10)
        assert len(rows) < len(V) / 2
        assert set(b.index.candidates(q, rows, 10, False)[0]) == set(b.index.candidates(q, np.arange(len(V)), 10, False)[0])
    s.close()


def test_below_the_size_where_lists_pay_every_row_is_scanned(tmp_path, monkeypatch):
    "Under LISTS_MIN_ROWS allowed rows a given-up graph falls to the exact scan, as before this chapter: no lists are built."
    monkeypatch.setattr(lists, "LISTS_BACKGROUND", False)
    rng = np.random.default_rng(3)
    V = _near_copies(rng, 20, 20)
    s, b = _given_up_store(tmp_path / "s", V)
    q = V[5]
    assert len(b._graph_rows(q, np.ones(len(V), bool), 10)) == len(V)
    assert getattr(b.index, "_lists", None) is None
    s.close()


def test_lists_given_up_stay_given_up_after_reopening(tmp_path, small_lists, monkeypatch, recwarn):
    "Uniform vectors: the lists' guard gives them up (one list read, so that it is quick); the verdict is saved with the graph's guard, so the reopened store answers exactly without building lists again."
    from earmem.memory.index.graph import GUARD_FILE
    import json
    monkeypatch.setattr(lists, "PROBE", 1)
    rng = np.random.default_rng(9)
    V = _unit(rng.standard_normal((1500, DIM)))
    s, b = _given_up_store(tmp_path / "s", V)
    Q = _unit(V[:150] + 0.5 * rng.standard_normal((150, DIM)) / np.sqrt(DIM))
    for q in Q:
        s.search(q, k=10, min_relevance=-1)
        if b.index._lists.guard.exact: break
    assert b.index._lists.guard.exact and b.ann.guard.fallback["exact"] is True
    assert any("inverted lists" in str(w.message) and "exact scans from now on" in str(w.message) for w in recwarn)
    s.close()
    assert json.loads((tmp_path / "s" / GUARD_FILE).read_text())["fallback"]["exact"] is True
    s = MemoryStore(tmp_path / "s", encoder=HashingEncoder(DIM), config=StoreConfig(min_relevance=-1.0))
    s._backend.approx_min_rows, s._backend.prefilter_rows = 0, 0
    for q in Q[:5]:
        got = s.search(q, k=10, min_relevance=-1).ids
        assert set(got) == {f"m{i}" for i in np.argsort(-(V @ q), kind="stable")[:10]}, got
    st = s._backend.index._lists
    assert st.guard.exact and st.thread is None and st.lists is None   # nothing built again
    s.close()


def test_lists_are_built_in_the_background_while_searches_answer_exactly(tmp_path, monkeypatch):
    "The product's way (LISTS_BACKGROUND): the first search that needs the lists starts their build in a thread and is answered by the exact scan; once built, the lists answer."
    monkeypatch.setattr(lists, "LISTS_MIN_ROWS", 500)
    rng = np.random.default_rng(4)
    V = _near_copies(rng, 40, 30)
    s, b = _given_up_store(tmp_path / "s", V)
    q = V[17]
    first = s.search(q, k=10, min_relevance=-1).ids
    st = b.index._lists
    assert st is not None and st.thread is not None
    assert first[0] == "m17" and len(set(first) & set(_exact(s, q, 10, None))) >= 9   # the exact scan's answer (or, had the small build won the race, the lists')
    st.thread.join(timeout=60)
    assert st.lists is not None and st.error is None
    assert len(b._graph_rows(q, np.ones(b.index.n, bool), 10)) < len(V)   # the lists answer now
    assert s.search(q, k=10, min_relevance=-1).ids[0] == "m17"
    s.close()
