"""Where the wall time of one `earmem memory search` goes, stage by stage, in a fresh process.

    python tools/search_timing.py STORE "a query never asked before" [--runs 3]

Each run is a new Python process that times: interpreter start, `import earmem.commands`, opening the store,
importing torch, importing sentence_transformers, loading the model, encoding the query, and the search itself.
Prints one line per stage with the median over runs (seconds)."""
import argparse, json, statistics, subprocess, sys, time

CHILD = r'''
import json, sys, time
t = {"start": time.perf_counter()}
import earmem.commands
t["import earmem.commands"] = time.perf_counter()
from earmem.memory.store.operations import MemoryStore
s = MemoryStore(sys.argv[1], readonly=True)
t["open store"] = time.perf_counter()
import torch
t["import torch"] = time.perf_counter()
import sentence_transformers
t["import sentence_transformers"] = time.perf_counter()
enc = s.encoder
enc._load()
t["load model"] = time.perf_counter()
enc.cache = None                         # the query must really be encoded
q = enc.encode_queries([sys.argv[2]])
t["encode query"] = time.perf_counter()
s.search(sys.argv[2], k=5)
t["search (query now cached)"] = time.perf_counter()
print(json.dumps(t))
'''

def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("store"); p.add_argument("query"); p.add_argument("--runs", type=int, default=3)
    a = p.parse_args()
    rows = []
    for _ in range(a.runs):
        t0 = time.perf_counter()
        out = subprocess.run([sys.executable, "-c", "import time; print(time.perf_counter())"], capture_output=True, text=True)
        start = time.perf_counter() - t0
        r = subprocess.run([sys.executable, "-c", CHILD, a.store, a.query], capture_output=True, text=True, check=True)
        t = json.loads(r.stdout.strip().splitlines()[-1])
        names = list(t); stages = {"python start (python -c, empty)": start}
        stages.update({n: t[n] - t[p] for p, n in zip(names, names[1:])})
        rows.append(stages)
    for name in rows[0]:
        print(f"{name:<36}{statistics.median(r[name] for r in rows):7.2f} s")
    print(f"{'total (median of sums)':<36}{statistics.median(sum(r.values()) for r in rows):7.2f} s   ({a.runs} runs)")

if __name__ == "__main__": main()
