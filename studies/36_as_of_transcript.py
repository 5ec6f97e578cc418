"""Issue 36, must show: a fact that changed twice, through add, history and search(as_of=...). Bundled MiniLM, defaults.

    python studies/36_as_of_transcript.py        (output: studies/36_as_of_transcript.txt)
"""
import tempfile, json
from pathlib import Path
from earmem.memory import MemoryStore
from earmem.core import Encoder
with tempfile.TemporaryDirectory() as d:
    s = MemoryStore(Path(d) / "s", encoder=Encoder(progress=False, cache=False))
    for text, t in [("Ana lives in Paris", "2026-01-10T09:00:00Z"), ("Ana moved to Berlin", "2026-03-02T09:00:00Z"), ("Ana moved to Lisbon", "2026-06-20T09:00:00Z")]:
        r = s.add(text, "fact", entities=["Ana"], timestamp=t)
        print(f">>> s.add({text!r}, 'fact', entities=['Ana'], timestamp={t!r})\n{r}")
    last = r.id
    print(f">>> s.history({last!r})")
    for h in s.history(last): print(" ", json.dumps(h, default=str)[:230])
    for when in ("2026-02-01", "2026-04-01", "2026-07-01", None):
        hs = s.search("Where does Ana live?", k=3, **({"as_of": when} if when else {}))
        print(f">>> s.search('Where does Ana live?', k=3{', as_of=' + repr(when) if when else ''})")
        for h in hs: print(f"  #{h.rank} {h.id} {h.text!r} status={h.status} valid_from={h.valid_from} valid_to={h.valid_to}")
    s.close()
