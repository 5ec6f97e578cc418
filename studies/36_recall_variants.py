"""Issue 36 (s13-36b) prototype, not the library: runs a study script with 22a's recall_order replaced. VARIANT env: "value" (a candidate under the floor that states_other_value of a hit counts too), "wide" (candidates past k, above the floor, too), "wide,value"; "none" = 22a as built.

    VARIANT=wide,value PYTHONPATH=$PWD nice -n 10 python studies/36_recall_variants.py studies/36_truth_baseline.py --split fresh3 --only chats
"""
import os, sys, runpy
import numpy as np
import earmem.memory.store.ranking as R
import earmem.memory.store.operations as O
V = os.environ.get("VARIANT", "")
def recall_changes(order, below, score, E, created, mems, k, similarity, same=0.7):
    out = [int(j) for j in order]
    if similarity is None or not out: return out
    hits, seen, below = list(out), set(out), {int(u) for u in below}
    left = [int(u) for u in np.argsort(-np.asarray(score, np.float64), kind="stable") if int(u) in below and int(u) not in seen]
    if not left: return out[:k]
    E = np.asarray(E, np.float32); S = E[left] @ E[hits].T
    used, added = set(), []
    for a, u in enumerate(left):
        on = [p for b, p in enumerate(hits) if p not in used and created[p] < created[u] and S[a, b] >= similarity]
        if not on or any(float(E[u] @ E[x]) >= same for x in added): continue
        sc = R.says_change(mems[u])
        ok = [p for p in on if not R.says_change(mems[p]) and ((sc and R.changes(mems[u], mems[p])) or ("value" in V and not mems[u].text.rstrip().endswith("?") and R.states_other_value(mems[u], mems[p], created[u])))]
        if ok:
            out.insert(out.index(ok[0]), u); used.add(ok[0]); added.append(u)
    return out[:k]
def recall_order(order, keep, score, cands, created, metadata, k, config):
    mems = cands.memories
    below = np.setdiff1d(np.arange(len(mems)), order if "wide" in V else keep)
    order = recall_changes(order, below, score, cands.embeddings, created, mems, k, config.change_recall, config.same_fact_similarity)
    return R.replies_after_turns(order, mems, metadata, created, k) if config.replies_after_turns else order
O.recall_order = recall_order
script = sys.argv[1]; sys.argv = sys.argv[1:]
runpy.run_path(script, run_name="__main__")
