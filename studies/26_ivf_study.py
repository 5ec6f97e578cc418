"""Would an inverted-file index (IVF) meet issue 22's adds target where the store's HNSW graph cannot? A numpy prototype,
outside the store, on chapter 26's clustered unit vectors (encoding excluded): spherical k-means centroids trained on a
sample; each add is assigned to its nearest centroid, checked for a near-duplicate among the vectors already in that
list (the dedupe lookup the store's door needs) and appended there as int8; a search scores the centroids, scans the
`nprobe` nearest lists in int8, and rescores the best 40 exactly (as the store rescores its graph's short list).

    python studies/26_ivf_study.py [--memories 1000000] [--lists 1024] [--clusters 1000] [--queries 200] [--json]

Prints adds/s (assignment, dedupe lookup and append; no SQLite, no hygiene) and, per nprobe, the lookup p50/p95 and
recall@10 against the exact top 10. The bench's data has `--clusters` true centres: with as many lists as centres the
lists fall on the clusters, IVF's best case; run with other counts to see how that matters."""
import argparse, json, time
import numpy as np
from earmem.memory.measure.bench import _exact_top, synthetic_vectors


def train(S: np.ndarray, nlist: int, rng, iters: int = 8) -> np.ndarray:
    "Spherical k-means: `nlist` unit centroids of the sample `S`."
    C = S[rng.choice(len(S), nlist, replace=False)].copy()
    for _ in range(iters):
        a = np.argmax(S @ C.T, axis=1)
        acc = np.zeros_like(C); np.add.at(acc, a, S)
        nz = np.linalg.norm(acc, axis=1) > 0
        C[nz] = acc[nz] / np.linalg.norm(acc[nz], axis=1, keepdims=True)
    return C


def fill(E: np.ndarray, C: np.ndarray, batch: int = 10_000, thr: float = 0.95) -> tuple:
    "Add `E` in batches: (int8 lists, id lists, seconds, duplicates found)."
    nlist, dim = len(C), E.shape[1]
    lists, ids, dups = [np.zeros((0, dim), np.int8)] * nlist, [np.zeros(0, np.int64)] * nlist, 0
    t0 = time.perf_counter()
    for i0 in range(0, len(E), batch):
        V = E[i0:i0 + batch]; a = np.argmax(V @ C.T, axis=1)
        q8 = np.clip(np.rint(V * 127), -127, 127).astype(np.int8)
        order = np.argsort(a, kind="stable"); bounds = np.searchsorted(a[order], np.arange(nlist + 1))
        for j in np.flatnonzero(np.diff(bounds)):
            sl = order[bounds[j]:bounds[j + 1]]
            if len(lists[j]): dups += int(((V[sl] @ lists[j].T.astype(np.float32)) / 127 >= thr).any(axis=1).sum())
            lists[j] = np.concatenate([lists[j], q8[sl]]); ids[j] = np.concatenate([ids[j], i0 + sl])
    return lists, ids, time.perf_counter() - t0, dups


def search(q, C, lists, ids, E, nprobe: int, k: int = 10, short: int = 40) -> np.ndarray:
    "The exact top-k among the best `short` int8 scores of the `nprobe` nearest lists."
    top = np.argpartition(-(C @ q), nprobe)[:nprobe]
    cand, cid = np.concatenate([lists[j] for j in top]), np.concatenate([ids[j] for j in top])
    s = cand.astype(np.float32) @ q
    best = np.sort(cid[np.argpartition(-s, min(short, len(s)) - 1)[:short]])
    return best[np.argsort(-(E[best] @ q))[:k]]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--memories", type=int, default=1_000_000, help="vectors to add")
    ap.add_argument("--lists", type=int, default=1024, help="IVF lists (centroids)")
    ap.add_argument("--clusters", type=int, default=1000, help="true centres of the synthetic data (chapter 26: 1000)")
    ap.add_argument("--queries", type=int, default=200, help="timed queries")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    a = ap.parse_args()
    dim, rng = 384, np.random.default_rng(0)
    centers = synthetic_vectors(a.clusters, dim, rng)
    E, Q = synthetic_vectors(a.memories, dim, rng, centers), synthetic_vectors(a.queries, dim, rng, centers)
    t0 = time.perf_counter(); C = train(E[rng.choice(len(E), min(len(E), 40 * a.lists), replace=False)], a.lists, rng); t_train = time.perf_counter() - t0
    lists, ids, t_add, dups = fill(E, C)
    truth = _exact_top(E, Q, 10)
    out = {"memories": a.memories, "lists": a.lists, "clusters": a.clusters, "train_s": round(t_train, 1),
           "adds_per_s": round(a.memories / t_add), "duplicates_seen": dups, "nprobe": []}
    for nprobe in (1, 2, 4, 8, 16, 32):
        if nprobe > a.lists: break
        ts, rec = [], []
        for q, want in zip(Q, truth):
            t0 = time.perf_counter(); got = search(q, C, lists, ids, E, nprobe); ts.append(time.perf_counter() - t0)
            rec.append(len(set(got.tolist()) & set(want.tolist())) / 10)
        out["nprobe"].append({"nprobe": nprobe, "p50_ms": round(1000 * float(np.median(ts)), 2),
                              "p95_ms": round(1000 * float(np.percentile(ts, 95)), 2), "recall@10": round(float(np.mean(rec)), 3)})
    if a.json: print(json.dumps(out)); return
    print(f"{a.memories:,} vectors, {a.lists} lists, data around {a.clusters} centres: train {t_train:.1f} s (one time), "
          f"adds {out['adds_per_s']:,}/s (assign, dedupe lookup in the list, append)")
    for r in out["nprobe"]: print(f"  nprobe {r['nprobe']:3d}: p50 {r['p50_ms']:.2f} ms, p95 {r['p95_ms']:.2f} ms, recall@10 {r['recall@10']:.3f}")


if __name__ == "__main__":
    main()
