"""Issue 36: what the change order (22a newer_on_topic) costs a search in its worst case: N near-duplicate memories (the 42 study's `tight` shape), each newer than the last; 200 searches after 100 warm-up ones, p50 and a profile.

    python studies/36_change_order_cost.py 100000 off|on
"""
import sys, cProfile, pstats, tempfile, numpy as np, importlib, time
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent))
m = importlib.import_module("42_recall_shapes")
from earmem.memory.store import MemoryStore
from earmem.memory.rules.hygiene import HashingEncoder, StoreConfig
import argparse, json
ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("memories", type=int, help="how many near-duplicate memories (e.g. 100000)")
ap.add_argument("way", choices=("off", "on"), help="the change order off (change_similarity None) or on (0.3)")
ap.add_argument("--json", action="store_true", help="print {memories, way, p50_ms} as JSON instead of the profile")
a = ap.parse_args()
n = a.memories; rng = np.random.default_rng(0)
V = m.vectors("tight", n, 384, rng)
d = Path(tempfile.mkdtemp()) / "s"
m.build(d, V, log=lambda *a: None)
s = MemoryStore(d, encoder=HashingEncoder(384), config=StoreConfig(min_relevance=-1.0, change_similarity=(None if a.way == "off" else 0.3)))
Q = m.unit(V[rng.integers(0, n, 300)] + 0.05 * m.unit(rng.standard_normal((300, 384))))
for q in Q[:100]: s.search(q, k=10, min_relevance=-1)   # calibrate
ts = []
pr = cProfile.Profile(); pr.enable()
for q in Q[100:]:
    t = time.perf_counter(); s.search(q, k=10, min_relevance=-1); ts.append(time.perf_counter() - t)
pr.disable()
if a.json: print(json.dumps({"memories": n, "way": a.way, "p50_ms": round(1000 * float(np.median(ts)), 2)}))
else:
    print("p50 ms", 1000 * np.median(ts))
    pstats.Stats(pr).sort_stats("tottime").print_stats(18)
