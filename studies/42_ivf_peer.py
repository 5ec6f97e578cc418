"""Issue 42: FAISS's inverted file (IndexIVFFlat, inner product) on the data shapes of `42_recall_shapes.py`: recall@10
against an exact scan and lookup p50/p95 (one thread) at growing `nprobe`. Answers whether an inverted file reaches
recall 0.95 within 10 ms where the store's graph and FAISS-HNSW do not (LoCoMo's shape at 1M, uniform vectors).

    EARMEM_DATA=… python studies/42_ivf_peer.py --shape locomo --size 1000000 [--nlist 4096] [--queries 50]
"""
import argparse, importlib.util, os, sys, time
from pathlib import Path
import numpy as np

spec = importlib.util.spec_from_file_location("shapes", Path(__file__).with_name("42_recall_shapes.py"))
shapes = importlib.util.module_from_spec(spec); spec.loader.exec_module(shapes)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", default="locomo", choices=shapes.SHAPES)
    ap.add_argument("--size", type=int, default=1_000_000)
    ap.add_argument("--nlist", type=int, default=4096, help="inverted lists (k-means centroids)")
    ap.add_argument("--train", type=int, default=200_000, help="vectors the k-means is trained on")
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--nprobe", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32, 64, 128, 256, 512])
    a = ap.parse_args()
    import faiss
    faiss.omp_set_num_threads(2)
    n, shape, log = a.size, a.shape, lambda m: print(m, file=sys.stderr, flush=True)
    rng = np.random.default_rng([a.seed, n, shapes.SHAPES.index(shape)])
    if shape == "locomo": V, Q, _ = shapes.locomo_shape(n, a.queries, rng)
    else:
        V = shapes.vectors(shape, n, 384, rng)
        picks = rng.choice(n, a.queries, replace=False)
        Q = shapes.unit(V[picks] + shapes.QUERY_NOISE[shape] * rng.standard_normal((a.queries, 384)) / np.sqrt(384))
    E = shapes.round_f16(V)
    S = Q @ E.T; kth = -np.partition(-S, 9, axis=1)[:, 9]
    t0 = time.perf_counter()
    ix = faiss.IndexIVFFlat(faiss.IndexFlatIP(384), 384, a.nlist, faiss.METRIC_INNER_PRODUCT)
    ix.train(E[np.random.default_rng(0).choice(n, min(n, a.train), replace=False)]); ix.add(E)
    build = time.perf_counter() - t0
    log(f"built IVF{a.nlist} over {n:,} in {build:.0f} s")
    faiss.omp_set_num_threads(1)
    print(f"# {shape} {n:,}, IVF{a.nlist},Flat (train {min(n, a.train):,}), build {build:.0f} s (2 threads), lookups on 1 thread, load {os.getloadavg()[0]:.2f}")
    print(f"{'nprobe':>7} {'recall@10':>9} {'p50 ms':>7} {'p95 ms':>7}")
    for p in a.nprobe:
        ix.nprobe = p; ts, rec = [], []
        for q, srow, t in zip(Q, S, kth):
            t0 = time.perf_counter(); _, I = ix.search(q[None], 10); ts.append(time.perf_counter() - t0)
            rec.append(np.count_nonzero(srow[I[0][I[0] >= 0]] >= t - 1e-6) / 10)
        print(f"{p:>7} {np.mean(rec):>9.3f} {1e3 * np.median(ts):>7.2f} {1e3 * np.percentile(ts, 95):>7.2f}", flush=True)


if __name__ == "__main__":
    main()
