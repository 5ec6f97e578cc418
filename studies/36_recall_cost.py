"""Issue 36: what a search pays for chapter 22a's `recall_order` (a change under the floor added beside the claim it changes;
a reply that says nothing below its user turn), in a bad case for it: N chat turns (user statements, every other one saying a change,
assistant replies that say nothing, in one session), all different texts so the claim-frame cache (8,192 texts) misses, each
newer than the last; a raised floor (--floor, 0.35), so about half the K candidates are under it, each a candidate to add;
half the questions ask where an office is (in the plain statements' words), half repeat a congratulation (so replies that say nothing lead and move).
200 searches after 100 warm-up ones (HashingEncoder(384), no model), p50 and p90 of the wall time.

    python studies/36_recall_cost.py 20000 off|on [--k 3] [--floor 0.35] [--json]
"""
import argparse, json, sys, tempfile, time
from pathlib import Path
import numpy as np
from earmem.memory.store import MemoryStore
from earmem.memory.rules.hygiene import HashingEncoder, StoreConfig

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("turns", type=int, help="how many chat turns (half user statements, half assistant replies), e.g. 20000")
ap.add_argument("way", choices=("off", "on"), help="recall_order off (change_recall None, replies_after_turns None) or on (the defaults)")
ap.add_argument("--k", type=int, default=3, help="hits per search (default 3)")
ap.add_argument("--floor", type=float, default=0.35, help="the searches' min_relevance (default 0.35: about half the candidates under it)")
ap.add_argument("--json", action="store_true", help="print {turns, way, k, p50_ms, p90_ms} as JSON")
a = ap.parse_args()
CITIES = "Leeds Paris Berlin Denver Lisbon Porto Oslo Lagos Quito Perth Austin Kyoto".split()
rng = np.random.default_rng(0)
cfg = StoreConfig() if a.way == "on" else StoreConfig(change_recall=None, replies_after_turns=None)
with tempfile.TemporaryDirectory() as d:
    s = MemoryStore(Path(d) / "s", encoder=HashingEncoder(384), config=cfg)
    msgs = []
    for i in range(a.turns // 2):
        c = CITIES[i % len(CITIES)]
        said = f"Update {i}: we moved the office {i % 97} to {c} now, not the old place {i % 89}." if i % 2 else f"Note {i}: the office {i % 97} is in {c}, by the old place {i % 89}."
        msgs += [{"role": "user", "content": said},
                 {"role": "assistant", "content": "Got it, noted." if i % 2 else f"Congratulations on {c}!"}]
    for j in range(0, len(msgs), 1000): s.add_messages(msgs[j:j + 1000], session="one", timestamp=1.7e9 + j, extract=False)
    qs = [f"Which place is the office {int(x)} in, by the old place?" if x % 2 else f"Congratulations on {CITIES[int(x) % len(CITIES)]}!" for x in rng.integers(0, 97, 300)]
    for q in qs[:100]: s.search(q, k=a.k, min_relevance=a.floor)
    ts = []
    for q in qs[100:]:
        t = time.perf_counter(); s.search(q, k=a.k, min_relevance=a.floor); ts.append(time.perf_counter() - t)
    s.close()
out = {"turns": a.turns, "way": a.way, "k": a.k, "p50_ms": round(1000 * float(np.median(ts)), 2), "p90_ms": round(1000 * float(np.quantile(ts, 0.9)), 2)}
print(json.dumps(out) if a.json else f"{out['turns']} turns, {a.way}, k {a.k}: p50 {out['p50_ms']} ms, p90 {out['p90_ms']} ms")
