"""Issue 36: versions of 22a's `present_newer` tried offline on the hits each search handed it (`--dump` of the two studies).

The dumps hold, per question, the hits in the order `present_newer` received them, their pairwise cosines and times; a
version is replayed on them exactly (the replay of "off" and of the old unconditioned move reproduces the measured runs).

    for s in tune fresh fresh2 fresh3 heldout; do PYTHONPATH=$PWD python studies/36_truth_baseline.py --split $s --only chats --dump D/$s.jsonl; done
    EARMEM_DATA=/work/shared/data PYTHONPATH=$PWD python studies/36_locomo_store.py --split fit --only chat --dump D/locomo.jsonl
    PYTHONPATH=$PWD python studies/36_present_variants.py D          # the table; --losses: LoCoMo's lost first hits of the old move, counted
"""
from __future__ import annotations
import argparse, json, re, sys
from collections import Counter
from pathlib import Path
from types import SimpleNamespace
from earmem.core import hit_at_k, recall_at_k
from earmem.memory.store.ranking import asks_present, _change_of, _ADDS, _SPEAKER, says_change, states_other_value
from earmem.memory.rules.updates import _names, _extract

SPLITS = ("tune", "fresh", "fresh2", "fresh3", "heldout")

def move(r, cond, tau):
    "present_newer's loop over one dumped search, with `cond(row, older, newer)` as the extra test."
    order, cos, cr = list(r["order"]), r["cos"], r["created"]
    if tau is None or len(order) < 2 or not asks_present(r["query"]): return order
    for i, j in [(i, j) for i in order for j in order if cr[j] > cr[i]]:
        a, b = order.index(i), order.index(j)
        if b > a and cos[i][j] >= tau and cond(r, i, j): order.insert(a, order.pop(b))
    return order

def chat_score(rows, tau, cond):
    first = stale = 0
    for r in rows:
        t = [r["hits"][i]["text"].casefold() for i in move(r, cond, tau)]
        cur = next((i for i, x in enumerate(t) if r["current"].casefold() in x), None)
        st = None if not r["stale"] else next((i for i, x in enumerate(t) if r["stale"].casefold() in x and r["current"].casefold() not in x), None)
        first += cur == 0; stale += st is not None and (cur is None or st < cur)
    return f"{100 * first / len(rows):.0f} % ({stale})"

def turns(r, order):
    ids = []
    for i in order:
        if (g := r["hits"][i]["turn"]) is not None and g not in ids: ids.append(g)
    return ids

def loco_score(rows, tau, cond):
    s = [0.0, 0.0, 0.0]
    for r in rows:
        ids = turns(r, move(r, cond, tau))
        s[0] += recall_at_k(ids, r["gold"], 5); s[1] += hit_at_k(ids, r["gold"], 5); s[2] += hit_at_k(ids, r["gold"], 1)
    return " ".join(f"{100 * x / len(rows):.1f}" for x in s)

def ns(h): return SimpleNamespace(text=h["text"], kind=h["kind"])
def vals(h): return _change_of(h["text"], h["kind"] == "episode")[1]
def speaker(r, h):
    if "speaker" in h["metadata"]: return h["metadata"]["speaker"]
    return next((x["metadata"].get("speaker") for x in r["hits"] if x["id"] == h["metadata"].get("from_turn")), None)
def same_speaker(r, i, j):
    a, b = speaker(r, r["hits"][i]), speaker(r, r["hits"][j]); return a is None or b is None or a == b
def any_value_differs(r, i, j):
    va, vb = vals(r["hits"][i]), vals(r["hits"][j]); return any(k in vb and va[k] != vb[k] for k in va)

def names(r, h, other):
    "Chapter 18's `_names` of a hit (values masked, a turn's 'name: ' dropped), read against `other`, without the hits' speakers and entities."
    own = {e.casefold() for x in r["hits"] for e in x["entities"]} | {(x["metadata"].get("speaker") or "").casefold() for x in r["hits"]}
    m = lambda x: _extract(_SPEAKER.sub("", x["text"], count=1) if x["kind"] == "episode" else x["text"])[1]
    return {n for n in _names(m(h), m(other)) if n not in own}
def other_name(r, i, j):
    "The older hit names something and the newer names something it does not ('Zalando' -> 'Spotify'); not 'also'."
    a, b = r["hits"][i], r["hits"][j]; na, nb = names(r, a, b), names(r, b, a)
    return bool(na) and bool(nb - na) and not _ADDS.search(b["text"])

VERSIONS = {
    "every newer hit (the old present_newer)": lambda r, i, j: True,
    "same speaker, not 'also'": lambda r, i, j: same_speaker(r, i, j) and not _ADDS.search(r["hits"][j]["text"]),
    "a value of one kind differs (dates too)": any_value_differs,
    "states_other_value (22a: dates only if not past)": lambda r, i, j: states_other_value(ns(r["hits"][j]), ns(r["hits"][i]), r["created"][j]),
    "states_other_value or another name (18's _names)": lambda r, i, j: states_other_value(ns(r["hits"][j]), ns(r["hits"][i]), r["created"][j]) or other_name(r, i, j),
}

def losses(rows):
    "LoCoMo questions whose first hit was evidence and is not after the old move, counted by what the pair shares."
    L = []
    for r in rows:
        o, n = r["order"], move(r, VERSIONS["every newer hit (the old present_newer)"], 0.5)
        if o and hit_at_k(turns(r, o), r["gold"], 1) > hit_at_k(turns(r, n), r["gold"], 1): L.append((r, o[0], n[0]))
    c = Counter()
    for r, i, j in L:
        a, b = r["hits"][i], r["hits"][j]; sa, sb = speaker(r, a), speaker(r, b)
        c["same speaker" if sa and sb and sa == sb else "other speaker" if sa and sb else "speaker unknown (a claim whose turn is not a hit)"] += 1
        ta, tb = a["turn"].split(":"), b["turn"].split(":")
        c["newer within 3 turns after the older, one session"] += ta[0] == tb[0] and 0 < int(tb[1]) - int(ta[1]) <= 3
        c["newer is a question"] += b["text"].rstrip().endswith("?")
        c["newer says a change (claim frame)"] += says_change(ns(b))
        c["a value of one kind differs"] += any_value_differs(r, i, j)
        c["states_other_value"] += states_other_value(ns(b), ns(a), r["created"][j])
        c["newer is evidence too"] += b["turn"] in r["gold"]
        c[f"kinds {a['kind']} > {b['kind']}"] += 1
    print(f"LoCoMo fit: {len(L)} first hits lost to the old move (tau 0.5)")
    for k, v in sorted(c.items(), key=lambda kv: -kv[1]): print(f"  {v:3d}  {k}")

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dumps", help="the folder of the --dump files: tune.jsonl … heldout.jsonl, locomo.jsonl")
    ap.add_argument("--losses", action="store_true", help="LoCoMo's first hits lost to the old move, counted")
    ap.add_argument("--changed", action="store_true", help="per version: LoCoMo first hits changed, gained, lost")
    a = ap.parse_args(argv)
    D = {s: [json.loads(l) for l in open(Path(a.dumps) / f"{s}.jsonl")] for s in SPLITS + ("locomo",)}
    if a.losses: return losses(D["locomo"])
    print(f"{'version':50s} {'tau':>4s}  " + "  ".join(f"{s:>9s}" for s in SPLITS) + "  LoCoMo fit R@5 Hit@5 Hit@1")
    if a.changed:
        for name, cond in VERSIONS.items():
            for tau in (0.5, 0.4, 0.3):
                c = Counter()
                for r in D["locomo"]:
                    o, n = r["order"], move(r, cond, tau)
                    x, y = hit_at_k(turns(r, o), r["gold"], 1), hit_at_k(turns(r, n), r["gold"], 1)
                    c["changed"] += bool(o) and o[0] != n[0]; c["gained"] += y > x; c["lost"] += x > y
                print(f"{name:50s} {tau:4.1f}  LoCoMo fit first hit changed {c['changed']}, Hit@1 gained {c['gained']}, lost {c['lost']}")
        return
    print(f"{'off':50s} {'-':>4s}  " + "  ".join(f"{chat_score(D[s], None, None):>9s}" for s in SPLITS) + f"  {loco_score(D['locomo'], None, None)}")
    for name, cond in VERSIONS.items():
        for tau in (0.5, 0.4, 0.3):
            print(f"{name:50s} {tau:4.1f}  " + "  ".join(f"{chat_score(D[s], tau, cond):>9s}" for s in SPLITS) + f"  {loco_score(D['locomo'], tau, cond)}", flush=True)

if __name__ == "__main__": sys.exit(main())
