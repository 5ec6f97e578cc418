"""How many LoCoMo fit questions `asks_present` (chapter 22a) calls present — the questions `StoreConfig.present_newer` would reorder.

    EARMEM_DATA=../shared/data python studies/36_present_count.py
"""
import collections, sys
from earmem.experiments.data import load_locomo
from earmem.memory.store.ranking import asks_present

bench = load_locomo()
qs = [q for q in bench._all_queries() if q.metadata["scorable"]]
fit, _ = bench.split(test_size=0.2, seed=0)
keep = {q.id for q in fit}
qs = [q for q in qs if q.id in keep]
present = [q for q in qs if asks_present(q.text)]
print(f"LoCoMo fit: {len(present)} of {len(qs)} questions asked as present ({100 * len(present) / len(qs):.1f} %)")
by = collections.Counter(str(q.metadata.get("category")) for q in present)
print("present by category:", dict(sorted(by.items())))
for q in present[:int(sys.argv[1]) if len(sys.argv) > 1 else 15]: print("  ", q.text)
