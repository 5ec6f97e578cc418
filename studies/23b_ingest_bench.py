"""Issue 36's ingestion cost: the wall time of one add_messages call of N distinct one-fact turns (encoding included).

One `MemoryStore.add_messages` call on a fresh temporary store with the bundled default encoder, for N short user turns
that each state one distinct fact (so N extracted claims), by default N = 1,000 and 10,000. The encoder's on-disk
embedding cache is off unless --cache: the same turns in a second run would otherwise not be encoded at all.

    nice -n 10 python studies/23b_ingest_bench.py [--n 1000 10000] [--json] [--keep]

Prints one line per N (turns, claims, actions, seconds, claims/s); --json prints one JSON object instead. The target of
issue 36 is 1,000 claims in at most 20 s on 2 cores. A benchmark, not a timed test.
"""
import argparse, json, os, shutil, subprocess, sys, tempfile, time
from pathlib import Path

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog="Run from the repository root; HF_HUB_OFFLINE=1 is set for you.")
ap.add_argument("--n", type=int, nargs="+", default=[1000, 10000], help="turns per add_messages call, one run each (default: 1000 10000)")
ap.add_argument("--json", action="store_true", help="print one JSON object instead of text lines")
ap.add_argument("--keep", action="store_true", help="keep the temporary store folders")
ap.add_argument("--cache", action="store_true", help="let the encoder use its on-disk embedding cache (default: off, so every text is encoded)")
a = ap.parse_args()
if any(n < 1 for n in a.n): ap.error("--n: expected positive turn counts")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from earmem.core import Encoder  # noqa: E402  (after the offline switch)
from earmem.memory import MemoryStore  # noqa: E402

ADJ = "red blue green amber silver golden quiet busy north south".split()
NOUN = "printer whiteboard projector kettle router scanner plotter fridge heater speaker".split()


def turns(n: int) -> list:
    "n user turns, each one distinct fact: 'The red printer of team T00042 is in room 4-17.'"
    return [{"role": "user", "name": "Dana", "content": f"The {ADJ[i % 10]} {NOUN[i // 10 % 10]} of team T{i:05d} is in room {i % 7 + 1}-{i % 97}."}
            for i in range(n)]


def say(msg: str):
    if not a.json: print(msg, flush=True)


def run(n: int) -> dict:
    folder = Path(tempfile.mkdtemp(prefix="earmem-ingest-")) / "store"
    with MemoryStore(folder, encoder=Encoder(cache=a.cache)) as st:   # the bundled default model; no cache: a rerun encodes again
        st.search("warm up the encoder", k=1)          # loading the model is not ingestion
        say(f"# n={n}: store at {folder}, encoder loaded; add_messages …")
        t0 = time.perf_counter()
        r = st.add_messages(turns(n), session="bench", timestamp="2026-03-04T09:00:00Z")
        wall = time.perf_counter() - t0
        acts = [x.action for x, _, _ in r.memories]
        out = dict(turns=n, episodes=len(r.episodes), claims=len(r.memories), seconds=round(wall, 2),
                   claims_per_s=round(len(r.memories) / wall, 1), actions={k: acts.count(k) for k in sorted(set(acts))})
    if not a.keep: shutil.rmtree(folder.parent, ignore_errors=True)
    say(f"n={n}: {out['claims']} claims from {out['episodes']} turns in {out['seconds']} s ({out['claims_per_s']} claims/s); actions {out['actions']}")
    return out


up = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
say(f"# uptime: {up}; cpus {os.cpu_count()}")
results = [run(n) for n in a.n]
if a.json: print(json.dumps({"uptime": up, "cpus": os.cpu_count(), "runs": results}, indent=1))
