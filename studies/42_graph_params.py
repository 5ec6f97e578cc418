"""Issue 42 experiment: does a denser graph lift the saturation of 1M tight clusters near 0.95? Builds a usearch graph (bf16, inner product,
CONNECTIVITY and EXPANSION_ADD given) over the vectors of a store kept by `42_recall_shapes.py --keep`, two threads, nothing saved; then for 100
queries drawn as the study's (0.05 off a stored memory) the recall@10 / @20 of the exact top 20 of the graph's 80 nearest (what the guard checks)
at lists of 488 to 3,904, and one search's p50.

    nice -n 10 python studies/42_graph_params.py CONNECTIVITY EXPANSION_ADD [STORE]   (STORE: default /work/cache42/tight-1000000-seed42-dim384/s)
"""
import sys, time, numpy as np, importlib
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent)); m = importlib.import_module("42_recall_shapes")
from usearch.index import Index
from earmem.memory.store import MemoryStore
from earmem.memory.rules.hygiene import HashingEncoder, StoreConfig
from earmem.memory.index.graph import head_recall
if len(sys.argv) < 3 or not all(a.isdigit() for a in sys.argv[1:3]): sys.exit(__doc__)
M, EF = int(sys.argv[1]), int(sys.argv[2])
s = MemoryStore(sys.argv[3] if len(sys.argv) > 3 else "/work/cache42/tight-1000000-seed42-dim384/s", encoder=HashingEncoder(384), config=StoreConfig(min_relevance=-1.0)); b = s._backend
n = b.index.n; F = np.asarray(b.index.E[:n], np.float32); s.close()
g = Index(ndim=384, metric="ip", dtype="bf16", connectivity=M, expansion_add=EF)
t0 = time.perf_counter()
for i in range(0, n, 100_000):
    g.add(np.arange(i, min(n, i + 100_000), dtype=np.int64), F[i:i + 100_000], threads=2)
    print(f"added {min(n, i + 100_000):,} ({time.perf_counter() - t0:.0f} s)", flush=True)
rng = np.random.default_rng(5); picks = rng.choice(n, 100, replace=False)
Q = m.unit(F[picks] + 0.05 * rng.standard_normal((100, 384)) / np.sqrt(384))
ex = [np.sort(F @ q)[-20:][::-1] for q in Q]
for ef in (488, 976, 1952, 3904):
    r10, r20, ts = [], [], []
    for q, e in zip(Q, ex):
        g.expansion_search = ef
        t1 = time.perf_counter(); keys = np.asarray(g.search(q, 120, threads=1).keys, np.int64)[:80]; ts.append(time.perf_counter() - t1)
        c = np.sort(F[keys] @ q)[-20:][::-1]
        r10.append(head_recall(c, e, 10)); r20.append(head_recall(c, e, 20))
    print(f"M {M} ef_add {EF}: list {ef}: recall@10 {np.mean(r10):.3f} recall@20 {np.mean(r20):.3f}  one search p50 {1000*np.median(ts):.2f} ms", flush=True)
