"""What a writer and the searches right after it wait for when a batch lands in a big embedded store, with the graph's
background linker on and off (chapter 20b): one store of N synthetic memories (chapter 26's clustered vectors, encoding
excluded), then rounds of `add_many` of B new memories, each followed by 20 searches and a close.

    python studies/26_linker_wait.py [--memories 100000] [--batch 10000] [--rounds 2] [--slice 0.02] [--json]

Each round adds memories no earlier round added, so every round inserts B new rows into a store about as big.
"""
import argparse, json, tempfile, time
from pathlib import Path
import numpy as np
from earmem.memory.measure.bench import synthetic_vectors
from earmem.memory.rules.hygiene import KINDS, HashingEncoder, StoreConfig
from earmem.memory.backends import sqlite
from earmem.memory.backends.sqlite import SQLiteBackend
from earmem.memory.store import MemoryStore


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--memories", type=int, default=100_000, help="memories in the store before the timed rounds")
    ap.add_argument("--batch", type=int, default=10_000, help="memories one timed add_many writes")
    ap.add_argument("--rounds", type=int, default=2, help="timed rounds per setting (linker off, then on, alternating)")
    ap.add_argument("--slice", type=float, default=None, help="seconds the linker holds the graph at a time (default: LINK_SLICE, 0.02; 100 behaves as the 1,024-vector chunks before it)")
    ap.add_argument("--json", action="store_true", help="print the rounds as JSON")
    a = ap.parse_args()
    if a.slice is not None: sqlite.LINK_SLICE = a.slice
    dim, kinds, rng = 384, list(KINDS), np.random.default_rng(0)
    settings = [bg for _ in range(a.rounds) for bg in (False, True)]
    E = synthetic_vectors(a.memories + len(settings) * a.batch, dim, rng, synthetic_vectors(1000, dim, rng))
    items = lambda i0, m: [{"text": f"memory {i0 + j}", "kind": kinds[(i0 + j) % 7], "entities": [f"entity{(i0 + j) % 500}"],
                            "timestamp": 1.7e9 + i0 + j} for j in range(m)]
    folder = Path(tempfile.mkdtemp()) / "store"
    opened = lambda: MemoryStore(folder, encoder=HashingEncoder(dim), config=StoreConfig(min_relevance=-1.0))
    s = opened()
    for i0 in range(0, a.memories, a.batch): s.add_many(items(i0, min(a.batch, a.memories - i0)), embeddings=E[i0:i0 + a.batch][:a.memories - i0])
    s.close()
    out, default = [], SQLiteBackend.link_in_background
    try:
        for r, bg in enumerate(settings):
            SQLiteBackend.link_in_background = bg
            s = opened(); s.search(E[0], k=10)  # the graph open, as in a running agent
            i0 = a.memories + r * a.batch
            t0 = time.perf_counter(); s.add_many(items(i0, a.batch), embeddings=E[i0:i0 + a.batch]); t_add = time.perf_counter() - t0
            ms = []
            for q in E[i0:i0 + 20]:
                t0 = time.perf_counter(); s.search(q, k=10); ms.append(1000 * (time.perf_counter() - t0))
            t0 = time.perf_counter(); s.close(); t_close = time.perf_counter() - t0
            out.append({"background": bg, "add_s": round(t_add, 2), "first_search_ms": round(ms[0], 1),
                        "next_19_median_ms": round(float(np.median(ms[1:])), 1), "next_19_max_ms": round(max(ms[1:]), 1), "close_s": round(t_close, 2)})
            if not a.json:
                o = out[-1]
                print(f"linker {'on ' if bg else 'off'}: add_many({a.batch:,}) into {i0:,}: {o['add_s']:.2f} s; first search {o['first_search_ms']} ms, "
                      f"next 19 median {o['next_19_median_ms']} ms (max {o['next_19_max_ms']}); close {o['close_s']:.2f} s", flush=True)
    finally: SQLiteBackend.link_in_background = default
    if a.json: print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
