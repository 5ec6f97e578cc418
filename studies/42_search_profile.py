"""Issue 42: where a `search(q, k=10)` spends its time on a store kept by `42_recall_shapes.py --keep DIR`: p50 of the
whole search and of the backend's lookup (`candidates`) without a profiler, then cProfile over the same queries (graph
way: as the store chooses, after `--warmup` searches so the recall guard has settled; exact way: graph off).

    nice -n 10 python studies/42_search_profile.py /work/cache42/tight-1000000-seed42-dim384 [--shape tight] [--queries 100] [--warmup 200] [--ways graph exact] [--top 25]
"""
import argparse, cProfile, importlib, pstats, sys, time
from pathlib import Path
import numpy as np
sys.path.insert(0, str(Path(__file__).resolve().parent))
m = importlib.import_module("42_recall_shapes")
from earmem.memory.store import MemoryStore
from earmem.memory.rules.hygiene import HashingEncoder, StoreConfig
from earmem.memory.index.graph import GUARD_FILE

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("kept", type=Path, help="a folder 42_recall_shapes.py --keep made (holding s/ and built.json)")
ap.add_argument("--shape", default="tight", choices=[s for s in m.SHAPES if s != "locomo"], help="the shape the store was built with (its queries are drawn like the study's)")
ap.add_argument("--queries", type=int, default=100, help="profiled queries")
ap.add_argument("--warmup", type=int, default=200, help="searches before, so the recall guard settles")
ap.add_argument("--ways", nargs="+", default=["graph", "exact"], choices=("graph", "exact"))
ap.add_argument("--top", type=int, default=25, help="rows of the profile printed")
ap.add_argument("--seed", type=int, default=7)
ap.add_argument("--lines", action="store_true", help="also time search()'s path line by line (needs line_profiler)")
a = ap.parse_args()
folder = a.kept / "s"
if not folder.exists(): ap.error(f"kept: expected a folder holding s/ (a kept store), got {a.kept}")
(folder / GUARD_FILE).unlink(missing_ok=True)
s = MemoryStore(folder, encoder=HashingEncoder(384), config=StoreConfig(min_relevance=-1.0))
b = s._backend; n, dim = b.index.n, b.index.dim
rng = np.random.default_rng(a.seed)
E = b.index.E
picks = rng.choice(n, a.warmup + a.queries, replace=False)
Q = m.unit(np.asarray(E[picks], np.float32) + m.QUERY_NOISE[a.shape] * rng.standard_normal((len(picks), dim)) / np.sqrt(dim))
on = b.approx_min_rows
for way in a.ways:
    b.approx_min_rows = on if way == "graph" else None
    for q in Q[:a.warmup]: s.search(q, k=10, min_relevance=-1)
    ts, tl = [], []
    for q in Q[a.warmup:]:
        t0 = time.perf_counter(); s.search(q, k=10, min_relevance=-1); ts.append(time.perf_counter() - t0)
        g = b.ann.guard if b.ann is not None else None
        if g is not None: g.due = lambda: False   # the lookup is not one of the guard's checks
        t0 = time.perf_counter(); b.candidates(q, 20); tl.append(time.perf_counter() - t0)
        if g is not None: del g.due
    g = b.ann.guard if b.ann is not None else None
    print(f"== {way}: {n:,} memories, search() p50 {1000 * np.median(ts):.2f} ms, candidates(q, 20) p50 {1000 * np.median(tl):.2f} ms"
          + (f", guard x{g.factor} exact={g.exact} est={g.estimate}" if g is not None and way == "graph" else ""))
    pr = cProfile.Profile(); pr.enable()
    for q in Q[a.warmup:]: s.search(q, k=10, min_relevance=-1)
    pr.disable()
    pstats.Stats(pr).sort_stats("tottime").print_stats(a.top)
    pstats.Stats(pr).sort_stats("cumulative").print_stats(a.top)
    if a.lines:
        from line_profiler import LineProfiler
        import earmem.memory.store.operations as ops, earmem.memory.backends.sqlite as sq, earmem.memory.index.mirror as mi
        lp = LineProfiler(ops.MemoryStore.search, type(b).shortlist, type(b)._graph_rows, type(b)._use_graph, mi._Index.candidates, mi._Index._scan, mi._Index.mask, mi.top_refined, mi._Index.approx_scores)
        lp.enable_by_count()
        for q in Q[a.warmup:]: s.search(q, k=10, min_relevance=-1)
        lp.disable_by_count(); lp.print_stats(output_unit=1e-3, stripzeros=True)
s.close()
