"""Issue 36: why the rules judge misses updates on wordings it was not tuned on — its reasons, tallied per split.

    python studies/36_judge_reasons.py                 # table of reasons for missed updates, per split
    python studies/36_judge_reasons.py --json out.json

For every pair of the truth corpora (tune, heldout, fresh, fresh2), `judge_claims(old, new)` is asked, as the store's
door asks it. Counted per split: update pairs judged update (recall), and for the missed ones the judge's reason,
reduced to its head ("different subjects (ana / ana's flat)" -> "different subjects"). Also counted, as a candidate
rule that was measured and not shipped: "one subject's words are a subset of the other's and no number differs" —
how many missed updates it would catch and how many distinct pairs it would wrongly link.
No encoder, no store: the rules alone, so it runs in seconds.
"""
from __future__ import annotations
import argparse, json, re, sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "nbs/memory/rules/data"
FILES = {"tune": "truth_pairs.json", "heldout": "truth_pairs.json", "fresh": "truth_pairs_fresh.json", "fresh2": "truth_pairs_fresh2.json"}
KIN = {"sister", "brother", "mother", "father", "mom", "dad", "wife", "husband", "son", "daughter", "friend", "boss",
       "partner", "cousin", "aunt", "uncle", "kid", "kids", "parents", "colleague", "roommate", "neighbor", "neighbour"}


def head(why: str) -> str:
    "The head of a judge's reason: the words before a parenthesis, colon or comma."
    return re.split(r"[(:,;]", why, maxsplit=1)[0].strip() or why


def subset_subject(old: str, new: str) -> bool:
    "The candidate rule: one subject's words within the other's (no kin noun added), and no number that differs."
    from earmem.memory.rules.claims import frame_judge
    m = re.search(r"different subjects \((.+) / (.+)\)", frame_judge(old, new)[1])
    if not m: return False
    a, b = (set(re.findall(r"\w+", s.casefold())) for s in m.groups())
    if not (a <= b or b <= a) or (a ^ b) & KIN: return False
    na, nb = (set(re.findall(r"\d+", t)) for t in (old, new))
    return not (na and nb and na != nb)


def tally(split: str) -> dict:
    from earmem.memory.rules.claims import judge_claims
    pairs = [p for p in json.loads((DATA / FILES[split]).read_text()) if p["split"] == split]
    upd = [p for p in pairs if p["expected"] == "update"]
    dist = [p for p in pairs if p["expected"] == "distinct"]
    said = {p["id"]: judge_claims(p["old"], p["new"]) for p in upd + dist}
    missed = [p for p in upd if said[p["id"]].action != "update"]
    return {"split": split, "updates": len(upd), "judged_update": len(upd) - len(missed),
            "recall": round(1 - len(missed) / max(len(upd), 1), 3),
            "distinct_judged_update": sum(said[p["id"]].action == "update" for p in dist),
            "missed_by_reason": dict(Counter(f"{said[p['id']].action}: {head(said[p['id']].reason)}" for p in missed).most_common()),
            "distinct_by_reason": dict(Counter(f"{said[p['id']].action}: {head(said[p['id']].reason)}" for p in dist).most_common(6)),
            "subset_rule_catches": sum(subset_subject(p["old"], p["new"]) for p in missed),
            "subset_rule_links_distinct": sum(subset_subject(p["old"], p["new"]) for p in dist)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--splits", nargs="+", default=list(FILES), choices=list(FILES), help="which splits to tally")
    ap.add_argument("--json", metavar="FILE", help="also write the tallies as JSON to FILE ('-' for stdout only)")
    a = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    rows = [tally(s) for s in a.splits]
    if a.json == "-": print(json.dumps(rows, indent=1)); return 0
    for r in rows:
        print(f"\n{r['split']}: judge recall {r['recall']:.3f} ({r['judged_update']}/{r['updates']}); distinct judged update: "
              f"{r['distinct_judged_update']}; subset-subject rule would catch {r['subset_rule_catches']} missed updates "
              f"and link {r['subset_rule_links_distinct']} distinct pairs")
        print("  missed updates, by the judge's reason:")
        for why, n in list(r["missed_by_reason"].items())[:8]: print(f"    {n:4d}  {why}")
        print("  distinct pairs, by the judge's reason (top 6):")
        for why, n in r["distinct_by_reason"].items(): print(f"    {n:4d}  {why}")
    if a.json: Path(a.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__": raise SystemExit(main())
