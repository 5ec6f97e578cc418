"""Issue 19's consolidation transcript: a store, 30 feedback calls, `earmem memory consolidate --dry-run`, the run, search before/after.

    nice -n 10 python tools/consolidate_transcript.py [FOLDER]      (default: a temporary folder)
"""
import subprocess, sys, tempfile
from pathlib import Path
from earmem.core import Encoder
from earmem.memory import MemoryStore, StoreConfig

people = ["Ann", "Bob", "Cleo", "Dev", "Eli", "Fay", "Gus", "Hal", "Ivy", "Jo"]
facts = [f"{p} {v}" for p in people for v in ("lives in a small town by the sea", "works as a night nurse",
                                              "keeps two grey cats", "plays the cello on Sundays")]
asks = [(f"which pet does {p} have?", f"{p} keeps two grey cats") for p in people] + \
       [(f"what instrument does {p} play?", f"{p} plays the cello on Sundays") for p in people] + \
       [(f"what is {p}'s job?", f"{p} works as a night nurse") for p in people]

def sh(*args):
    print("$ earmem memory " + " ".join(f"'{a}'" if " " in a else a for a in args), flush=True)
    out = subprocess.run([sys.executable, "-m", "earmem.cli", "memory", *args], capture_output=True, text=True)
    print(out.stdout.rstrip() or out.stderr.rstrip(), flush=True)

folder = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp()) / "store"
st = MemoryStore(folder, encoder=Encoder(cache=False, progress=False), config=StoreConfig(min_relevance=-1))
st.add_many(facts, kind="fact")
for q, want in asks:
    hits = st.search(q, k=5); st.feedback(hits, cited=[h.id for h in hits if h.text == want])
print(f"# a store of {len(st)} memories at {folder}; {st.stats()['feedback']} feedback calls (the critic cites the memory each question is about)")
st.close()
probe = "does Hal have any animals?"
sh("search", probe, "-k", "3", "--store", str(folder))
sh("consolidate", "--dry-run", "--store", str(folder))
sh("consolidate", "--store", str(folder))
sh("search", probe, "-k", "3", "--store", str(folder))
sh("stats", "--store", str(folder))
