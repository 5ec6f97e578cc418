"""Recall@10 of the embedded store's `search()` against an exact scan, on data shaped as users' memories are (issue 42).

For each size and data shape: a store built through the public API (`MemoryStore(folder, encoder=HashingEncoder(dim))`,
`add_many(items, embeddings=V)` in batches, one entity per memory so the door merges nothing), closed and reopened;
then queries near stored memories asked as embeddings through `store.search(q, k=10, min_relevance=-1)`, with the
graph as the store chooses (`graph`), with one look at the graph (`narrow`: `WIDEN_MAX` 0, no widening) and forced off
(`exact`: `approx_min_rows=None`). Recall@10 counts a hit when its
exact cosine reaches the exact 10th best (ties — exact duplicates — count either way); p50/p95 are the search's wall
time in ms, encoding excluded (the queries are embeddings).

    nice -n 10 python studies/42_recall_shapes.py [--sizes 50000 100000] [--shapes tight bench dups uniform]
        [--queries 100] [--dim 384] [--ways graph narrow exact] [--set sqlite.OVERSAMPLE=8 ...] [--json]

Shapes: `tight` clusters of 200 memories (1,000 at 200k) of small spread (cosine ≈ 0.995 to their centre, as
near-duplicate memories are);
`bench` the bench's clusters (chapter 26: 1,000 centres, cosine ≈ 0.7 to them); `dups` exact and near duplicates
(each base vector stored 4 times: once as it is, once exactly again, twice with a tiny perturbation); `uniform` uniform
on the sphere. Progress goes to stderr; the table (or JSON) to stdout."""
import argparse, importlib, json, sys, tempfile, time
from pathlib import Path
import numpy as np
from earmem.memory.rules.hygiene import HashingEncoder, StoreConfig
from earmem.memory.store import MemoryStore
from earmem.memory.index.graph import round_f16

SHAPES = ("tight", "bench", "dups", "uniform")
QUERY_NOISE = {"tight": 0.05, "bench": 0.5, "dups": 0.02, "uniform": 0.5}  # a query's offset from its memory, in units of a random unit vector


def unit(X): return (X / np.linalg.norm(X, axis=-1, keepdims=True)).astype(np.float32)


def vectors(shape: str, n: int, dim: int, rng) -> np.ndarray:
    "`n` unit vectors of data shape `shape` (see the module's doc)."
    g = lambda m: rng.standard_normal((m, dim)) / np.sqrt(dim)
    if shape == "uniform": return unit(rng.standard_normal((n, dim)))
    if shape in ("tight", "bench"):
        c = max(1, n // 200) if shape == "tight" else 1000
        C = unit(rng.standard_normal((c, dim)))
        return unit(C[rng.integers(c, size=n)] + (0.1 if shape == "tight" else 1.0) * g(n))
    if shape == "dups":
        B = unit(rng.standard_normal((-(-n // 4), dim)))
        return unit(np.concatenate([B, B, B + 0.01 * g(len(B)), B + 0.01 * g(len(B))]))[rng.permutation(4 * len(B))[:n]]
    raise ValueError(f"shape: expected one of {SHAPES}, got {shape!r}")


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


def measure(folder: Path, V: np.ndarray, Q: np.ndarray, way: str, k: int = 10) -> dict:
    "Recall@k against the exact scan and p50/p95 ms of `search(q, k)` on the reopened store (`way` graph: as it chooses; exact: graph off)."
    import earmem.memory.backends.sqlite as sqlite
    s = MemoryStore(folder, encoder=HashingEncoder(V.shape[1]), config=StoreConfig(min_relevance=-1.0))
    if way == "exact": s._backend.approx_min_rows = None
    widen = getattr(sqlite, "WIDEN_MAX", None)
    if way == "narrow" and widen is not None: sqlite.WIDEN_MAX = 0  # one look at the graph: no widening
    E = round_f16(V)  # the vectors as the store keeps them
    s.search(Q[0], k=k, min_relevance=-1)  # opens (maps) the graph
    rec, ts = [], []
    for q in Q:
        t0 = time.perf_counter(); hits = s.search(q, k=k, min_relevance=-1); ts.append(time.perf_counter() - t0)
        exact = E @ q
        kth = np.partition(exact, len(exact) - k)[len(exact) - k]
        got = np.array([int(h.id[1:]) for h in hits], np.int64)
        rec.append(np.count_nonzero(exact[got] >= kth - 1e-6) / k)
    used = s._backend.ann is not None; s.close()
    if widen is not None: sqlite.WIDEN_MAX = widen
    return {"recall@10": round(float(np.mean(rec)), 4), "p50_ms": round(1000 * float(np.median(ts)), 2),
            "p95_ms": round(1000 * float(np.percentile(ts, 95)), 2), "graph_used": used}


def apply_knobs(knobs: list):
    "Set module constants for an experiment: 'sqlite.OVERSAMPLE=8' → earmem.memory.backends.sqlite.OVERSAMPLE = 8; 'graph.X' → earmem.memory.index.graph.X."
    where = {"sqlite": "earmem.memory.backends.sqlite", "graph": "earmem.memory.index.graph", "mirror": "earmem.memory.index.mirror"}
    for kv in knobs:
        name, _, value = kv.partition("=")
        mod, _, attr = name.partition(".")
        if mod not in where or not hasattr(m := importlib.import_module(where[mod]), attr):
            raise SystemExit(f"--set: unknown knob {name!r} (expected sqlite.NAME, graph.NAME or mirror.NAME of an existing constant)")
        setattr(m, attr, json.loads(value))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[50_000], help="store sizes (memories)")
    ap.add_argument("--shapes", nargs="+", default=list(SHAPES), choices=SHAPES, help="data shapes")
    ap.add_argument("--queries", type=int, default=100, help="queries per shape and size (at least 50)")
    ap.add_argument("--dim", type=int, default=384, help="embedding dimension")
    ap.add_argument("--ways", nargs="+", default=["graph", "exact"], choices=("graph", "narrow", "exact"), help="graph as the store chooses, narrow: one look at the graph (no widening), exact: graph off")
    ap.add_argument("--set", dest="knobs", nargs="*", default=[], help="module constants for an experiment, e.g. sqlite.OVERSAMPLE=8")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--json", action="store_true", help="print the rows as JSON")
    a = ap.parse_args()
    if a.queries < 50: ap.error("--queries: at least 50")
    apply_knobs(a.knobs)
    log = lambda m: print(m, file=sys.stderr, flush=True)
    rows = []
    for n in a.sizes:
        for shape in a.shapes:
            rng = np.random.default_rng([a.seed, n, SHAPES.index(shape)])
            V = vectors(shape, n, a.dim, rng)
            picks = rng.choice(n, a.queries, replace=False)
            Q = unit(V[picks] + QUERY_NOISE[shape] * rng.standard_normal((a.queries, a.dim)) / np.sqrt(a.dim))
            with tempfile.TemporaryDirectory() as tmp:
                log(f"{shape} {n:,}: building")
                secs = build(Path(tmp) / "s", V, log=log)
                for way in a.ways:
                    log(f"{shape} {n:,}: searching ({way})")
                    rows.append({"shape": shape, "memories": n, "way": way, **measure(Path(tmp) / "s", V, Q, way), "build_s": round(secs, 1)})
                    log(f"  {rows[-1]}")
    if a.json: print(json.dumps({"knobs": a.knobs, "queries": a.queries, "dim": a.dim, "rows": rows})); return
    print(f"queries {a.queries}, dim {a.dim}, knobs {a.knobs or 'none'}")
    print(f"{'shape':8} {'memories':>9} {'way':6} {'recall@10':>9} {'p50 ms':>7} {'p95 ms':>7} {'build s':>8} graph")
    for r in rows: print(f"{r['shape']:8} {r['memories']:>9,} {r['way']:6} {r['recall@10']:>9.3f} {r['p50_ms']:>7.2f} {r['p95_ms']:>7.2f} {r['build_s']:>8.1f} {'yes' if r['graph_used'] else 'no'}")


if __name__ == "__main__":
    main()
