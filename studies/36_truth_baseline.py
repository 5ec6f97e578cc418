"""Issue 36 baseline: what the store keeps today, measured through the public API on the truth corpora (no rule changes).

    python studies/36_truth_baseline.py                       # tune split: pairs, chats, concurrency (bundled MiniLM)
    python studies/36_truth_baseline.py --hashing             # pairs and chats with HashingEncoder(64), no model
    python studies/36_truth_baseline.py --only pairs,chats --json out.json
    python studies/36_truth_baseline.py --split heldout       # once, after the rules change
    python studies/36_truth_baseline.py --split fresh3 --only chats   # the fourth held-out set: chats only, scored once at the end
    python studies/36_truth_baseline.py --split fresh4 --only chats   # the fifth, written after fresh3 was scored: chats only, scored once
    python studies/36_truth_baseline.py --split fresh5 --only chats   # the sixth, written blind to the rules: chats only, scored once
    python studies/36_truth_baseline.py --split fresh6 --only chats   # the seventh, written blind to the rules: chats only, scored once
    python studies/36_truth_baseline.py --split fresh7 --only chats   # the eighth, written blind to the rules: chats only, scored once

Pairs (nbs/memory/rules/data/truth_pairs.json), per category:
  judge   judge_claims(old, new).is_update (--judge rules: judge_change, the baseline's), scored against expected == "update" (precision / recall)
  door    a fresh store per pair: add(old, kind=old_kind), then add(new, kind=new_kind) (a null kind is omitted: the store
          infers it); the door said "update" when the second AddResult is action 'updated' superseding the first memory.
          Scored twice: without entities (as a bare add) and with entities=["user"] on both (as a chat with a known
          speaker, or an agent tagging its user: this opens the door's related band, cosine >= 0.7, same kind).
  hidden  distinct or restatement pairs whose old memory was superseded as an update (a restatement may merge);
  d-merge distinct pairs whose new memory was merged into the old one (the new fact survives only as a duplicate's wording);
  u-lost  update pairs whose new memory was merged into the old one (the change is lost);
  u-both  update pairs where both stay active (the stale fact is still searchable);
  u-link  of u-both, the pairs the door was unsure of and linked (may_update): both kept, the newer searched first.
Chats (nbs/memory/store/data/truth_chats.json): add_messages(messages) into a fresh store (clock: one minute after the
  last message), then per question search(q, k=3): the first hit holding the `current` substring, the first holding
  `stale` but not `current`; "first" = the top hit holds current; "stale above" = a stale hit ranks above every current
  hit (or no current hit at all and a stale one). Also with kinds=fact/decision/preference/correction (claims only).
  Corrupted claim: an extracted (non-episode) memory with a word bigram found in none of the chat's messages, after
  lowercasing, expanding common contractions, dropping apostrophes and punctuation, writing a month and its day as one
  word ("May 3" -> may_3) and ISO dates (and relative dates: today, tomorrow, next Friday, in 3 days ...)
  as <date>; bigrams touching <date> or a speaker's name are exempt, "on <date>", "in <date>" and "the week of <date>"
  count as "<date>" (the date resolver inserts them: "last month" -> "in 2026-11"), and a value swap a message states ("X, not Y", "not Y, it's X", "not Y but X": Y -> X, whole
  values; "I meant X": X after any word) may be applied to any message sentence first. So "My flight to Berlin is on
  May 5" passes after "Sorry, it's May 5, not May 3", and "... is on 5 3" fails ("on 5", "5 3").
Concurrency (bundled MiniLM, always): 2 processes x 400 and 4 threads x 150 distinct numbered memories ("Item 17: buy
  red milk", every item another thing) added at once into one store; a sequential control adds the same 800 texts in one
  process. Counted: memories superseded, merged, errors. --texts numbered: "Memory number 17 written by the load test"
  instead, the issue's class (only the number differs).
"""
from __future__ import annotations
import argparse, json, os, re, shutil, subprocess, sys, tempfile, threading, time
from collections import Counter, defaultdict
from datetime import datetime, timezone
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1"); os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
PAIRS = ROOT / "nbs/memory/rules/data/truth_pairs.json"
CHATS = ROOT / "nbs/memory/store/data/truth_chats.json"


def _corpus(path: Path, split: str) -> Path:
    "The 'fresh' splits live in their own files (truth_*_fresh.json, _fresh2, _fresh3, _fresh4, _fresh5, _fresh6, _fresh7: held-out sets, each written after the last was used)."
    return path.with_name(f"{path.stem}_{split}.json") if split in ("fresh", "fresh2", "fresh3", "fresh4", "fresh5", "fresh6", "fresh7") else path
CLAIM_KINDS = ["fact", "decision", "preference", "correction"]


def encoder(hashing: bool):
    if hashing:
        from earmem.memory import HashingEncoder
        return HashingEncoder(64)
    from earmem.core import Encoder
    return Encoder(progress=False, cache=False)


def epoch(s: str) -> float: return datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()


# ------------------------------------------------------------------ pairs
def door(enc, tmp: Path, p: dict, entities) -> dict:
    "The store's answer to the pair: what the second add did, and whether the old memory is still active and found."
    from earmem.memory import MemoryStore
    from earmem.memory.rules.hygiene import KINDS
    path = tmp / f"{p['id']}-{'e' if entities else 'n'}"
    s = MemoryStore(path, encoder=enc)
    try:
        # a corpus kind the store does not have ('plan', 'event' in fresh2) is left for add() to infer, as a user's would be
        kw = lambda k: ({"kind": k} if k in KINDS else {}) | ({"entities": entities} if entities else {})
        r1 = s.add(p["old"], **kw(p["old_kind"]))
        r2 = s.add(p["new"], **kw(p["new_kind"]))
        old = s.get(r1.id)
        found = [h.id for h in s.search(p["old"], k=3)]
        kinds = (old.kind, s.get(r2.id).kind)
        linked = s.get(r2.id).metadata.get("may_update") == r1.id  # the door was unsure: both kept, the newer searched first
    finally:
        s.close(); shutil.rmtree(path, ignore_errors=True)
    superseded = r2.action == "updated" and r2.supersedes == r1.id
    return dict(action=r2.action, superseded=superseded, merged=r2.action == "merged" and r2.id == r1.id, old_status=old.status,
                old_found=r1.id in found, similarity=r2.similarity, reason=r2.reason, kinds=kinds, linked=linked)


def pr(rows, pred, truth=lambda r: r["expected"] == "update") -> tuple:
    tp = sum(pred(r) and truth(r) for r in rows); fp = sum(pred(r) and not truth(r) for r in rows)
    fn = sum(truth(r) and not pred(r) for r in rows)
    return (tp / (tp + fp) if tp + fp else None), (tp / (tp + fn) if tp + fn else None)


def pair_scores(rows: list, key: str) -> dict:
    "Scores of one door mode (key 'door' or 'door_ent') or the judge ('judge') over rows."
    if key == "judge": pred = lambda r: r["judge"]["update"]
    else: pred = lambda r: r[key]["superseded"]
    P, R = pr(rows, pred)
    out = dict(n=len(rows), precision=P, recall=R)
    if key == "judge":
        out["hidden"] = sum(r["expected"] != "update" and r["judge"]["update"] for r in rows)
    else:
        out["hidden"] = sum(r["expected"] != "update" and r[key]["superseded"] for r in rows)
        out["d_merged"] = sum(r["expected"] == "distinct" and r[key]["merged"] for r in rows)
        out["u_lost"] = sum(r["expected"] == "update" and r[key]["merged"] for r in rows)
        out["u_both"] = sum(r["expected"] == "update" and r[key]["action"] == "inserted" for r in rows)
        out["u_linked"] = sum(r["expected"] == "update" and r[key].get("linked", False) for r in rows)  # of u_both: kept, newest first
        out["d_linked"] = sum(r["expected"] != "update" and r[key].get("linked", False) for r in rows)
        out["kind_differs"] = sum(r[key]["kinds"][0] != r[key]["kinds"][1] for r in rows)
    return out


def run_pairs(a, enc) -> dict:
    from earmem.memory.rules.updates import judge_change
    from earmem.memory.rules.claims import judge_claims
    judge = judge_claims if a.judge == "claims" else judge_change
    pairs = [p for p in json.loads(_corpus(PAIRS, a.split).read_text()) if p["split"] == a.split][: a.limit or None]
    rows, t0 = [], time.time()
    with tempfile.TemporaryDirectory(prefix="truth36-") as tmp:
        for i, p in enumerate(pairs):
            d = judge(p["old"], p["new"])
            rows.append({**p, "judge": dict(action=d.action, update=d.is_update, reason=d.reason),
                         "door": door(enc, Path(tmp), p, None), "door_ent": door(enc, Path(tmp), p, ["user"])})
            if a.progress and (i + 1) % 50 == 0: print(f"  … {i + 1}/{len(pairs)} pairs, {time.time() - t0:.0f} s", file=sys.stderr)
    cats = list(dict.fromkeys(p["category"] for p in pairs))
    table = {c: {k: pair_scores([r for r in rows if r["category"] == c], k) for k in ("judge", "door", "door_ent")} for c in cats}
    table["ALL"] = {k: pair_scores(rows, k) for k in ("judge", "door", "door_ent")}
    return dict(split=a.split, seconds=round(time.time() - t0, 1), table=table, rows=rows)


def fmt(x): return "   - " if x is None else f"{x:5.2f}"


def print_pairs(res: dict):
    t = res["table"]
    print(f"\nPAIRS ({res['split']}, {t['ALL']['judge']['n']} pairs, {res['seconds']} s)")
    print("                                  |      judge       |  door (no entities)                  |  door (entities=['user'])")
    print(f"{'category':32s} {'n':>3s} | {'P':>5s} {'R':>5s} {'hid':>3s} | {'P':>5s} {'R':>5s} {'hid':>3s} {'dmrg':>4s} {'ulost':>5s} {'uboth':>5s} {'ulink':>5s} {'kind≠':>5s}"
          f" | {'P':>5s} {'R':>5s} {'hid':>3s} {'dmrg':>4s} {'ulost':>5s} {'uboth':>5s} {'ulink':>5s}")
    for c, s in t.items():
        j, d, e = s["judge"], s["door"], s["door_ent"]
        if c == "ALL": print("-" * 150)
        print(f"{c:32s} {j['n']:3d} | {fmt(j['precision'])} {fmt(j['recall'])} {j['hidden']:3d} | {fmt(d['precision'])} {fmt(d['recall'])} "
              f"{d['hidden']:3d} {d['d_merged']:4d} {d['u_lost']:5d} {d['u_both']:5d} {d.get('u_linked', 0):5d} {d['kind_differs']:5d} | {fmt(e['precision'])} "
              f"{fmt(e['recall'])} {e['hidden']:3d} {e['d_merged']:4d} {e['u_lost']:5d} {e['u_both']:5d} {e.get('u_linked', 0):5d}")
    rows = res["rows"]
    print("\n  hidden (distinct/restatement superseded as an update), examples:")
    for key in ("door", "door_ent"):
        ex = [r for r in rows if r["expected"] != "update" and r[key]["superseded"]][:6]
        for r in ex: print(f"    [{key}] {r['category']}: {r['old']!r} -> {r['new']!r}  ({r[key]['reason']}, cos {r[key]['similarity']:.2f})")
    print("  judge says update on a distinct pair, examples:")
    for r in [r for r in rows if r["expected"] == "distinct" and r["judge"]["update"]][:8]:
        print(f"    {r['category']}: {r['old']!r} -> {r['new']!r}  ({r['judge']['reason']})")
    print("  missed updates at the door (entities), examples:")
    for r in [r for r in rows if r["expected"] == "update" and not r["door_ent"]["superseded"]][:8]:
        print(f"    {r['category']}: {r['old']!r} -> {r['new']!r}  judge={r['judge']['action']} ({r['judge']['reason']}); door {r['door_ent']['action']}"
              f" kinds {r['door_ent']['kinds']}")


# ------------------------------------------------------------------ chats
_CONTRACTIONS = {"i'm": "i am", "it's": "it is", "that's": "that is", "don't": "do not", "doesn't": "does not", "didn't": "did not",
                 "isn't": "is not", "aren't": "are not", "wasn't": "was not", "can't": "can not", "cannot": "can not", "won't": "will not",
                 "i've": "i have", "i'll": "i will", "i'd": "i would", "we're": "we are", "we've": "we have", "we'll": "we will",
                 "they're": "they are", "you're": "you are", "let's": "let us"}
_REL_DATE = re.compile(r"\b(?:today|tonight|tomorrow|yesterday|(?:next|this|on)\s(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)|"
                       r"in\s(?:\d+|a|one|two|three)\s(?:days?|weeks?))\b")
_ISO = re.compile(r"\b\d{4}-\d{2}(?:-\d{2})?\b")


_MONTH = r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sept?(?:ember)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"


def norm(text: str, claim: bool) -> str:
    "Lowercased, contractions expanded, apostrophes dropped, dates as one token ('may 3' -> 'may_3', ISO -> xdatex); punctuation kept."
    t = text.casefold().replace("\u2019", "'")
    t = _ISO.sub(" xdatex ", t)
    t = _REL_DATE.sub(" xdatex ", t)  # a claim may keep a relative date unresolved: no corruption
    t = re.sub(r"\bthe\s(?:week|weekend)\sof\s+xdatex", " xdatex ", t)  # the resolver's "the week of 2026-11-23"
    t = re.sub(r"[a-z]+'[a-z]+", lambda m: _CONTRACTIONS.get(m.group(0), m.group(0).replace("'", "")), t).replace("'", "")
    t = re.sub(rf"\b({_MONTH})\.?\s(\d{{1,2}})(?:st|nd|rd|th)?\b", r"\1_\2", t)
    return re.sub(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s(?:of\s)?({_MONTH})\b", r"\2_\1", t)


def words(text: str, claim: bool) -> list:
    toks = re.findall(r"[a-z0-9_]+", norm(text, claim))
    if claim: toks = [w for i, w in enumerate(toks) if not (w in ("on", "in") and i + 1 < len(toks) and toks[i + 1] == "xdatex")]
    return toks


def bigrams(toks: list) -> set: return set(zip(toks, toks[1:]))


_LEAD = {"sorry", "oops", "no", "actually", "it", "is", "its", "my", "mistake", "wait", "i", "meant", "so", "well"}


def swaps(messages: list) -> tuple:
    "Value swaps the messages state ((old tokens, new tokens) of 'X, not Y' / 'not Y, it's X' / 'not Y but X'), and 'I meant X' values."
    out, meant = [], []
    for m in messages:
        t = norm(m["content"], False)
        for rx, order in ((r"\bnot ([^,.;!?]+?),? (?:it is|but) ([^,.;!?]+)", "yx"), (r"([^,.;!?]+?),? not ([^,.;!?]+)", "xy")):
            for g in re.finditer(rx, t):
                y, x = (g.group(1), g.group(2)) if order == "yx" else (g.group(2), g.group(1))
                x, y = re.findall(r"[a-z0-9_]+", x), re.findall(r"[a-z0-9_]+", y)
                while x and x[0] in _LEAD: x = x[1:]
                if x and y:
                    for yy in (y, y[-1:]):
                        for xx in (x, x[-1:]): out.append((tuple(yy), tuple(xx)))
        meant += [re.findall(r"[a-z0-9_]+", g.group(1)) for g in re.finditer(r"\bmeant ([^,.;!?]+)", t)]
    return out, [x for x in meant if x]


def allowed(messages: list) -> set:
    "Every bigram of the messages, and of their sentences with a stated value swapped in (whole values only)."
    toks = [words(m["content"], False) for m in messages]
    have = set().union(*(bigrams(t) for t in toks))
    sw, meant = swaps(messages)
    for t in toks:
        for y, x in sw:
            for i in range(len(t) - len(y) + 1):
                if tuple(t[i:i + len(y)]) == y: have |= bigrams(t[:i] + list(x) + t[i + len(y):])
    for x in meant:  # 'I meant Munich': the value may stand after any word of the conversation
        have |= bigrams(x) | {(w, x[0]) for t in toks for w in t} | {(x[-1], w) for t in toks for w in t}
    return have


def corrupted(claim: str, messages: list) -> list:
    "The claim's bigrams found in no message nor in a message with a stated value swap (exempt: bigrams touching a date or a speaker)."
    have = allowed(messages)
    exempt = {"xdatex"} | {w for m in messages if m.get("name") for w in words(m["name"], True)}
    return sorted(" ".join(b) for b in bigrams(words(claim, True)) - have if not exempt & set(b))


def run_chats(a, enc) -> dict:
    from earmem.memory import MemoryStore, StoreConfig
    chats = [c for c in json.loads(_corpus(CHATS, a.split).read_text()) if c["split"] == a.split][: a.limit or None]
    rows, t0 = [], time.time()
    if a.dump:   # --dump: one JSON line per question (all kinds), the hits as 22a's present_newer received them (studies/present_tap.py)
        from present_tap import install, snapshot
        tap, dump = install(), open(a.dump, "w")
    with tempfile.TemporaryDirectory(prefix="truth36c-") as tmp:
        for c in chats:
            last = max(epoch(m["time"]) for m in c["messages"])
            s = MemoryStore(Path(tmp) / c["id"], encoder=enc, clock=lambda last=last: last + 60.0, config=StoreConfig(**json.loads(a.config)))
            try:
                msgs = [{"role": m["role"], "content": m["content"], "timestamp": m["time"], **({"name": m["name"]} if m.get("name") else {})}
                        for m in c["messages"]]
                res = s.add_messages(msgs, session=c["id"])
                recs = s.records(include_retracted=True)
                claims = [r for r in recs if r.kind != "episode"]
                qs = []
                for q in c["questions"]:
                    one = {}
                    for mode, kinds in (("all", None), ("claims", CLAIM_KINDS)):
                        hits = s.search(q["q"], k=3, kinds=kinds)
                        if a.dump and kinds is None: dump.write(json.dumps(snapshot(tap, q["q"], chat=c["id"], current=q["current"], stale=q["stale"])) + "\n")
                        texts = [h.text.casefold() for h in hits]
                        cur = next((i for i, t in enumerate(texts) if q["current"].casefold() in t), None)
                        st = None if not q["stale"] else next((i for i, t in enumerate(texts) if q["stale"].casefold() in t
                                                               and q["current"].casefold() not in t), None)
                        one[mode] = dict(first=cur == 0, found=cur is not None, stale_above=st is not None and (cur is None or st < cur),
                                         hits=[(h.kind, h.text) for h in hits])
                    active_stale = bool(q["stale"]) and any(r.status == "active" and q["stale"].casefold() in r.text.casefold()
                                                            and q["current"].casefold() not in r.text.casefold() for r in claims)
                    qs.append({**q, **one, "stale_claim_active": active_stale})
            finally:
                s.close()
            bad = [(r.text, corrupted(r.text, c["messages"])) for r in claims]
            rows.append(dict(id=c["id"], category=c["category"], questions=qs, claims=[(r.kind, r.status, r.text) for r in claims],
                             corrupted=[(t, b) for t, b in bad if b], updated=len(res.updated)))
    if a.dump: dump.close()
    cats = list(dict.fromkeys(c["category"] for c in chats))
    def score(rs):
        Q = [q for r in rs for q in r["questions"]]; n = len(Q) or 1
        return dict(chats=len(rs), questions=len(Q), claims=sum(len(r["claims"]) for r in rs),
                    corrupted=sum(len(r["corrupted"]) for r in rs), updated=sum(r["updated"] for r in rs),
                    first=sum(q["all"]["first"] for q in Q) / n, found=sum(q["all"]["found"] for q in Q) / n,
                    stale_above=sum(q["all"]["stale_above"] for q in Q), first_claims=sum(q["claims"]["first"] for q in Q) / n,
                    stale_above_claims=sum(q["claims"]["stale_above"] for q in Q), stale_active=sum(q["stale_claim_active"] for q in Q))
    table = {c: score([r for r in rows if r["category"] == c]) for c in cats}
    table["ALL"] = score(rows)
    return dict(split=a.split, seconds=round(time.time() - t0, 1), table=table, rows=rows)


def print_chats(res: dict):
    t = res["table"]
    print(f"\nCHATS ({res['split']}, {t['ALL']['chats']} chats, {t['ALL']['questions']} questions, {res['seconds']} s)")
    print("                                  search(k=3), all kinds   |  claims only        | store")
    print(f"{'category':20s} {'chats':>5s} {'qs':>3s} | {'first':>5s} {'top3':>5s} {'stale>':>6s} | {'first':>5s} {'stale>':>6s} | "
          f"{'claims':>6s} {'updated':>7s} {'stale act':>9s} {'corrupt':>7s}")
    for c, s in t.items():
        if c == "ALL": print("-" * 110)
        print(f"{c:20s} {s['chats']:5d} {s['questions']:3d} | {s['first']:5.2f} {s['found']:5.2f} {s['stale_above']:6d} | {s['first_claims']:5.2f} "
              f"{s['stale_above_claims']:6d} | {s['claims']:6d} {s['updated']:7d} {s['stale_active']:9d} {s['corrupted']:7d}")
    print("\n  corrupted claims (claim  <- bigrams in no message):")
    for r in res["rows"]:
        for text, b in r["corrupted"]: print(f"    {r['id']} {r['category']}: {text!r}  <- {b}")
    print("  questions whose current fact is not first (top hit shown):")
    for r in res["rows"]:
        for q in r["questions"]:
            if not q["all"]["first"]:
                top = q["all"]["hits"][0] if q["all"]["hits"] else None
                print(f"    {r['id']} {q['q']!r} want {q['current']!r}{' STALE ABOVE' if q['all']['stale_above'] else ''}: top {top}")


# ------------------------------------------------------------------ concurrency
COLORS = """red blue green black white yellow grey navy coral purple brown silver golden pink teal beige maroon mustard lilac
crimson""".split()
THINGS = """milk eggs bread rice lemons apples onions batteries candles stamps envelopes lightbulbs towels socks soap
shampoo coffee beans pasta tomatoes carrots garlic butter yoghurt cheese flour sugar napkins tape glue string nails
screws paint brushes notebooks pencils folders stickers ribbons""".split()
assert len(set(COLORS)) == 20 and len(set(THINGS)) >= 40


TEXTS = "things"  # --texts: 'things' (another thing per number) or 'numbered' (the number is all that differs, as in issue 36)


def item_text(i: int) -> str:
    "Item i (0..799): a distinct thing per number (20 colours x 40 things), or with --texts numbered only another number."
    if TEXTS == "numbered": return f"Memory number {i} written by the load test"
    return f"Item {i}: buy {COLORS[i % 20]} {THINGS[(i // 20) % 40]}"


def worker(path: str, start: int, n: int, ready: str, go: str):
    "One writer process: open the store, say ready, wait for go, add items start..start+n one by one; print its actions as JSON."
    from earmem.memory import MemoryStore
    s = MemoryStore(path, encoder=encoder(False))
    s.add("warm-up probe", kind="observation", id=f"warm-{start}")  # encoder and connection warm before the race
    Path(ready).touch()
    while not Path(go).exists(): time.sleep(0.02)
    acts, errs, t0 = Counter(), [], time.time()
    for i in range(start, start + n):
        try: acts[s.add(item_text(i), kind="fact").action] += 1
        except Exception as e: errs.append(f"{type(e).__name__}: {e}"[:200])
    s.close()
    print(json.dumps(dict(actions=acts, errors=errs, seconds=round(time.time() - t0, 1))))


def tally(path: Path, enc) -> dict:
    from earmem.memory import MemoryStore
    s = MemoryStore(path, encoder=enc)
    recs = [r for r in s.records(include_retracted=True) if r.text != "warm-up probe"]
    s.close()
    st = Counter(r.status for r in recs)
    return dict(items=len(recs), superseded=st.get("superseded", 0), active=st.get("active", 0),
                merged_counts=sum(r.count - 1 for r in recs), examples=[r.text for r in recs if r.status == "superseded"][:3])


def run_concurrency(a) -> dict:
    from earmem.memory import MemoryStore
    out, enc, t0 = {}, encoder(False), time.time()
    pn, tn = max(1, round(400 * a.scale)), max(1, round(150 * a.scale))
    with tempfile.TemporaryDirectory(prefix="truth36x-") as tmp:
        tmp = Path(tmp)
        # processes: 2 x 400 into one folder
        path = tmp / "proc"; MemoryStore(path, encoder=enc).close()
        ready, go = [tmp / f"ready{k}" for k in range(2)], tmp / "go"
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
        procs = [subprocess.Popen([sys.executable, __file__, "--texts", TEXTS, "--_worker", str(path), str(k * pn), str(pn), str(ready[k]), str(go)],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) for k in range(2)]
        while not all(r.exists() for r in ready):
            if any(p.poll() is not None for p in procs): break
            time.sleep(0.1)
        t1 = time.time(); go.touch()
        reports = []
        for p in procs:
            so, se = p.communicate()
            reports.append(json.loads(so.strip().splitlines()[-1]) if so.strip() else {"stderr": se[-2000:]})
        out["processes"] = r = dict(writers=2, each=pn, seconds=round(time.time() - t1, 1), workers=reports, **tally(path, enc))
        print_concurrency({"processes": r, "seconds": round(time.time() - t0, 1)}, partial=True)
        # threads: 4 x 150 into one store object
        path = tmp / "threads"; s = MemoryStore(path, encoder=enc)
        s.add("warm-up probe", kind="observation")
        bar, acts, errs = threading.Barrier(4), Counter(), []
        def run(k):
            bar.wait()
            for i in range(k * tn, k * tn + tn):
                try: acts[s.add(item_text(i), kind="fact").action] += 1
                except Exception as e: errs.append(f"{type(e).__name__}: {e}"[:200])
        th = [threading.Thread(target=run, args=(k,)) for k in range(4)]
        t1 = time.time(); [t.start() for t in th]; [t.join() for t in th]
        s.close()
        out["threads"] = r = dict(writers=4, each=tn, seconds=round(time.time() - t1, 1), actions=dict(acts), errors=errs[:5], **tally(path, enc))
        print_concurrency({"threads": r, "seconds": round(time.time() - t0, 1)}, partial=True)
        # control: the same 800 texts, one writer, one by one
        if not a.no_control:
            path = tmp / "seq"; s = MemoryStore(path, encoder=enc); acts = Counter(); t1 = time.time()
            for i in range(2 * pn): acts[s.add(item_text(i), kind="fact").action] += 1
            s.close()
            out["sequential"] = dict(writers=1, each=2 * pn, seconds=round(time.time() - t1, 1), actions=dict(acts), **tally(path, enc))
    out["seconds"] = round(time.time() - t0, 1)
    return out


def print_concurrency(res: dict, partial: bool = False):
    if partial: print(f"  (so far) {json.dumps(res, default=str)[:600]}", file=sys.stderr, flush=True); return
    print(f"\nCONCURRENCY (bundled MiniLM, distinct texts like {item_text(17)!r}; {res['seconds']} s)")
    print(f"{'run':12s} {'writers':>7s} {'items':>6s} {'superseded':>10s} {'merged':>6s} {'active':>6s} {'s':>6s}  errors / notes")
    for k in ("processes", "threads", "sequential"):
        if k not in res: continue
        r = res[k]
        errs = sum(len(w.get("errors", [])) for w in r.get("workers", [])) + len(r.get("errors", []))
        print(f"{k:12s} {r['writers']:>3d}x{r['each']:<3d} {r['items']:6d} {r['superseded']:10d} {r['merged_counts']:6d} {r['active']:6d} "
              f"{r['seconds']:6.1f}  errors={errs} e.g. superseded {r['examples'][:2]}")


# ------------------------------------------------------------------ main
def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--split", choices=("tune", "heldout", "fresh", "fresh2", "fresh3", "fresh4", "fresh5", "fresh6", "fresh7"), default="tune",
                    help="which half of the corpora (default: tune); 'fresh': the second held-out set (truth_*_fresh.json), a dev set once "
                         "scored; 'fresh2': the third, written after it (truth_*_fresh2.json); 'fresh3': the fourth, chats only "
                         "(truth_chats_fresh3.json, 50 chats written without reading the rules; use with --only chats); 'fresh4': the fifth, "
                         "the same way, after fresh3 was scored (truth_chats_fresh4.json, chats only); 'fresh5': the sixth, the same way "
                         "(truth_chats_fresh5.json, chats only); 'fresh6': the seventh, the same way (truth_chats_fresh6.json, chats only); "
                         "'fresh7': the eighth, the same way (truth_chats_fresh7.json, chats only)")
    ap.add_argument("--judge", choices=("claims", "rules"), default="claims",
                    help="the judge column: judge_claims (18a, the store's default door judge) or judge_change (18's slot rules, the baseline's)")
    ap.add_argument("--hashing", action="store_true", help="pairs and chats with HashingEncoder(64) instead of the bundled MiniLM")
    ap.add_argument("--only", default="pairs,chats,concurrency", help="comma-separated parts to run (default: all three)")
    ap.add_argument("--limit", type=int, default=0, help="only the first N pairs / chats (a smoke test)")
    ap.add_argument("--scale", type=float, default=1.0, help="concurrency counts x this (1: 2 x 400, 4 x 150, control 800)")
    ap.add_argument("--texts", choices=("things", "numbered"), default="things",
                    help="concurrency texts: 'Item 17: buy mustard milk' (default) or 'Memory number 17 written by the load test'")
    ap.add_argument("--no-control", action="store_true", help="skip the one-writer control of the concurrency part")
    ap.add_argument("--json", metavar="OUT", help="write every measurement (with per-pair and per-chat rows) to OUT")
    ap.add_argument("--progress", action="store_true", help="progress lines on stderr")
    ap.add_argument("--dump", metavar="OUT", help="chats: one JSON line per question with its hits (all kinds) as 22a's present_newer received them")
    ap.add_argument("--config", default="{}", help='the chats\' StoreConfig overrides as JSON, e.g. \'{"change_similarity": null}\' (the change order off)')
    ap.add_argument("--_worker", nargs=5, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    global TEXTS; TEXTS = a.texts
    if a._worker:
        p, start, n, ready, go = a._worker
        return worker(p, int(start), int(n), ready, go)
    parts = set(a.only.split(","))
    if a.split in ("fresh3", "fresh4", "fresh5", "fresh6", "fresh7") and "pairs" in parts:
        ap.error(f"--split {a.split} has chats only (truth_chats_{a.split}.json, no pair corpus): --only must not include 'pairs' "
                 f"(got --only {a.only!r}); use --only chats")
    out, t0 = dict(split=a.split, texts=a.texts, encoder="hashing-64" if a.hashing else "bundled MiniLM", started=datetime.now(timezone.utc).isoformat()), time.time()
    enc = encoder(a.hashing) if parts & {"pairs", "chats"} else None
    if "pairs" in parts: out["pairs"] = run_pairs(a, enc); print_pairs(out["pairs"])
    if "chats" in parts: out["chats"] = run_chats(a, enc); print_chats(out["chats"])
    if "concurrency" in parts: out["concurrency"] = run_concurrency(a); print_concurrency(out["concurrency"])
    out["seconds"] = round(time.time() - t0, 1)
    print(f"\nsummary ({out['encoder']}, split {a.split}, {out['seconds']} s):")
    if "pairs" in out:
        A = out["pairs"]["table"]["ALL"]
        print(f"  pairs: judge P={fmt(A['judge']['precision'])} R={fmt(A['judge']['recall'])} hidden={A['judge']['hidden']}; "
              f"door P={fmt(A['door']['precision'])} R={fmt(A['door']['recall'])} hidden={A['door']['hidden']}; "
              f"door+entities P={fmt(A['door_ent']['precision'])} R={fmt(A['door_ent']['recall'])} hidden={A['door_ent']['hidden']}")
    if "chats" in out:
        A = out["chats"]["table"]["ALL"]
        print(f"  chats: current first {A['first']:.0%}, stale above current {A['stale_above']}, corrupted claims {A['corrupted']} of {A['claims']}")
    if "concurrency" in out:
        c = out["concurrency"]
        print("  concurrency: " + ", ".join(f"{k} {c[k]['superseded']} of {c[k]['items']} superseded" for k in ("processes", "threads", "sequential") if k in c))
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1, default=str)); print(f"wrote {a.json}")


if __name__ == "__main__": sys.exit(main())
