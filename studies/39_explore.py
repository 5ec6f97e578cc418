"""Issue 39: the Explorer in the store and the online learner's default, on LoCoMo's query split through the store's public API.

For each seed and each arm (exploration off / on) one store per conversation (its turns, MiniLM), the issue-19 protocol
of chapter 31a: frozen dev and test, then every training question searched with k = 5 — with `explore=True` in the
exploring arm — and the simulated critic (App. A.2, the paper's precision / recall) citing the gold among the shown hits,
`feedback(hits, cited)`; the shown hits' Recall@5 / Hit@5 during that stream (what exploring costs), the online store on dev
and test (searches without exploring), then pooled consolidation of the ten logs (`consolidate_shared`, chapter 31a's
`consolidate_stores`) and dev and test again (what exploring adds). Same critic seed and feedback budget in both arms.
Each finished run is appended to --json as it ends, so a partial run keeps what it measured.

    OMP_NUM_THREADS=1 nice -n 10 python studies/39_explore.py --seeds 0 1 2 [--arms off on] [--config '{"learner_gate": 20}'] [--no-consolidate] --json out.json
    python studies/39_explore.py --table out.json      # the table of what the file holds (mean ± std over its seeds)
"""
import argparse, json, sys, tempfile, time
from pathlib import Path
import numpy as np

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
ap.add_argument("--arms", nargs="+", default=["off", "on"], choices=["off", "on"])
ap.add_argument("--config", default="{}", help="StoreConfig overrides as JSON (default: the product's StoreConfig())")
ap.add_argument("--no-consolidate", action="store_true", help="stop after the online column")
ap.add_argument("--banks", nargs="*", help="only these conversations (a quick check)")
ap.add_argument("--json", help="append each run here (JSON lines)")
ap.add_argument("--table", help="print the table of the runs in this file and stop")
a = ap.parse_args()


def table(runs: list) -> str:
    "Recall@5 / Hit@5 per arm and part, mean ± std over the seeds each arm has."
    ms = lambda v: "{:5.1f} ± {:.1f}".format(float(np.mean(v)), float(np.std(v)))
    cell = lambda rs, w, p: f"{ms([r[w][p]['recall'] for r in rs])} / {ms([r[w][p]['hit'] for r in rs])}"
    out = [f"{'arm':<5}{'config':<24}{'seeds':<8}{'part':<7}{'frozen':<28}{'shown while learning':<28}{'online':<28}consolidated"]
    groups = {}
    for r in runs: groups.setdefault((r["arm"], json.dumps(r["config"], sort_keys=True)), []).append(r)
    for (arm, cfg), rs in groups.items():
        seeds = ",".join(str(r["seed"]) for r in rs)
        for p in ("dev", "test"):
            shown = cell(rs, "shown", "train") if p == "dev" else ""
            cons = cell(rs, "consolidated", p) if all("consolidated" in r for r in rs) else "-"
            out.append(f"{arm:<5}{cfg:<24}{seeds:<8}{p:<7}{cell(rs, 'frozen', p):<28}{shown:<28}{cell(rs, 'online', p):<28}{cons}")
    return "\n".join(out)


if a.table:
    print(table([json.loads(l) for l in open(a.table) if l.strip()])); sys.exit()

import torch
torch.set_num_threads(1)
from earmem.core import Encoder, hit_at_k, recall_at_k
from earmem.ear.critic import PAPER_PRECISION, PAPER_RECALL, CitationSimulator
from earmem.memory import StoreConfig
from earmem.cli.store_study import consolidate_stores, percent, score_store, study_benchmark, study_split, study_stores


def stream(store, questions, critic, explore: bool, k: int = 5) -> list:
    "Chapter 31a's teach_store through search(..., explore=): the critic cites the gold among the shown hits; (R@k, H@k) of each shown slate."
    shown = []
    for q in questions:
        hits = store.search(q.text, k=k, explore=explore)
        shown.append((recall_at_k(hits.ids, q.gold, k), hit_at_k(hits.ids, q.gold, k)))
        if not hits: continue
        labels = critic.simulate(np.array([h.id in q.gold for h in hits]))
        store.feedback(hits, cited=[h.id for h, y in zip(hits, labels) if y > 0])
    return shown


def run(bench, encoder, split, seed: int, arm: str, overrides: dict, consolidate: bool) -> dict:
    cfg = StoreConfig(**{"checkpoint_every": 10**9, **overrides, "seed": seed})   # checkpoints change no result
    critic = CitationSimulator(PAPER_PRECISION, PAPER_RECALL, seed=seed)
    banks = [b for b in bench.bank_ids if any(q.bank == b for qs in split.values() for q in qs)]
    ask = lambda stores, part: percent([s for b in banks for s in score_store(stores[b], [q for q in split[part] if q.bank == b])])
    t0, out = time.perf_counter(), {"seed": seed, "arm": arm, "config": overrides}
    with tempfile.TemporaryDirectory() as d:
        stores = study_stores(bench, d, encoder, cfg, banks)
        out["frozen"] = {p: ask(stores, p) for p in ("dev", "test")}
        shown = [s for b in banks for s in stream(stores[b], [q for q in split["train"] if q.bank == b], critic, arm == "on")]
        out["shown"] = {"train": percent(shown)}
        out["online"] = {p: ask(stores, p) for p in ("dev", "test")}
        out["trusted"] = sum(bool(st.learner_trusted) for st in stores.values())
        out["explored"] = sum(sum(n for n, _ in st._exposure().values()) for st in stores.values()) if arm == "on" else 0
        if consolidate:
            out.update(consolidate_stores(stores, split, True, d, progress=False))
            out["consolidated"] = {p: ask(stores, p) for p in ("dev", "test")}
        for st in stores.values(): st.close()
    out["minutes"] = round((time.perf_counter() - t0) / 60, 2)
    return out


bench = study_benchmark("locomo")
split = study_split(bench, "query")
if a.banks: split = {p: [q for q in qs if q.bank in set(a.banks)] for p, qs in split.items()}
encoder = Encoder(progress=False)
encoder.encode_queries([q.text for qs in split.values() for q in qs], progress=False)
print(f"query split: train {len(split['train'])}, dev {len(split['dev'])}, test {len(split['test'])}", file=sys.stderr)
runs = []
for seed in a.seeds:
    for arm in a.arms:
        r = run(bench, encoder, split, seed, arm, json.loads(a.config), not a.no_consolidate)
        runs.append(r)
        print(json.dumps({k: r[k] for k in ("seed", "arm", "shown", "online", "minutes")}), file=sys.stderr, flush=True)
        if a.json:
            with open(a.json, "a") as f: f.write(json.dumps(r) + "\n")
print(table(runs))
