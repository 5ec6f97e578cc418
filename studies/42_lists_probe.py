"""Issue 42: how many inverted lists a search reads (chapter 19ab's `PROBE`), chosen on LoCoMo's shape at 1M.

Opens a store kept by `42_recall_shapes.py --keep DIR` whose graph its guard has given up (LoCoMo's shape at 1M: run that
study once with `--ways graph`), lets the lists be built and calibrated on the warm-up queries, then asks the measured
queries through `search(q, k=10)` with each `PROBE` in turn, alternating, `--reps` times: recall@10 against an exact scan
of the same vectors, p50 and p95 ms. The lists' guard is held at x1 (no checks) so that each row measures one `PROBE`.

    EARMEM_DATA=… nice -n 5 python studies/42_lists_probe.py --keep DIR [--probes 8 16 32] [--reps 3]
"""
import argparse, importlib.util, os, time
from pathlib import Path
import numpy as np

spec = importlib.util.spec_from_file_location("shapes", Path(__file__).with_name("42_recall_shapes.py"))
shapes = importlib.util.module_from_spec(spec); spec.loader.exec_module(shapes)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--keep", type=Path, required=True, help="the folder given to 42_recall_shapes.py --keep")
    ap.add_argument("--size", type=int, default=1_000_000)
    ap.add_argument("--probes", type=int, nargs="+", default=[8, 16, 32])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--seed", type=int, default=42)
    a = ap.parse_args()
    from earmem.memory.index import lists
    from earmem.memory.store import MemoryStore
    from earmem.memory.rules.hygiene import HashingEncoder, StoreConfig
    n, i = a.size, shapes.SHAPES.index("locomo")
    folder = a.keep / f"locomo-{n}-seed{a.seed}-dim384" / "s"
    if not folder.exists(): ap.error(f"--keep: no store at {folder}; build it with 42_recall_shapes.py --sizes {n} --shapes locomo --keep {a.keep}")
    V, Q, W = shapes.locomo_shape(n, a.queries, np.random.default_rng([a.seed, n, i]), 200, np.random.default_rng([a.seed, n, i, 1]))
    E = shapes.round_f16(V); del V
    S = Q @ E.T; kth = -np.partition(-S, 9, axis=1)[:, 9]; del E
    lists.LISTS_BACKGROUND = False
    s = MemoryStore(folder, encoder=HashingEncoder(384), config=StoreConfig(min_relevance=-1.0))
    b = s._backend
    t0 = time.perf_counter(); s.search(Q[0], k=10, min_relevance=-1); built = time.perf_counter() - t0   # opens the graph and its guard's saved verdict (given up), so it builds the lists
    for q in W: s.search(q, k=10, min_relevance=-1)
    st = getattr(b.index, "_lists", None)
    if st is None or st.lists is None or not b.ann.guard.exact: ap.error("--keep: this store's graph is not given up (no inverted lists answer); run 42_recall_shapes.py --ways graph on it first")
    st.guard.factor, st.guard.due = 1, lambda: False
    print(f"# locomo {n:,}, {len(st.lists.C):,} lists (the first search, which built them, took {built:.1f} s), {a.queries} queries, load {os.getloadavg()[0]:.2f}")
    print(f"{'rep':>3} {'PROBE':>5} {'search@10':>9} {'p50 ms':>7} {'p95 ms':>7}")
    for rep in range(a.reps):
        for p in a.probes:
            lists.PROBE, ts, rec = p, [], []
            for q, srow, t in zip(Q, S, kth):
                t0 = time.perf_counter(); hits = s.search(q, k=10, min_relevance=-1); ts.append(time.perf_counter() - t0)
                ids = np.array([int(h.id[1:]) for h in hits], np.int64)
                rec.append(np.count_nonzero(srow[ids] >= t - 1e-6) / 10)
            print(f"{rep:>3} {p:>5} {np.mean(rec):>9.3f} {1e3 * np.median(ts):>7.2f} {1e3 * np.percentile(ts, 95):>7.2f}", flush=True)
    s.close()


if __name__ == "__main__":
    main()
