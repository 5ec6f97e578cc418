"""The approximate index of the embedded store (chapter 19a, used by chapter 20a's SQLiteBackend): a store forced onto
the graph answers as the exact scan does; LoCoMo-sized stores give the same hits with the graph on and off; and (slow)
SIGKILL during adds with the graph enabled loses no committed memory and leaves a graph whose answers are verified.

Full crash run (>= 100 trials):  EARMEM_INDEX_CRASH_TRIALS=100 pytest -q -m slow tests/test_index.py -k sigkill -s"""
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from earmem.memory.rules.hygiene import HashingEncoder, StoreConfig
from earmem.memory.index.graph import INDEX_FILE, STAMP_FILE, VectorIndex
from earmem.memory.backends.sqlite import SQLiteBackend
from earmem.memory.store import MemoryStore

ROOT = Path(__file__).resolve().parents[1]


def _unit(rng, n, dim):
    V = rng.standard_normal((n, dim)).astype(np.float32)
    return V / np.linalg.norm(V, axis=1, keepdims=True)


def _store(path, dim=32) -> MemoryStore:
    return MemoryStore(path, encoder=HashingEncoder(dim), config=StoreConfig(min_relevance=-1.0))


def _force(store: MemoryStore, on: bool = True):
    "Make the store's backend use the graph at any size (on) or never (off)."
    store._backend.approx_min_rows, store._backend.prefilter_rows = (0, 0) if on else (None, 0)


def _exact_ids(b, q, K, flt=None, balanced=False):
    from earmem.memory.index.mirror import SearchFilter
    flt = flt or SearchFilter()
    return [b.index.ids[r] for r in b.index.candidates(np.asarray(q, np.float32), np.flatnonzero(b.index.mask(flt)), K, balanced)[0]]


def test_forced_graph_matches_exact_through_the_store(tmp_path):
    rng = np.random.default_rng(1)
    s = _store(tmp_path / "s"); _force(s)
    V = _unit(rng, 600, 32)
    s.add_many([{"text": f"memory {i}", "kind": ["fact", "episode"][i % 2], "entities": [f"e{i % 7}"]} for i in range(600)], embeddings=V)
    b = s._backend
    assert b.ann is not None and len(b.ann) + len(b._pending) == 600     # built at the first add; the rest pending
    b.save_index(); assert (len(b.ann), len(b._pending)) == (600, 0)
    from earmem.memory.index.mirror import SearchFilter
    pairs, whole = [], []
    for q in _unit(rng, 30, 32):
        for flt in (None, SearchFilter(kinds=["fact"]), SearchFilter(entities=["e3"])):
            pairs.append(([b.index.ids[r] for r in b.candidates(q, 10, False, flt)[0]], _exact_ids(b, q, 10, flt)))
        whole.append(([h.id for h in s.search(q, k=5)], [h.id for h in _search_exact(s, q)]))
    # a multi-threaded HNSW build is not the same graph every run and may miss a row now and then: almost always exact
    assert sum(g != e for g, e in pairs) <= 2 and np.mean([len(set(g) & set(e)) / 10 for g, e in pairs]) >= 0.99
    assert sum(g != e for g, e in whole) <= 1


def test_graph_recall_on_tight_clusters_through_search(tmp_path):
    "Issue 42: near-duplicate memories (20 tight clusters of 200, 384-d) through the graph: recall@10 of search() against the exact scan (int8 graph: 0.6)."
    rng = np.random.default_rng(42)
    C = _unit(rng, 20, 384)
    V = C[rng.integers(20, size=4000)] + 0.1 * rng.standard_normal((4000, 384)).astype(np.float32) / np.sqrt(384)
    V = (V / np.linalg.norm(V, axis=1, keepdims=True)).astype(np.float32)
    s = _store(tmp_path / "s", 384)
    s.add_many([{"text": f"memory {i}", "kind": "fact", "id": f"m{i}", "entities": [f"e{i}"]} for i in range(4000)], embeddings=V)
    s.close()
    s = _store(tmp_path / "s", 384); _force(s)                             # reopened: every row in the saved graph, none pending
    E = s._backend.index.E[:4000].astype(np.float32)                        # the vectors as the store keeps them (float16)
    rec = []
    for i in rng.choice(4000, 50, replace=False):
        q = V[i] + 0.05 * rng.standard_normal(384).astype(np.float32) / np.sqrt(384)
        q = q / np.linalg.norm(q)
        hits = s.search(q, k=10, min_relevance=-1)
        exact = E @ q; kth = np.sort(exact)[-10]
        rec.append(np.mean([exact[s._backend.index.pos[h.id]] >= kth - 1e-6 for h in hits]) if len(hits) == 10 else 0.0)
    graph = s._backend.ann is not None and not s._backend._pending, s._backend.ann.dtype
    s.close()
    assert graph[0] and np.mean(rec) >= 0.95, (graph, np.mean(rec))
    assert graph[1] == "bf16"


def test_recall_guard_warns_and_widens_on_a_bad_graph(tmp_path):
    "Issue 42's guard: a graph too sparse for its data (4 links, a list of 4 while linking) is caught by the exact checks of sampled searches, warned about, and searched with a longer list."
    from earmem.memory.index.graph import RecallGuard
    rng = np.random.default_rng(7)
    V = _unit(rng, 3000, 64)                                                # uniform: the hardest shape for a graph
    s = _store(tmp_path / "s", 64); _force(s)
    s.add_many([{"text": f"memory {i}", "kind": "fact", "id": f"m{i}", "entities": [f"e{i}"]} for i in range(3000)], embeddings=V)
    b = s._backend; b.save_index()
    bad = VectorIndex(64, connectivity=4, expansion_add=4); bad.add(b._seq[np.arange(3000)], b.index.E[:3000], threads=1)
    b.ann, b.ann.ef = bad, 1
    b.ann.guard = RecallGuard(every=1, window=5, cost=float("inf"))   # judged on recall only (a graph of 3,000 is slower than their scan)
    from earmem.memory.backends.sqlite import WIDEN_MAX
    Q = _unit(rng, 6, 64)
    for q in Q[:4]: s.search(q, k=10, min_relevance=-1); assert b.ann.graph.expansion_search <= WIDEN_MAX    # unguarded: the widening stops at WIDEN_MAX
    with pytest.warns(RuntimeWarning, match=r"recall@\d+ estimated at 0\.\d+ over the last 5 checked searches"):
        s.search(Q[4], k=10, min_relevance=-1)
    g = b.ann.guard
    assert g.factor == 2 and len(g.history) == 1 and g.history[0][1] < 0.95, g.history
    s.search(Q[5], k=10, min_relevance=-1)
    assert WIDEN_MAX < b.ann.graph.expansion_search <= 2 * WIDEN_MAX, b.ann.graph.expansion_search   # widened past the old ceiling, up to twice it
    s.close()


def test_recall_guard_quiet_on_a_good_graph(tmp_path, recwarn):
    "The guard checks every search here and finds the graph as good as the exact scan: no warning, no widening."
    from earmem.memory.index.graph import RecallGuard
    rng = np.random.default_rng(8)
    C = _unit(rng, 10, 32)
    V = C[rng.integers(10, size=2000)] + 0.3 * _unit(rng, 2000, 32)
    V = (V / np.linalg.norm(V, axis=1, keepdims=True)).astype(np.float32)
    s = _store(tmp_path / "s"); _force(s)
    s.add_many([{"text": f"memory {i}", "kind": "fact", "id": f"m{i}", "entities": [f"e{i}"]} for i in range(2000)], embeddings=V)
    b = s._backend; b.save_index(); b.ann.guard = RecallGuard(every=1, window=5)
    for q in _unit(rng, 20, 32): s.search(q, k=10, min_relevance=-1)
    g = b.ann.guard
    assert g.seen == 20 and g.factor == 1 and g.estimate >= 0.95 and not [w for w in recwarn if "recall@" in str(w.message)], (g.seen, g.factor, g.estimate)
    s.close()


def _search_exact(s, q, k=5):
    b = s._backend
    saved = b.approx_min_rows
    b.approx_min_rows = None
    try: return s.search(q, k=k)
    finally: b.approx_min_rows = saved


def test_dedupe_through_graph_merges_like_exact(tmp_path):
    rng = np.random.default_rng(2)
    V = _unit(rng, 200, 32)
    out = {}
    for on in (True, False):
        s = _store(tmp_path / f"d{on}"); _force(s, on)
        s.add_many([{"text": f"m {i}", "kind": "fact"} for i in range(200)], embeddings=V)
        near = V[:50] + 0.01 * rng.standard_normal((50, 32)).astype(np.float32)
        near /= np.linalg.norm(near, axis=1, keepdims=True)
        s.add_many([{"text": f"m {i} again", "kind": "fact"} for i in range(50)], embeddings=near)
        out[on] = (len(s), sorted(s._backend.ids()))
        rng = np.random.default_rng(2); V = _unit(rng, 200, 32)
        s.close()
    assert out[True] == out[False] and out[True][0] == 200  # every near copy merged into its original, with or without the graph


def test_stale_and_corrupt_graph_rebuilt(tmp_path):
    rng = np.random.default_rng(3)
    s = _store(tmp_path / "s"); _force(s)
    s.add_many([{"text": f"m {i}", "kind": "fact"} for i in range(300)], embeddings=_unit(rng, 300, 32))
    s.close()
    folder = tmp_path / "s"
    stamp = json.loads((folder / STAMP_FILE).read_text())
    assert stamp["count"] == 300
    (folder / INDEX_FILE).write_bytes(b"\0" * stamp["bytes"])      # same size, garbage: corrupt
    s = _store(folder); _force(s)
    q = _unit(rng, 1, 32)[0]
    assert [h.id for h in s.search(q, k=5)] == [h.id for h in _search_exact(s, q)]
    assert VectorIndex.restore(folder, 32)[0] is not None            # rebuilt and saved
    s.close()
    (folder / STAMP_FILE).unlink()
    s = _store(folder, 32); _force(s); s.search(q, k=5)
    assert (folder / STAMP_FILE).is_file(); s.close()


DAMAGED_OPEN = r"""
import json, sys, warnings
import numpy as np
from earmem.memory.rules.hygiene import HashingEncoder, StoreConfig
from earmem.memory.store import MemoryStore
warnings.simplefilter("ignore")
s = MemoryStore(sys.argv[1], encoder=HashingEncoder(32), config=StoreConfig(min_relevance=-1.0), readonly=sys.argv[2] == "r")
s._backend.approx_min_rows, s._backend.prefilter_rows = 0, 0
q = np.random.default_rng(9).standard_normal(32).astype(np.float32); q /= np.linalg.norm(q)
print(json.dumps([h.id for h in s.search(q, k=5)])); s.close()
"""


def _damage_positions(size: int, rng) -> list:
    "Byte offsets to flip in a graph file: its header, the first links, the middle, the end, and random ones."
    return sorted({0, 1, 8, 16, 32, 64, 100, size // 4, size // 2, size - 1, *rng.integers(0, size, 10).tolist()})


def test_graph_damaged_in_place_never_crashes_the_process(tmp_path):
    "Each byte flipped in a saved graph (same size, stamp intact), opened by a writer and by a reader in a fresh process: no crash, the exact scan's answers, the writer rebuilds."
    rng = np.random.default_rng(4)
    s = _store(tmp_path / "s"); _force(s)
    s.add_many([{"text": f"m {i}", "kind": "fact"} for i in range(400)], embeddings=_unit(rng, 400, 32))
    s.close()
    folder = tmp_path / "s"; good = (folder / INDEX_FILE).read_bytes()
    q = np.random.default_rng(9).standard_normal(32).astype(np.float32); q /= np.linalg.norm(q)
    s = _store(folder); want = [h.id for h in _search_exact(s, q)]; s.close()
    for at in _damage_positions(len(good), rng):
        for mode in ("r", "w"):
            (folder / INDEX_FILE).write_bytes(good[:at] + bytes([good[at] ^ 0xA5]) + good[at + 1:])
            p = subprocess.run([sys.executable, "-c", DAMAGED_OPEN, str(folder), mode], cwd=ROOT, capture_output=True, text=True, timeout=120)
            assert p.returncode == 0, (at, mode, p.returncode, p.stderr[-1500:])
            assert json.loads(p.stdout.strip().splitlines()[-1]) == want, (at, mode)
            if mode == "w": assert (folder / INDEX_FILE).read_bytes() != good[:at] + bytes([good[at] ^ 0xA5]) + good[at + 1:]   # rebuilt


def test_graph_copied_from_another_store_is_not_trusted(tmp_path):
    "Two stores of the same size and revision: one's graph (and stamp) copied into the other is refused, named, and rebuilt; check() verifies the saved graph."
    rng = np.random.default_rng(5)
    for name in ("a", "b"):
        s = _store(tmp_path / name); _force(s)
        s.add_many([{"text": f"m {i}", "kind": "fact"} for i in range(300)], embeddings=_unit(rng, 300, 32))
        s.close()
    assert json.loads((tmp_path / "a" / STAMP_FILE).read_text())["rev"] == json.loads((tmp_path / "b" / STAMP_FILE).read_text())["rev"]
    for f in (INDEX_FILE, STAMP_FILE): (tmp_path / "b" / f).write_bytes((tmp_path / "a" / f).read_bytes())
    s = _store(tmp_path / "b"); _force(s)
    Q = _unit(rng, 20, 32)
    with pytest.warns(RuntimeWarning, match="holds other vectors than this store's"):
        got = [[h.id for h in s.search(q, k=10)] for q in Q]
    want = [[h.id for h in _search_exact(s, q, k=10)] for q in Q]
    assert np.mean([len(set(g) & set(w)) / 10 for g, w in zip(got, want)]) >= 0.95
    assert s.check()["ok"]; s.close()
    for f in (INDEX_FILE, STAMP_FILE): (tmp_path / "b" / f).write_bytes((tmp_path / "a" / f).read_bytes())
    s = _store(tmp_path / "b", 32)
    with pytest.raises(ValueError, match="the saved graph index holds other vectors than this store's"): s.check()
    s.close()


def test_locomo_recall_same_with_graph_on_and_off(tmp_path):
    "LoCoMo conv-26 through the store (hashing encoder: fast): the same Recall@5 with the graph forced on and off, and (almost) the same top-5s."
    from earmem.experiments.data import load_locomo
    try: bench = load_locomo()
    except (FileNotFoundError, ValueError) as e: pytest.skip(f"LoCoMo not available: {e}")
    mems = [m for m in bench.memories if m["bank"] == "conv-26" and m["kind"] == "turn"]
    qs = [q for q in bench.queries if q["bank"] == "conv-26" and q["scorable"]]
    s = MemoryStore(tmp_path / "loc", encoder=HashingEncoder(256), config=StoreConfig(min_relevance=-1.0)); _force(s, False)
    s.add_many([{"text": m["text"], "kind": "episode", "id": m["id"].replace(":", "-")} for m in mems])
    def run():
        hits = [[h.id for h in s.search(q["text"], k=5)] for q in qs]
        gold = [{g.replace(":", "-") for g in q["gold"]} for q in qs]
        return hits, float(np.mean([len(g & set(h)) / len(g) for g, h in zip(gold, hits)]))
    off, r_off = run()
    _force(s, True)
    on, r_on = run()
    assert s._backend.ann is not None and len(s._backend.ann) > 0
    print(f"LoCoMo conv-26: {len(mems)} turns, {len(qs)} questions, Recall@5 graph off {r_off:.4f}, on {r_on:.4f}")
    same = sum(a == b for a, b in zip(on, off))
    overlap = float(np.mean([len(set(a) & set(b)) / 5 for a, b in zip(on, off)]))
    print(f"identical top-5 lists: {same}/{len(qs)}, mean top-5 overlap {overlap:.4f}")
    # Fusion z-scores over the candidate pool, so a graph that misses a far-down dense candidate shifts every score a
    # little and near-tied neighbours may swap (CI saw 141/150 identical lists, here 147-149): the test asks for the
    # same Recall@5 within one gold turn and almost the same top-5 sets, not identical orders.
    assert abs(r_on - r_off) <= 1 / len(qs) and overlap >= 0.97


def test_searches_and_adds_while_the_linker_runs(tmp_path):
    "Searches from another thread and adds go on while the background linker links each batch: every answer is exact for the rows just added, nothing crashes, and closing saves every row into the graph."
    import threading
    import earmem.memory.backends.sqlite as sq
    rng = np.random.default_rng(5)
    s = _store(tmp_path / "s"); _force(s); b = s._backend
    batches = [_unit(rng, sq.PENDING_MAX + 500, 32) for _ in range(4)]
    stop, errors, answered = threading.Event(), [], [0]
    def searcher():
        while not stop.wait(0.002):
            try:
                for B in list(done):
                    q = B[int(rng.integers(len(B)))]
                    with s._lock: assert b.index.E[b.candidates(q, 1)[0][0]] @ q > 0.999   # what search() holds while it asks the backend
                    answered[0] += 1; time.sleep(0.002)   # a caller's pace: a thread that never lets go of the store's lock starves the writer
            except BaseException as e: errors.append(e); return
    done, flights = [], 0
    t = threading.Thread(target=searcher); t.start()
    try:
        for i, B in enumerate(batches):
            s.add_many([{"text": f"b{i} {j}", "kind": "fact"} for j in range(len(B))], embeddings=B)
            flights += b._flight is not None
            done.append(B)
            for q in B[:20]: assert b.index.E[b.candidates(q, 1)[0][0]] @ q > 0.999   # found while (maybe) linking
    finally:
        stop.set(); t.join()
    assert not errors, errors
    assert flights >= 3 and answered[0] > 0
    n = len(s); s.close()
    assert json.loads((tmp_path / "s" / STAMP_FILE).read_text())["count"] == n == sum(map(len, batches))


def test_a_commit_past_the_hard_bound_waits_for_the_flight(tmp_path, monkeypatch):
    "More than PENDING_HARD rows pending while a flight runs: the next commit waits for it, then links what is left; below the bound it does not wait."
    import threading
    import earmem.memory.backends.sqlite as sq
    monkeypatch.setattr(sq, "PENDING_MAX", 50); monkeypatch.setattr(sq, "PENDING_HARD", 200)
    rng = np.random.default_rng(6)
    s = _store(tmp_path / "s"); _force(s); b = s._backend
    # named items are deduped among their entity's memories, not through the graph, so a commit of them reads no graph
    # and waits for no chunk under way: only the bound can make it wait
    add = lambda n, tag: s.add_many([{"text": f"{tag} {j}", "kind": "fact", "entities": [f"{tag}{j}"]} for j in range(n)],
                                    embeddings=_unit(rng, n, 32))
    add(10, "seed")                                     # the graph is built (empty) at the first add: these 10 are pending
    go, real = threading.Event(), b.ann.add
    b.ann.add = lambda keys, V, **kw: (go.wait(30), real(keys, V, **kw))[1]   # the linker blocks until told to go
    add(120, "a"); first = b._flight                     # 130 > PENDING_MAX: a flight over them starts
    assert first is not None and first.thread.is_alive() and len(first.rows) == 130
    add(60, "b")                                        # 190 pending <= PENDING_HARD: the commit does not wait
    assert b._flight is first and first.thread.is_alive() and len(b._pending) == 190
    threading.Timer(0.3, go.set).start()
    t0 = time.perf_counter(); add(60, "c"); waited = time.perf_counter() - t0   # 250 > PENDING_HARD: waits for the flight
    assert waited >= 0.25 and not first.thread.is_alive()
    assert b._flight is not first and len(b._flight.rows) == 120       # the first flight landed; the 120 rows after it fly now
    del b.ann.add
    s.close()
    assert json.loads((tmp_path / "s" / STAMP_FILE).read_text())["count"] == 250


# ============================================================================ slow: SIGKILL during adds, graph enabled
_WORKER = r"""
import sys, numpy as np
from earmem.memory.backends.sqlite import SQLiteBackend
SQLiteBackend.approx_min_rows, SQLiteBackend.prefilter_rows = 0, 0
import earmem.memory.backends.sqlite as _sq
_sq.PENDING_MAX, _sq.LINK_CHUNK = 64, 32   # the background linker starts every other batch: kills land in its flights too
from earmem.memory.rules.hygiene import HashingEncoder, StoreConfig
from earmem.memory.store import MemoryStore
path, trial, log = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rng = np.random.default_rng(trial)
with open(log, "a") as f:
    for i in range(10**6):
        s = MemoryStore(path, encoder=HashingEncoder(32), config=StoreConfig(min_relevance=-1.0))
        for j in range(5):
            V = rng.standard_normal((50, 32)).astype(np.float32); V /= np.linalg.norm(V, axis=1, keepdims=True)
            ids = [f"t{trial}-{i}-{j}-{k}" for k in range(50)]
            s.add_many([{"text": f"note {x}", "kind": "fact", "id": x} for x in ids], embeddings=V)
            f.write(" ".join(ids) + "\n"); f.flush()
        s.close()                                   # saves the graph: kills land in saves too
"""


def _crash_trial(path: Path, trial: int, rng: random.Random) -> tuple:
    "One SIGKILL: (committed ids the worker logged, found after reopening, every graph answer a stored row, recall@10 of the graph against exact)."
    log = path.parent / f"t{trial}.log"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.Popen([sys.executable, "-c", _WORKER, str(path), str(trial), str(log)], env=env)
    t0 = time.time()
    while time.time() - t0 < 60 and (not log.exists() or not log.read_text().strip()): time.sleep(0.05)
    time.sleep(rng.uniform(0, 1.5))
    os.kill(p.pid, signal.SIGKILL); p.wait()
    committed = [x for line in log.read_text().splitlines() if line.endswith(line.split()[-1]) for x in line.split()] if log.exists() else []
    s = MemoryStore(path, encoder=HashingEncoder(32), config=StoreConfig(min_relevance=-1.0)); _force(s)
    b = s._backend
    found = sum(b.has(x) for x in committed)
    qs = np.stack([b.index.E[b.index.pos[x]] for x in rng.sample(committed, min(10, len(committed)))]) if committed else np.zeros((0, 32))
    stored, recall = True, []
    for q in qs:
        got, want = [b.index.ids[r] for r in b.candidates(q, 10)[0]], _exact_ids(b, q, 10)
        stored &= all(b.row(i) is not None for i in got)
        recall.append(len(set(got) & set(want)) / len(want))
    s.close()
    return len(committed), found, stored, float(np.mean(recall)) if recall else 1.0


@pytest.mark.slow
def test_sigkill_during_adds_with_graph(tmp_path):
    trials = int(os.environ.get("EARMEM_INDEX_CRASH_TRIALS", 10))
    path, rng = tmp_path / "crash", random.Random(0)
    s = _store(path); s.close()
    committed = found = consistent = 0; recalls = []
    for t in range(trials):
        c, f, ok, rec = _crash_trial(path, t, rng)
        committed += c; found += f; consistent += ok; recalls.append(rec)
        print(f"\rSIGKILL trial {t + 1}/{trials}: committed {committed}, found {found}, graph answers all stored {consistent}/{t + 1}, "
              f"recall@10 mean {np.mean(recalls):.3f} min {min(recalls):.2f}", end="", flush=True)
    print()
    # the graph is approximate: a miss is a recall question (the target is >= 0.95), never a row that does not exist
    assert committed > 0 and found == committed and consistent == trials and np.mean(recalls) >= 0.95


def test_older_store_with_inline_vectors_reads_and_converts(tmp_path):
    "A store written before the vector log (vectors inline in the rows, no vectors.f32): a reader answers as before, a writer converts it once, and the answers stay the same."
    import sqlite3
    from earmem.memory.index.graph import VECTOR_LOG16 as VECTOR_LOG, REF_SIZE   # the log a store writes now (float16)
    folder, rng = tmp_path / "old", np.random.default_rng(3)
    s = _store(folder); E = _unit(rng, 300, 32)
    s.add_many([{"text": f"note {i}", "kind": "fact"} for i in range(300)], embeddings=E); s.close()
    db = sqlite3.connect(folder / "memories.sqlite", isolation_level=None)   # turn it back into the older layout
    log = np.fromfile(folder / VECTOR_LOG, np.float16).astype(np.float32).reshape(-1, 32)
    refs = db.execute("SELECT seq, embedding FROM memories").fetchall()
    db.executemany("UPDATE memories SET embedding=? WHERE seq=?", [(log[int.from_bytes(b[1:], "little")].tobytes(), q) for q, b in refs])
    db.execute("DELETE FROM meta WHERE key='vector_log'"); db.close(); (folder / VECTOR_LOG).unlink()
    Q = _unit(rng, 5, 32)
    ro = MemoryStore(folder, encoder=HashingEncoder(32), readonly=True)
    before = [[h.id for h in ro.search(q, k=5)] for q in Q]; ro.close()
    assert not (folder / VECTOR_LOG).exists()                                 # a reader changes nothing
    w = _store(folder)
    lens = {len(b) for b, in w._backend.db.execute("SELECT embedding FROM memories")}
    after = [[h.id for h in w.search(q, k=5)] for q in Q]; w.close()
    assert lens == {REF_SIZE} and after == before and (folder / VECTOR_LOG).stat().st_size == 300 * 32 * 2


# ============================================================================ the float16 vector log (issue 22)
def _f16_store(folder, n=300, dim=32, seed=5):
    "A store of `n` facts with float32 unit embeddings; returns (store, the embeddings as given)."
    s = _store(folder, dim); E = _unit(np.random.default_rng(seed), n, dim)
    s.add_many([{"text": f"note {i}", "kind": "fact", "id": f"n{i}"} for i in range(n)], embeddings=E)
    return s, E


def _scores(b, Q, K=10):
    "(ids, cosines) of the top-K of each query through the backend, as plain lists."
    out = []
    for q in Q:
        rows, cos = b.candidates(q, K)
        out.append(([b.index.ids[r] for r in rows], np.asarray(cos, np.float32).tolist()))
    return out


@pytest.mark.parametrize("graph", [False, True])
def test_f16_log_scores_the_same_after_reopen(tmp_path, graph):
    "New stores keep 2·dim bytes a vector; the mirror holds the float16-rounded values right after the add, and every score (search, dedupe) is bit-identical after a reopen."
    from earmem.memory.index.graph import VECTOR_LOG, VECTOR_LOG16, round_f16
    folder = tmp_path / "s"
    s, E = _f16_store(folder); _force(s, graph); b = s._backend
    Q = _unit(np.random.default_rng(6), 20, 32)
    probe = E[:5] + 0.05 * _unit(np.random.default_rng(7), 5, 32); probe /= np.linalg.norm(probe, axis=1, keepdims=True)
    mirror = b.index.E[[b.index.pos[f"n{i}"] for i in range(300)]].copy()
    stored, batch = b.near_duplicates(["fact"] * 2, np.stack([E[0], E[0]]), 0.9)   # a new vector scores as if it were stored already
    assert abs(dict((r, c) for c, r in stored[1])[b.index.pos["n0"]] - batch[1][0][0]) < 1e-6
    before, dup_before = _scores(b, Q), b.near_duplicates(["fact"] * 5, probe, 0.9)
    s.close()
    assert (folder / VECTOR_LOG16).stat().st_size == 300 * 2 * 32 and not (folder / VECTOR_LOG).exists()   # 2·dim bytes a vector
    assert np.array_equal(mirror, round_f16(E)) and not np.array_equal(mirror, E)   # rounded at add time, not only on disk
    s = _store(folder); _force(s, graph); b = s._backend
    after, dup_after = _scores(b, Q), b.near_duplicates(["fact"] * 5, probe, 0.9)
    assert np.array_equal(b.index.E[[b.index.pos[f"n{i}"] for i in range(300)]], mirror)
    assert after == before and dup_after == dup_before and any(dup_before[0])      # same ids, same cosines to the bit
    exact = [sorted(((float(c), i) for c, i in zip(round_f16(E) @ q, range(300))), reverse=True)[:10] for q in Q]
    got, want = [ids for ids, _ in after], [[f"n{i}" for _, i in e] for e in exact]
    if graph: assert np.mean([len(set(g) & set(w)) / 10 for g, w in zip(got, want)]) >= 0.98   # the graph is approximate (CI saw one miss in 200)
    else: assert got == want                                                                   # exact top-K of the stored vectors
    s.close()


def _to_f32_store(folder, E):
    "Turn a float16 store back into one with the older float32 log, holding the original (unrounded) vectors `E` (rows n0…)."
    import sqlite3
    from earmem.memory.index.graph import VECTOR_LOG, VECTOR_LOG16
    db = sqlite3.connect(folder / "memories.sqlite", isolation_level=None)
    log = np.zeros((len(E), E.shape[1]), np.float32)
    for mid, ref in db.execute("SELECT id, embedding FROM memories"): log[int.from_bytes(ref[1:], "little")] = E[int(mid[1:])]
    log.tofile(folder / VECTOR_LOG); (folder / VECTOR_LOG16).unlink()
    db.execute("UPDATE meta SET value='1' WHERE key='vector_log'"); db.close()


def test_older_f32_log_reads_unchanged_then_converts(tmp_path):
    "A store with a vectors.f32 log: a reader reads it as it is (float32 values, nothing written); a writer converts it to float16 once; a reader opened before follows the switch."
    from earmem.memory.index.graph import VECTOR_LOG, VECTOR_LOG16, round_f16, log_format
    folder = tmp_path / "old"
    s, E = _f16_store(folder); s.close(); _to_f32_store(folder, E)
    ro = MemoryStore(folder, encoder=HashingEncoder(32), readonly=True); b = ro._backend
    assert b.vlog.fmt == "1" and np.array_equal(b.index.E[[b.index.pos[f"n{i}"] for i in range(300)]], E)   # unchanged values
    Q = _unit(np.random.default_rng(8), 10, 32)
    ids_before = [ids for ids, _ in _scores(b, Q)]
    assert not (folder / VECTOR_LOG16).exists() and (folder / VECTOR_LOG).stat().st_size == 300 * 4 * 32   # a reader converts nothing
    w = _store(folder); wb = w._backend                                            # a writer converts
    assert (wb.vlog.fmt, log_format(wb.db)) == ("f16", "f16") and not (folder / VECTOR_LOG).exists()
    assert (folder / VECTOR_LOG16).stat().st_size == 300 * 2 * 32
    assert np.array_equal(wb.index.E[[wb.index.pos[f"n{i}"] for i in range(300)]], round_f16(E))
    assert [ids for ids, _ in _scores(wb, Q)] == ids_before
    w.add_many([{"text": "a later note", "kind": "fact", "id": "later"}], embeddings=-E[:1])
    ro.search(Q[0], k=5)                                                           # the old reader refreshes: follows the new log
    assert b.vlog.fmt == "f16" and np.array_equal(b.index.E[b.index.pos["later"]], round_f16(-E[:1])[0])
    assert np.array_equal(b.index.E[[b.index.pos[f"n{i}"] for i in range(300)]], round_f16(E))   # its mirror rounded like a reopen
    ro.close(); w.close()


_KILL_AT = {"tmp written": ("os", "fsync"), "renamed, not committed": ("index", "fsync_dir"), "committed, old log kept": ("path", "unlink")}


@pytest.mark.parametrize("stage", list(_KILL_AT))
def test_kill_mid_conversion_leaves_a_whole_store(tmp_path, stage):
    "A writer killed (os._exit, no clean-up) at each step of the conversion leaves a store that opens whole: every memory, its vector, one log."
    import pathlib, earmem.memory.index.graph as index
    from earmem.memory.index.graph import VECTOR_LOG, VECTOR_LOG16, round_f16
    folder = tmp_path / "old"
    s, E = _f16_store(folder); s.close(); _to_f32_store(folder, E)
    where, name = _KILL_AT[stage]
    pid = os.fork()
    if pid == 0:                                                                   # the child: a writer that dies at `stage`
        try:
            if where == "os": os.fsync = lambda fd: os._exit(9)
            elif where == "index": index.fsync_dir = lambda folder: os._exit(9)
            else:
                unlink = pathlib.Path.unlink
                pathlib.Path.unlink = lambda p, missing_ok=False: os._exit(9) if p.name == VECTOR_LOG else unlink(p, missing_ok=missing_ok)
            SQLiteBackend(folder, 32).close()
        finally: os._exit(0)
    assert os.waitpid(pid, 0)[1] >> 8 == 9                                         # it died where asked, mid-conversion
    converted = stage == "committed, old log kept"
    ro = SQLiteBackend(folder, 32, readonly=True)                                  # a reader sees a whole store, one log or the other
    assert ro.vlog.fmt == ("f16" if converted else "1") and ro.index.n == 300
    assert np.array_equal(ro.index.E[[ro.index.pos[f"n{i}"] for i in range(300)]], round_f16(E) if converted else E); ro.close()
    w = SQLiteBackend(folder, 32)                                                  # the next writer finishes the job
    assert w.vlog.fmt == "f16" and w.check() == 300
    assert np.array_equal(w.index.E[[w.index.pos[f"n{i}"] for i in range(300)]], round_f16(E)); w.close()
    assert not (folder / VECTOR_LOG).exists() and not list(folder.glob(".vectors.f16.*"))
    assert (folder / VECTOR_LOG16).stat().st_size == 300 * 2 * 32


def _plans(s, items, V, entities: bool):
    "The dedupe plan of a batch (where, target id, similarity rounded) with the store's rule (no update judge), candidates asked with or without the items' entities."
    from earmem.memory.rules.hygiene import normalise_item
    from earmem.memory.rules.updates import plan_dedupe
    b, c = s._backend, s.config
    prepared = [normalise_item(it, "", 1.8e9, {}) for it in items]
    V = s._batch_vectors(prepared, V)
    near = min(c.conflict_similarity, c.dedupe_threshold)
    old, new = b.near_duplicates([p["kind"] for p in prepared], V, near, (), **({"entities": [p["entities"] for p in prepared]} if entities else {}))
    fresh, merges, plan, _ = plan_dedupe(prepared, V, old, new, b.dedupe_fields, b.has, None, c.dedupe_threshold, c.conflict_kinds)
    return [(w, ref if w == "old" else None, None if sim is None else round(sim, 4)) for w, ref, sim, _ in plan]


def test_entity_scoped_dedupe_decides_like_the_exact_rule(tmp_path):
    "Above approx_min_rows (forced): candidates asked with the items' entities give the exact rule's plan, item for item."
    rng = np.random.default_rng(7)
    s = _store(tmp_path / "e"); _force(s)
    V = _unit(rng, 3000, 32)
    kinds = ["fact", "episode", "preference"]
    s.add_many([{"text": f"m {i}", "kind": kinds[i % 3], "entities": [f"E{i % 40}"] if i % 10 else []} for i in range(3000)], embeddings=V)
    src = rng.choice(3000, 300, replace=False)
    P = V[src] + rng.uniform(0.05, 1.5, (300, 1)).astype(np.float32) * _unit(rng, 300, 32)   # from near copies to loosely related
    items = [{"text": f"again {j}", "kind": kinds[i % 3], "entities": [f"e{i % 40}", *([f"x{j % 7}"] if j % 5 == 0 else [])] if i % 10 else []} for j, i in enumerate(src)]
    named, graph = _plans(s, items, P, entities=True), _plans(s, items, P, entities=False)
    exact = s._backend.approx_min_rows; s._backend.approx_min_rows = None                   # the exact scan of every row
    try: truth = _plans(s, items, P, entities=False)
    finally: s._backend.approx_min_rows = exact
    merged = sum(w == "old" for w, _, _ in truth)
    kinds_of = {w for w, _, _ in truth}
    print(f"plan equal to the exact one: entity-scoped {sum(a == b for a, b in zip(named, truth))}/300 items, graph only "
          f"{sum(a == b for a, b in zip(graph, truth))}/300 ({merged} merges, {300 - merged} new)")
    # items without entities still go through the graph, which may miss a row: every named item must agree
    assert 50 < merged < 250 and kinds_of == {"old", "new"} and all(a == b for a, b, it in zip(named, truth, items) if it["entities"])
    s.close()


def _bad_graph_store(tmp_path, seed: int) -> tuple:
    "(rng, a store of 3,000 random 64-d memories forced onto its graph, its backend, a bad graph (4 links) of the same vectors, the vectors)."
    rng = np.random.default_rng(seed)
    V = _unit(rng, 3000, 64)
    s = _store(tmp_path / "s", 64); _force(s)
    s.add_many([{"text": f"memory {i}", "kind": "fact", "id": f"m{i}", "entities": [f"e{i}"]} for i in range(3000)], embeddings=V)
    b = s._backend; b.save_index()
    bad = VectorIndex(64, connectivity=4, expansion_add=4); bad.add(b._seq[np.arange(3000)], b.index.E[:3000], threads=1)
    return rng, s, b, bad, V


def test_recall_guard_falls_back_to_exact_scans_when_the_widest_list_fails(tmp_path):
    "Issue 42: a graph that stays below the target at the guard's widest list is given up — later searches are exact scans, and the answer is the exact one."
    from earmem.memory.index.graph import RecallGuard
    rng, s, b, bad, V = _bad_graph_store(tmp_path, 11)
    b.ann, b.ann.ef = bad, 1
    b.ann.guard = RecallGuard(every=1, window=3, target=0.999, most=1)   # no widening to try: the first bad window gives up
    Q = _unit(rng, 8, 64)
    with pytest.warns(RuntimeWarning, match="exact scans from now on"):
        for q in Q[:3]: s.search(q, k=10, min_relevance=-1)
    assert b.ann.guard.exact and b.ann.guard.history[-1][2] == "exact"
    for q in Q[3:]:
        got = s.search(q, k=10, min_relevance=-1).ids
        want = [f"m{i}" for i in np.argsort(-(V @ q), kind="stable")[:10]]
        assert set(got) == set(want), (got, want)
    s.close()


def test_recall_guard_learns_early_and_remembers_after_reopening(tmp_path, recwarn):
    "Issue 42: a new graph's first searches are each checked exactly (not one in GUARD_EVERY), so a bad graph (4 links) under a guard that may double its list once, to a target the graph cannot hold, is given up within two windows of searches, not thousands (or sooner: at 3,000 rows the widened list is also slower than the scan); the store keeps the verdict beside its graph: closed and reopened, it answers with exact scans at once and checks nothing again."
    from earmem.memory.index.graph import GUARD_FILE, GUARD_WINDOW, RecallGuard
    rng, s, b, bad, V = _bad_graph_store(tmp_path, 12)
    bad.ef, bad.guard = 1, RecallGuard(target=0.999, most=2)     # the default sampling (one in 100 once settled) and window
    b.ann = bad
    Q = _unit(rng, 3 * GUARD_WINDOW, 64)
    for n, q in enumerate(Q, 1):
        s.search(q, k=10, min_relevance=-1)
        if bad.guard.exact: break
    assert bad.guard.exact and n <= 2 * GUARD_WINDOW and bad.guard.history[-1][2] == "exact", (n, bad.guard.history)   # (for its recall, or its cost)
    assert sum("exact scans from now on" in str(w.message) for w in recwarn) == 1
    seen = bad.guard.seen
    s.close()                                                     # the bad graph is saved, its guard's verdict beside it
    assert json.loads((tmp_path / "s" / GUARD_FILE).read_text())["exact"] is True
    recwarn.clear()
    s = _store(tmp_path / "s", 64); _force(s)
    for q in Q[:5]:
        got = s.search(q, k=10, min_relevance=-1).ids
        assert set(got) == {f"m{i}" for i in np.argsort(-(V @ q), kind="stable")[:10]}, got
    g = s._backend.ann.guard
    assert s._backend.ann.graph.connectivity == 4 and g.exact and g.seen == seen and g.history[-1][2] == "exact", (g.seen, seen, g.history)
    assert not [w for w in recwarn if "graph index" in str(w.message)]   # nothing re-learnt, nothing warned again
    s.close()
