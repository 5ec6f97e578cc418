"""Issue 19's consolidation cost: one store of N LoCoMo memories (every conversation's turns, ids prefixed by conversation,
topped up with observations), taught by the simulated critic on the seed-0 *train* questions (k = 5), then consolidated once,
with the time of each phase (plan, estimate, fine-tune load/steps/save, re-embed, switch commit, prune).

    nice -n 10 python studies/23d_consolidate_bench.py [--memories 6000] [--folder DIR] [--keep]

A built (taught) store in --folder is reused, so a second run times the consolidation only.
"""
import argparse, json, os, shutil, subprocess, sys, tempfile, time
from dataclasses import replace
from pathlib import Path
import numpy as np
from earmem.core import Encoder
from earmem.ear.critic import CitationSimulator
from earmem.experiments.data import load_locomo
from earmem.memory import MemoryStore, StoreConfig
from earmem.memory.backends.boundary import MANIFEST_NAME
from earmem.cli.store_study import query_split
import earmem.memory.store.consolidate  # noqa: F401  (files consolidate() on MemoryStore)

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("--memories", type=int, default=6000)
ap.add_argument("--folder", help="the store folder (default: a temporary one, removed afterwards)")
ap.add_argument("--keep", action="store_true", help="keep the temporary folder")
a = ap.parse_args()


def build(folder: Path, n: int) -> dict:
    bench, enc = load_locomo(), Encoder(progress=False)
    mems = [m for b, ms in bench.banks("episodic").items() for m in ms for m in [replace(m, id=f"{b}/{m.id}")]]
    mems += [replace(m, id=f"{b}/{m.id}") for b, ms in bench.banks("semantic").items() for m in ms]
    mems = mems[:n]
    st = MemoryStore(folder, encoder=enc, config=StoreConfig(min_relevance=-1, dedupe_threshold=0.995))
    st.add_many(mems, embeddings=enc.encode_documents([m.text for m in mems], progress=False))
    critic, calls = CitationSimulator(seed=0), 0
    for q in query_split(bench)["train"]:                       # the train split only: nothing here is chosen on test
        gold = {f"{q.bank}/{g}" for g in q.gold}
        hits = st.search(q.text, k=5)
        if not hits: continue
        labels = critic.simulate(np.array([h.id in gold for h in hits]))
        st.feedback(hits, cited=[h.id for h, y in zip(hits, labels) if y > 0]); calls += 1
    out = {"memories": len(st), "feedback_calls": calls}
    st.close()
    return out


folder = Path(a.folder) if a.folder else Path(tempfile.mkdtemp()) / "bench"
t0 = time.perf_counter()
built = build(folder, a.memories) if not (folder / MANIFEST_NAME).exists() else {"reused": str(folder)}
print(f"# store: {built} in {time.perf_counter() - t0:.0f} s at {folder}", flush=True)
print(f"# uptime before: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}", flush=True)
PHASES = {}
def timed(owner, name, label):
    "Wrap owner.name so its wall time adds up under `label` (the profile's phases)."
    f = getattr(owner, name)
    def g(*args, **kw):
        t = time.perf_counter()
        try: return f(*args, **kw)
        finally: PHASES[label] = PHASES.get(label, 0) + time.perf_counter() - t
    setattr(owner, name, g)

C = earmem.memory.store.consolidate
for owner, name, label in [(MemoryStore, "_plan", "plan (log + texts + triples)"), (MemoryStore, "_estimate", "estimate (base model load + 64 encodes)"),
                           (C, "train_steps", "fine-tune: steps"), (C, "train_encoder", "fine-tune: total (load + steps + save)"),
                           (C, "_embed_rows", "re-embed"), (C.SQLiteBackend, "switch_vectors", "switch: SQLite update"),
                           (C.SQLiteBackend, "write", "switch: transaction open"), (MemoryStore, "_fresh_checkpoint", "switch: fresh learner checkpoint"),
                           (MemoryStore, "_adopt_switch", "switch: adopt (manifest)"), (MemoryStore, "_sync_learner", "switch: learner sync"),
                           (MemoryStore, "_prune_encoders", "prune")]:
    if hasattr(owner, name): timed(owner, name, label)
work = folder.with_name(folder.name + "-run"); shutil.rmtree(work, ignore_errors=True); shutil.copytree(folder, work)
st = MemoryStore(work)
t0 = time.perf_counter(); rep = st.consolidate(progress=False); wall = time.perf_counter() - t0
st.close()
print(json.dumps({k: v for k, v in rep.items() if k not in ("dry_run",)}, indent=1))
print("# phases (s): " + json.dumps({k: round(v, 1) for k, v in PHASES.items()}, indent=1))
print(f"# consolidation wall: {wall / 60:.2f} min")
print(f"# uptime after: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}", flush=True)
shutil.rmtree(work, ignore_errors=True)
if not a.folder and not a.keep: shutil.rmtree(folder.parent, ignore_errors=True)
