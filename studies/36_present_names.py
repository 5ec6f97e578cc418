"""Issue 36 (s13-36b): present_newer with another name (chapter 18's _names) counted at a lower cosine than values, replayed on the dumps of studies/36_present_variants.py; per version, chat questions gained/lost against the values-only move (tau 0.4) and LoCoMo fit R@5 Hit@5 Hit@1.

    PYTHONPATH=$PWD python studies/36_present_names.py D
"""
import json, sys
from pathlib import Path
sys.path.insert(0, "studies")
import importlib; V = importlib.import_module("36_present_variants")
D = {s: [json.loads(l) for l in open(str(Path(sys.argv[1]) / f"{s}.jsonl"))] for s in V.SPLITS + ("locomo",)}
sov = lambda r, i, j: V.states_other_value(V.ns(r["hits"][j]), V.ns(r["hits"][i]), r["created"][j])
base = lambda r: V.move(r, sov, 0.4)
def split_tau(tn):
    def mv(r):
        order, cos, cr = list(r["order"]), r["cos"], r["created"]
        if len(order) < 2 or not V.asks_present(r["query"]): return order
        for i, j in [(i, j) for i in order for j in order if cr[j] > cr[i]]:
            a, b = order.index(i), order.index(j)
            if b > a and ((cos[i][j] >= 0.4 and sov(r, i, j)) or (cos[i][j] >= tn and V.other_name(r, i, j))): order.insert(a, order.pop(b))
        return order
    return mv
vers = {"sov 0.4 (now)": base, "sov|name 0.3": lambda r: V.move(r, lambda r,i,j: sov(r,i,j) or V.other_name(r,i,j), 0.3),
        "sov 0.4 | name 0.3": split_tau(0.3), "sov 0.4 | name 0.2": split_tau(0.2), "sov 0.4 | name 0.1": split_tau(0.1), "sov 0.4 | name 0.0": split_tau(-1)}
def first(r, o):
    t = [r["hits"][i]["text"].casefold() for i in o]
    return bool(t) and r["current"].casefold() in t[0]
for name, mv in vers.items():
    out = []
    for s in V.SPLITS:
        n = 0
        for r in D[s]:
            f0, f1 = first(r, base(r)), first(r, mv(r)); n += f1
            if f0 != f1: print(f"   {name}: {s} {r['chat']} {'GAIN' if f1 else 'LOSS'} {r['query']}")
        out.append(f"{100*n/len(D[s]):.0f}")
    L = [0,0,0]; ch=g=l=0
    for r in D["locomo"]:
        o, nn = base(r), mv(r); ids = V.turns(r, nn)
        L[0]+=V.recall_at_k(ids,r["gold"],5); L[1]+=V.hit_at_k(ids,r["gold"],5); L[2]+=V.hit_at_k(ids,r["gold"],1)
        x, y = V.hit_at_k(V.turns(r,o),r["gold"],1), V.hit_at_k(ids,r["gold"],1); ch += bool(o) and o[0]!=nn[0]; g+=y>x; l+=x>y
    print(f"{name:22s}", " ".join(out), " ".join(f"{100*x/len(D['locomo']):.1f}" for x in L), f"changed {ch} gained {g} lost {l}", flush=True)
