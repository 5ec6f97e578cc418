"""Recall@10 of the embedded store's `search()` against an exact scan, on data shaped as users' memories are (issue 42).

For each size and data shape: a store built through the public API (`MemoryStore(folder, encoder=HashingEncoder(dim))`,
`add_many(items, embeddings=V)` in batches, one entity per memory so the door merges nothing), closed and reopened;
then queries near stored memories asked as embeddings through `store.search(q, k=10, min_relevance=-1)`, with the
graph as the store chooses (`graph`), with one look at the graph (`narrow`: `WIDEN_MAX` 0, no widening) and forced off
(`exact`: `approx_min_rows=None`); beside them FAISS-HNSW and hnswlib (chapter 26's peers) on the same vectors at the
store graph's lookup recall. Reported per way: `same@10`, the share of the graph-off search()'s hits that this search
returns (the same scoring: whatever the ranking does after the lookup — recency and importance lifts among
near-identical memories, suspected of the exact way's 0.991 against the cosine top 10 on tight clusters at 200k, not
confirmed: at 20k the exact way scores 1.000 — is not counted as the graph's miss); `search@10`, against the exact cosine top 10;
`lookup@10`, the backend's `candidates(q, 10)` against the exact cosine top 10; ties (exact duplicates) count either
way. p50/p95 are wall times in ms, encoding excluded (the queries are embeddings); the searches, the lookups and the
references are each done in a pass of their own over the queries (until 2026-12-07 they alternated per query, which
timed the lookup warm, right after the search of the same query, and the search cold, right after the reference's scan);
the lookups search at the guard's factor but are not counted or checked by it (before 2026-12-07 their checks, at K = 10,
were mixed into its windows with search()'s at K = 20). The load average is printed.

The store's recall guard (chapter 19a) checks a new graph's first searches exactly until a window of 20 is full, and
widens the search list (or gives the graph up for exact scans) when they fall short; each way starts with a fresh guard
(its saved state removed). So the graph ways are reported twice: `first` (the measured queries on the reopened store,
the guard's calibration included: what the first searches of a new graph get) and, with `--warmup N` (default 200),
`settled` (the same queries asked again after N warm-up queries drawn like them but distinct from them: what a user
gets once the guard has calibrated). The `guard est` column gives the guard's factor after the row (×1 … ×8, or `exact`) and its estimate of
recall@K (K as the store asks: 20 for `search(q, k=10)`), the mean of its checks since the last widening. Once the graph
is given up, chapter 19ab's inverted lists answer (built in the background from the first search that needs them; the
study waits for them after the warm-up and asks the warm-up queries again): the column then reads `lists ×F` with the
lists' own guard, or `lists exact` / `exact` when that guard gave them up too.

    nice -n 10 python studies/42_recall_shapes.py [--sizes 50000 100000] [--shapes tight bench dups uniform]
        [--queries 100] [--warmup 200] [--dim 384] [--ways graph narrow exact faiss hnswlib] [--set sqlite.OVERSAMPLE=8 ...] [--json]

Shapes: `tight` clusters of 200 memories (1,000 at 200k) of small spread (cosine ≈ 0.995 to their centre, as
near-duplicate memories are);
`bench` the bench's clusters (chapter 26: 1,000 centres, cosine ≈ 0.7 to them); `dups` exact and near duplicates
of the bench's clusters (each base vector stored 4 times: once as it is, once exactly again, twice with a tiny
perturbation); `dups_uniform` the same of uniform base vectors (what `dups` was before: its strangers are uniform
neighbours); `uniform` uniform on the sphere; `locomo` LoCoMo's 5,872 turns encoded by the bundled MiniLM, then
perturbed copies of them (cosine ≈ 0.96) up to the size, queried with LoCoMo's questions (encoding them once takes
about 10 minutes on a loaded 2-core machine; the encoder caches them). Progress goes to stderr; the table (or JSON) to stdout."""
import argparse, importlib, json, os, sys, tempfile, time
from pathlib import Path
import numpy as np
from earmem.memory.rules.hygiene import HashingEncoder, StoreConfig
from earmem.memory.store import MemoryStore
from earmem.memory.index.graph import GUARD_FILE, round_f16

SHAPES = ("tight", "bench", "dups", "dups_uniform", "uniform", "locomo")
QUERY_NOISE = {"tight": 0.05, "bench": 0.5, "dups": 0.02, "dups_uniform": 0.02, "uniform": 0.5}  # a query's offset from its memory, in units of a random unit vector
LOCOMO = Path("/work/shared/data/locomo/locomo10.json")  # or $EARMEM_DATA/locomo10.json
LOCOMO_NOISE = 0.3  # a perturbed copy of a LoCoMo turn: its MiniLM vector plus this times a random unit vector (cosine ≈ 0.96 to the turn)


def unit(X): return (X / np.linalg.norm(X, axis=-1, keepdims=True)).astype(np.float32)


def vectors(shape: str, n: int, dim: int, rng) -> np.ndarray:
    "`n` unit vectors of data shape `shape` (see the module's doc)."
    g = lambda m: rng.standard_normal((m, dim)) / np.sqrt(dim)
    if shape == "uniform": return unit(rng.standard_normal((n, dim)))
    if shape in ("tight", "bench"):
        c = max(1, n // 200) if shape == "tight" else 1000
        C = unit(rng.standard_normal((c, dim)))
        return unit(C[rng.integers(c, size=n)] + (0.1 if shape == "tight" else 1.0) * g(n))
    if shape in ("dups", "dups_uniform"):  # dups: duplicates of the bench's clustered memories; dups_uniform: of uniform ones
        m = -(-n // 4)
        B = vectors("bench", m, dim, rng) if shape == "dups" else unit(rng.standard_normal((m, dim)))
        return unit(np.concatenate([B, B, B + 0.01 * g(len(B)), B + 0.01 * g(len(B))]))[rng.permutation(4 * len(B))[:n]]
    raise ValueError(f"shape: expected one of {SHAPES}, got {shape!r}")


def locomo_shape(n: int, n_queries: int, rng, warmup: int = 0, wrng=None) -> tuple:
    "(`n` vectors: LoCoMo's turns encoded by the bundled MiniLM, then perturbed copies of them; `n_queries` LoCoMo questions encoded as queries; `warmup` other questions, drawn with `wrng`)."
    import os
    from earmem.core import Encoder
    path = Path(os.environ["EARMEM_DATA"]) / "locomo10.json" if os.environ.get("EARMEM_DATA") else LOCOMO
    convs = json.loads(path.read_text())
    turns = [t["text"] for c in convs for k, v in c["conversation"].items() if k.startswith("session") and isinstance(v, list) for t in v]
    qs = [q["question"] for c in convs for q in c["qa"]]
    enc = Encoder()
    pick = rng.choice(len(qs), n_queries, replace=False)
    T, Q = unit(enc.encode_documents(turns)), unit(enc.encode_queries([qs[i] for i in pick]))
    rest = np.setdiff1d(np.arange(len(qs)), pick)
    W = unit(enc.encode_queries([qs[i] for i in wrng.choice(rest, min(warmup, len(rest)), replace=False)])) if warmup else Q[:0]
    src = np.concatenate([np.arange(len(T)), rng.integers(len(T), size=max(0, n - len(T)))])[:n]
    V = T[src].copy()
    V[len(T):] = unit(V[len(T):] + LOCOMO_NOISE * rng.standard_normal((len(V) - len(T), T.shape[1])) / np.sqrt(T.shape[1]))
    return V[rng.permutation(n)], Q, W


def build(folder: Path, V: np.ndarray, batch: int = 10_000, log=print):
    "A store of `V` through `add_many`, closed (one entity per memory: the door compares each only with itself)."
    s = MemoryStore(folder, encoder=HashingEncoder(V.shape[1]), config=StoreConfig(min_relevance=-1.0))
    t0 = time.perf_counter()
    for i in range(0, len(V), batch):
        j = min(len(V), i + batch)
        s.add_many([{"text": f"memory {m}", "kind": "fact", "id": f"m{m}", "entities": [f"e{m}"]} for m in range(i, j)], embeddings=V[i:j])
        log(f"  added {j:,}/{len(V):,} ({time.perf_counter() - t0:.0f} s)")
    n = s._backend.active_count(); s.close()
    if n != len(V): raise RuntimeError(f"the door merged memories: {n} active of {len(V)}")
    return time.perf_counter() - t0


def _tied(got: np.ndarray, want: np.ndarray) -> int:
    "How many of cosines `got` match cosines `want` as multisets (to 1e-6): an exact duplicate answers for its twin."
    g, w = np.unique(np.round(got, 6), return_counts=True), np.unique(np.round(want, 6), return_counts=True)
    both, ig, iw = np.intersect1d(g[0], w[0], return_indices=True)
    return int(np.minimum(g[1][ig], w[1][iw]).sum())


def measure(folder: Path, V: np.ndarray, Q: np.ndarray, way: str, k: int = 10, W: np.ndarray | None = None) -> list:
    """On the reopened store (`way` graph: as it chooses; narrow: no widening; exact: graph off), per query: `search(q, k)`
    timed (p50/p95 ms) and its recall against the same search with the graph off (`same@10`: the same scoring, so the
    ranking's recency and importance lifts do not count as misses) and against the exact cosine top k (`search@10`);
    the backend's lookup (`candidates(q, k)`) timed and its recall against the exact cosine top k (`lookup@10`).
    Each way starts with a fresh recall guard. Returns the row of the first pass over `Q`, then (graph ways, warm-up
    queries `W` given) the row of a second pass after `W` were asked."""
    import earmem.memory.backends.sqlite as sqlite
    (folder / GUARD_FILE).unlink(missing_ok=True)  # a fresh guard for each way: it calibrates on this way's first searches
    s = MemoryStore(folder, encoder=HashingEncoder(V.shape[1]), config=StoreConfig(min_relevance=-1.0))
    b = s._backend
    on = b.approx_min_rows
    if way == "exact": b.approx_min_rows = None
    widen = getattr(sqlite, "WIDEN_MAX", None)
    if way == "narrow" and widen is not None: sqlite.WIDEN_MAX = 0  # one look at the graph: no widening
    E = round_f16(V)  # the vectors as the store keeps them
    s.search(Q[0], k=k, min_relevance=-1)  # opens (maps) the graph
    used = b.ann is not None and on is not None and way != "exact"
    rows = [{"pass": "first", **one_pass(s, b, E, Q, k)}]
    if used and W is not None and len(W):
        for q in W: s.search(q, k=k, min_relevance=-1)
        st = getattr(b.index, "_lists", None)
        if st is not None and st.thread is not None:  # the graph was given up and chapter 19ab's lists were built meanwhile: their guard calibrates on the warm-up again
            st.thread.join()
            for q in W: s.search(q, k=k, min_relevance=-1)
        rows.append({"pass": f"settled", "warmup": len(W), **one_pass(s, b, E, Q, k)})
    s.close()
    if widen is not None: sqlite.WIDEN_MAX = widen
    return [{**r, "graph_used": used} for r in rows]


def one_pass(s, b, E: np.ndarray, Q: np.ndarray, k: int) -> dict:
    "One pass of `measure` over the queries `Q` (see there); `guard`: the recall guard's factor after it (or 'exact')."
    same, whole, look, ts, tl = [], [], [], [], []
    ids = lambda hits: np.array([int(h.id[1:]) for h in hits], np.int64)
    got_hits, got_rows = [], []  # timed in passes of their own: a lookup right after the search of the same query found its graph nodes in cache, and a search right after the reference's full float32 scan (multi-threaded BLAS) shared the cores with it
    for q in Q:
        t0 = time.perf_counter(); got_hits.append(s.search(q, k=k, min_relevance=-1)); ts.append(time.perf_counter() - t0)
    guards = [x for x in (b.ann.guard if b.ann is not None else None, getattr(getattr(b.index, "_lists", None), "guard", None)) if x is not None]
    for g in guards: g.due = lambda: False  # the lookups (at K = k) search with the guards' factors but are not their checks: the guards judge search()'s
    for q in Q:
        t0 = time.perf_counter(); got_rows.append(b.candidates(q, k)[0]); tl.append(time.perf_counter() - t0)
    for g in guards: del g.due
    for q, hits, rows in zip(Q, got_hits, got_rows):
        saved, b.approx_min_rows = b.approx_min_rows, None
        ref = ids(s.search(q, k=k, min_relevance=-1)); b.approx_min_rows = saved
        exact = E @ q
        kth = np.partition(exact, len(exact) - k)[len(exact) - k]
        got, near = ids(hits), np.array([int(b.index.ids[r][1:]) for r in rows], np.int64)
        whole.append(np.count_nonzero(exact[got] >= kth - 1e-6) / k)
        look.append(np.count_nonzero(exact[near] >= kth - 1e-6) / k)
        same.append(_tied(exact[got], exact[ref]) / max(1, len(ref)))
    ms = lambda t, p: round(1000 * float(np.percentile(t, p)), 2)
    g = b.ann.guard if b.ann is not None and b.approx_min_rows is not None else None
    st = getattr(b.index, "_lists", None)  # chapter 19ab's inverted lists, once the graph was given up
    if g is not None and g.exact and st is not None:
        g = st.guard if st.lists is not None else None  # the lists answer (their guard shown), or are still being built (exact scans meanwhile)
    return {"lists": st is not None and st.lists is not None and not st.guard.exact, "same@10": round(float(np.mean(same)), 4), "search@10": round(float(np.mean(whole)), 4), "p50_ms": ms(ts, 50), "p95_ms": ms(ts, 95),
            "lookup@10": round(float(np.mean(look)), 4), "lookup_p50_ms": ms(tl, 50), "lookup_p95_ms": ms(tl, 95),
            "guard": None if g is None else "exact" if g.exact else f"x{g.factor}", "guard_seen": None if g is None else g.seen,
            "guard_estimate": None if g is None or g.estimate is None else round(g.estimate, 3)}


def peer(name: str, folder: Path, V: np.ndarray, Q: np.ndarray, target: float, k: int = 10) -> dict:
    "A peer engine of chapter 26 (faiss, hnswlib) on the same (float16-rounded) vectors: the smallest search list of `EQUAL_RECALL_EF` whose recall@10 against the exact top k reaches `target` (the store's lookup), its p50/p95 ms."
    from earmem.memory.measure.bench import _PEERS, EQUAL_RECALL_EF
    E = round_f16(V)
    e = _PEERS[name](folder / name, V.shape[1])
    t0 = time.perf_counter(); e.build(E); secs = time.perf_counter() - t0; e.reopen()
    S = Q @ E.T; kth = -np.partition(-S, k - 1, axis=1)[:, k - 1]
    for ef in EQUAL_RECALL_EF:
        e.set_ef(ef); ts, rec = [], []
        for q, srow, t in zip(Q, S, kth):
            t0 = time.perf_counter(); got = e.search(q, k); ts.append(time.perf_counter() - t0)
            rec.append(np.count_nonzero(srow[np.asarray(got, np.int64)] >= t - 1e-6) / k)
        if np.mean(rec) >= target: break
    e.close()
    return {"ef": ef, "lookup@10": round(float(np.mean(rec)), 4), "lookup_p50_ms": round(1000 * float(np.median(ts)), 2),
            "lookup_p95_ms": round(1000 * float(np.percentile(ts, 95)), 2), "reached": bool(np.mean(rec) >= target), "build_s": round(secs, 1)}


def kept(keep: Path | None, name: str):
    "The folder to build a store in: `keep/name` (kept, made if missing) with `--keep`, else a temporary folder (removed after)."
    import contextlib
    if keep is None: return tempfile.TemporaryDirectory()
    (keep / name).mkdir(parents=True, exist_ok=True)
    return contextlib.nullcontext(str(keep / name))


def stored(folder: Path, V: np.ndarray, shape: str, n: int, log) -> float:
    "Build the store of `V` in `folder` unless a finished build of the same vectors is there (its `built.json`: size and a checksum of `V`); the build's seconds."
    mark, sig = folder.parent / "built.json", {"memories": len(V), "dim": V.shape[1], "sum": float(np.round(V.astype(np.float64).sum(), 6))}
    if mark.exists() and {k: v for k, v in json.loads(mark.read_text()).items() if k != "build_s"} == sig:
        log(f"{shape} {n:,}: reusing the store kept in {folder}"); return json.loads(mark.read_text())["build_s"]
    if folder.exists(): import shutil; shutil.rmtree(folder)
    mark.unlink(missing_ok=True)
    log(f"{shape} {n:,}: building in {folder}")
    secs = build(folder, V, log=log)
    mark.write_text(json.dumps({**sig, "build_s": round(secs, 1)}))
    return secs


def apply_knobs(knobs: list):
    "Set module constants for an experiment: 'sqlite.OVERSAMPLE=8' → earmem.memory.backends.sqlite.OVERSAMPLE = 8; 'graph.X' → earmem.memory.index.graph.X."
    where = {"sqlite": "earmem.memory.backends.sqlite", "graph": "earmem.memory.index.graph", "mirror": "earmem.memory.index.mirror", "lists": "earmem.memory.index.lists"}
    for kv in knobs:
        name, _, value = kv.partition("=")
        mod, _, attr = name.partition(".")
        if mod not in where or not hasattr(m := importlib.import_module(where[mod]), attr):
            raise SystemExit(f"--set: unknown knob {name!r} (expected sqlite.NAME, graph.NAME, mirror.NAME or lists.NAME of an existing constant)")
        setattr(m, attr, json.loads(value))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[50_000], help="store sizes (memories)")
    ap.add_argument("--shapes", nargs="+", default=list(SHAPES), choices=SHAPES, help="data shapes")
    ap.add_argument("--queries", type=int, default=100, help="queries per shape and size (at least 50)")
    ap.add_argument("--warmup", type=int, default=200, help="warm-up queries (distinct from the measured ones) before the graph ways' second pass; 0: one pass")
    ap.add_argument("--dim", type=int, default=384, help="embedding dimension (locomo: MiniLM's 384)")
    ap.add_argument("--ways", nargs="+", default=["graph", "exact"], choices=("graph", "narrow", "exact", "faiss", "hnswlib"),
                    help="graph as the store chooses, narrow: one look at the graph (no widening), exact: graph off; faiss, hnswlib: the peer at the store graph's lookup recall")
    ap.add_argument("--set", dest="knobs", nargs="*", default=[], help="module constants for an experiment, e.g. sqlite.OVERSAMPLE=8")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--json", action="store_true", help="print the rows as JSON")
    ap.add_argument("--keep", type=Path, default=None, help="a folder to keep the built stores in (one per shape, size, seed and dim) and reuse them on a later run; default: a temporary folder, removed")
    a = ap.parse_args()
    if a.queries < 50: ap.error("--queries: at least 50")
    if a.warmup < 0: ap.error("--warmup: expected 0 or more queries")
    apply_knobs(a.knobs)
    log = lambda m: print(m, file=sys.stderr, flush=True)
    rows, load = [], [round(x, 2) for x in os.getloadavg()]
    for n in a.sizes:
        for shape in a.shapes:
            rng = np.random.default_rng([a.seed, n, SHAPES.index(shape)])
            wrng = np.random.default_rng([a.seed, n, SHAPES.index(shape), 1])  # the warm-up's own: the measured queries stay as before
            if shape == "locomo": V, Q, W = locomo_shape(n, a.queries, rng, a.warmup, wrng)
            else:
                V = vectors(shape, n, a.dim, rng)
                picks = rng.choice(n, a.queries, replace=False)
                Q = unit(V[picks] + QUERY_NOISE[shape] * rng.standard_normal((a.queries, a.dim)) / np.sqrt(a.dim))
                wp = wrng.choice(np.setdiff1d(np.arange(n), picks), a.warmup, replace=False)  # near other memories than the measured
                W = unit(V[wp] + QUERY_NOISE[shape] * wrng.standard_normal((a.warmup, a.dim)) / np.sqrt(a.dim))
            with kept(a.keep, f"{shape}-{n}-seed{a.seed}-dim{a.dim if shape != 'locomo' else 384}") as tmp:
                secs, target = stored(Path(tmp) / "s", V, shape, n, log), 0.95
                for way in a.ways:
                    log(f"{shape} {n:,}: searching ({way})")
                    if way in ("faiss", "hnswlib"): r = peer(way, Path(tmp), V, Q, target)
                    else: r = [{**x, "build_s": round(secs, 1)} for x in measure(Path(tmp) / "s", V, Q, way, W=W)]
                    if way == "graph": target = r[0]["lookup@10"]
                    for x in r if isinstance(r, list) else [r]: rows.append({"shape": shape, "memories": n, "way": way, **x}); log(f"  {rows[-1]}")
    load = {"before": load, "after": [round(x, 2) for x in os.getloadavg()]}
    if a.json: print(json.dumps({"knobs": a.knobs, "queries": a.queries, "warmup": a.warmup, "dim": a.dim, "load": load, "rows": rows})); return
    print(f"queries {a.queries}, warm-up {a.warmup}, dim {a.dim}, knobs {a.knobs or 'none'}, load average {load['before']} → {load['after']}")
    print(f"{'shape':12} {'memories':>9} {'way':7} {'pass':7} {'guard est':>16} {'same@10':>7} {'search@10':>9} {'p50 ms':>7} {'p95 ms':>7} {'lookup@10':>9} {'p50 ms':>7} {'p95 ms':>7} {'build s':>8}")
    gs = lambda r: ("lists " if r.get("lists") else "") + (r.get("guard") or "–") + (" %.2f" % r["guard_estimate"] if r.get("guard_estimate") is not None else "")
    f = lambda r, key, w, d=3: f"{r[key]:>{w}.{d}f}" if key in r else f"{'–':>{w}}"
    for r in rows:
        way = r["way"] + (f" ef {r['ef']}" if "ef" in r else "")
        print(f"{r['shape']:12} {r['memories']:>9,} {way:7} {r.get('pass', ''):7} {gs(r):>16} {f(r, 'same@10', 7)} {f(r, 'search@10', 9)} {f(r, 'p50_ms', 7, 2)} {f(r, 'p95_ms', 7, 2)} "
              f"{f(r, 'lookup@10', 9)} {f(r, 'lookup_p50_ms', 7, 2)} {f(r, 'lookup_p95_ms', 7, 2)} {f(r, 'build_s', 8, 1)}")


if __name__ == "__main__":
    main()
