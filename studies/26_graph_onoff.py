"""LoCoMo through the embedded store with its graph forced off, then on (issue 22: the approximate index must not change
what is found at these sizes). One store per conversation, its turns added with `add_many` and its scorable questions
asked with `search(text, k=5)`, the store's default encoder (the bundled MiniLM) unless `--encoder hashing`.

    python studies/26_graph_onoff.py [--encoder minilm|hashing] [--banks conv-26 ...] [--json]

Prints Recall@5 with the graph off and on, the identical top-5 lists and the mean top-5 overlap."""
import argparse, json, tempfile
from pathlib import Path
import numpy as np
from earmem.experiments.data import load_locomo
from earmem.memory.rules.hygiene import HashingEncoder, StoreConfig
from earmem.memory.store import MemoryStore


def force(store: MemoryStore, on: bool):
    "Searches go through the graph at any size (on) or never (off)."
    store._backend.approx_min_rows, store._backend.prefilter_rows = (0, 0) if on else (None, 0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--encoder", choices=("minilm", "hashing"), default="minilm", help="the store's default (minilm) or the hashing encoder (fast)")
    ap.add_argument("--banks", nargs="*", help="conversations to run (default: all ten)")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    a = ap.parse_args()
    bench = load_locomo()
    banks = a.banks or sorted({m["bank"] for m in bench.memories})
    enc = HashingEncoder(384) if a.encoder == "hashing" else None
    runs = {"off": [], "on": []}; gold = []
    with tempfile.TemporaryDirectory() as tmp:
        for bank in banks:
            mems = [m for m in bench.memories if m["bank"] == bank and m["kind"] == "turn"]
            qs = [q for q in bench.queries if q["bank"] == bank and q["scorable"]]
            kw = {"encoder": enc} if enc is not None else {}
            s = MemoryStore(Path(tmp) / bank, config=StoreConfig(min_relevance=-1.0), **kw)
            s.add_many([{"text": m["text"], "kind": "episode", "id": m["id"].replace(":", "-")} for m in mems])
            gold += [{g.replace(":", "-") for g in q["gold"]} for q in qs]
            for way in ("off", "on"):
                force(s, way == "on")
                runs[way] += [[h.id for h in s.search(q["text"], k=5)] for q in qs]
            assert s._backend.ann is not None, "the graph was not used"
            n = s._backend.active_count(); s.close()
            if not a.json: print(f"{bank}: {len(mems)} turns ({n} memories after dedupe), {len(qs)} questions", flush=True)
    rec = {w: float(np.mean([len(g & set(h)) / len(g) for g, h in zip(gold, runs[w])])) for w in runs}
    out = {"encoder": a.encoder, "banks": len(banks), "questions": len(gold), "recall@5_off": round(100 * rec["off"], 2),
           "recall@5_on": round(100 * rec["on"], 2), "identical_top5": sum(x == y for x, y in zip(runs["off"], runs["on"])),
           "mean_top5_overlap": round(float(np.mean([len(set(x) & set(y)) / 5 for x, y in zip(runs["off"], runs["on"])])), 4)}
    print(json.dumps(out) if a.json else
          f"Recall@5 graph off {out['recall@5_off']:.2f}, on {out['recall@5_on']:.2f}; identical top-5 lists "
          f"{out['identical_top5']}/{out['questions']}, mean top-5 overlap {out['mean_top5_overlap']:.4f}")


if __name__ == "__main__":
    main()
