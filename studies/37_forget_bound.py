"""How long forgetting holds a request, on a store with a long feedback log and on a large store (issue 37).

`delete` of a memory that the feedback log names erases those rows and rebuilds the learner from what remains. The
rebuild replays at most `replay_budget` seconds of the log inside the call (chapter 22's `_catch_up`); each later
search replays another budget's worth, ranking frozen until the learner has caught up. This study builds a store
through the public API (`add_many`, then `search` + `feedback` N times, the model-free test encoder so it measures the
store, not the encoder), deletes the memory cited last, and reports the delete's time, the searches it took to catch up
(and the slowest of them), the time to reopen the store, and whether the learner then equals one rebuilt in one go
(`replay_budget=None`). `--clear N` also times `clear()` of a store of N memories.

    nice -n 10 python studies/37_forget_bound.py [--feedback 5000] [--dim 64] [--clear 100000] [--json]
"""
import argparse, json, random, sys, tempfile, time, warnings
import numpy as np
from earmem.memory.store import MemoryStore
from earmem.memory.rules.hygiene import HashingEncoder, StoreConfig


def log_store(folder, n_feedback: int, dim: int, log) -> str:
    "A store of 500 notes with `n_feedback` search + feedback calls; returns the id cited last."
    s = MemoryStore(folder, encoder=HashingEncoder(dim), config=StoreConfig(checkpoint_every=100))
    s.add_many([{"text": f"note {i} about topic {i % 37} and thing {i * 7 % 101}", "kind": "fact", "entities": [f"e{i}"]} for i in range(500)])
    rng, t0, cited = random.Random(0), time.perf_counter(), None
    for j in range(n_feedback):
        h = s.search(f"topic {rng.randrange(37)} thing {rng.randrange(101)}", k=5)
        if len(h): s.feedback(h, cited=[h[0].id]); cited = h[0].id
        if (j + 1) % 1000 == 0: log(f"  {j + 1:,}/{n_feedback:,} feedback calls ({time.perf_counter() - t0:.0f} s)")
    s.close()
    return cited


def forget(folder, named: str) -> dict:
    "Delete `named` on the store in `folder`, then search until the learner has caught up; times of each step."
    s = MemoryStore(folder)
    rows = s._backend.last_feedback()
    t0 = time.perf_counter(); s.delete(named); delete_s = time.perf_counter() - t0
    searches = []
    while s._behind:
        t0 = time.perf_counter(); s.search("topic 3 thing 5", k=5); searches.append(time.perf_counter() - t0)
    probe = s.search("topic 3 thing 5", k=10)
    s.close()
    t0 = time.perf_counter(); r = MemoryStore(folder); reopen_s = time.perf_counter() - t0
    same = [h.id for h in r.search("topic 3 thing 5", k=10)] == [h.id for h in probe]
    r.close()
    return {"feedback_rows": rows, "delete_s": round(delete_s, 2), "catch_up_searches": len(searches),
            "slowest_search_s": round(max(searches, default=0.0), 2), "reopen_s": round(reopen_s, 2), "reopened_same_top10": same}


def clear_time(n: int, dim: int, log) -> dict:
    "Time `clear()` on a store of `n` memories added through `add_many`."
    with tempfile.TemporaryDirectory() as d:
        s = MemoryStore(d, encoder=HashingEncoder(dim))
        rng = np.random.default_rng(0)
        for i in range(0, n, 10_000):
            m = min(n, i + 10_000); V = rng.standard_normal((m - i, dim)).astype(np.float32)
            s.add_many([{"text": f"memory {k}", "kind": "fact", "entities": [f"e{k}"]} for k in range(i, m)], embeddings=V / np.linalg.norm(V, axis=1, keepdims=True))
            log(f"  added {m:,}/{n:,}")
        t0 = time.perf_counter(); out = s.clear(); dt = time.perf_counter() - t0
        s.close()
    return {"memories": n, "deleted": out["deleted"], "clear_s": round(dt, 2)}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--feedback", type=int, default=5000, help="feedback calls in the log (default 5000)")
    ap.add_argument("--dim", type=int, default=64, help="embedding dimension (default 64)")
    ap.add_argument("--clear", type=int, default=0, help="also time clear() of a store of this many memories (0: skip)")
    ap.add_argument("--json", action="store_true", help="print the results as JSON")
    a = ap.parse_args(argv)
    log = lambda m: print(m, file=sys.stderr, flush=True)
    warnings.simplefilter("ignore")
    out = {}
    with tempfile.TemporaryDirectory() as d:
        log(f"building a store with {a.feedback:,} feedback calls …")
        named = log_store(d, a.feedback, a.dim, log)
        out["delete"] = forget(d, named)
    if a.clear: log(f"building a store of {a.clear:,} memories …"); out["clear"] = clear_time(a.clear, a.dim, log)
    if a.json: print(json.dumps(out, indent=1)); return
    for k, v in out.items(): print(f"{k}: " + ", ".join(f"{x} {y}" for x, y in v.items()))


if __name__ == "__main__": main()
