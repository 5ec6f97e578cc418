"""Issue 36 (s13-36b) prototype, not the library: 22a's recall_changes as built under the floor, plus, when the question asks_present, a candidate past k (above the floor) that states_other_value of a hit it is newer than (cosine to the hit >= change_recall).

    EARMEM_DATA=/work/shared/data PYTHONPATH=$PWD nice -n 10 python studies/36_recall_gated.py studies/36_locomo_store.py --split fit --only chat
"""
import os, sys, runpy
import numpy as np
import earmem.memory.store.ranking as R
import earmem.memory.store.operations as O
def recall_order(order, keep, score, cands, created, metadata, k, config):
    mems = cands.memories; sim = config.change_recall
    below = np.setdiff1d(np.arange(len(mems)), keep)
    out = R.recall_changes(order, below, score, cands.embeddings, created, mems, k, sim, config.same_fact_similarity)
    q = getattr(cands.query, "text", "") if cands.query is not None else ""
    if sim is not None and out and R.asks_present(q):
        past = [int(u) for u in np.argsort(-np.asarray(score, np.float64), kind="stable") if int(u) in set(int(x) for x in keep) and int(u) not in out]
        E = np.asarray(cands.embeddings, np.float32); hits = list(out); used = set(); added = []
        for u in past:
            on = [p for p in hits if p not in used and created[p] < created[u] and float(E[u] @ E[p]) >= sim]
            if not on or any(float(E[u] @ E[x]) >= config.same_fact_similarity for x in added) or mems[u].text.rstrip().endswith("?"): continue
            if (on := [p for p in on if not R.says_change(mems[p]) and R.states_other_value(mems[u], mems[p], created[u])]):
                out.insert(out.index(on[0]), u); used.add(on[0]); added.append(u)
        out = out[:k]
    return R.replies_after_turns(out, mems, metadata, created, k) if config.replies_after_turns else out
O.recall_order = recall_order
script = sys.argv[1]; sys.argv = sys.argv[1:]
runpy.run_path(script, run_name="__main__")
