"""Issue 36: LoCoMo through the store's defaults must not lose Recall@5 to the truth rules.

Two ways in, one fresh store per conversation (bundled MiniLM, StoreConfig defaults):
  turns  `add_many` of the dialogue turns (chapter 31a's `question_stream`), then `search(question, k=5)`;
  chat   `add_messages` of the turns as a conversation (speaker names, the turns' own times, one session per LoCoMo
         session), so the rules extract claims beside the turn episodes; a hit counts as the turn it came from (an
         episode is its turn; a claim is the turn of its `from_turn` episode), duplicates dropped, then Recall@5/Hit@5.
Also counted (chat): claims stored, claims superseded by a later claim, pairs the door was unsure of (kept both, linked).

    EARMEM_DATA=../shared/data python studies/36_locomo_store.py --split fit            # where choices are made
    EARMEM_DATA=../shared/data python studies/36_locomo_store.py --split test --json out.json   # report once
    EARMEM_DATA=../shared/data python studies/36_locomo_store.py --split fit --only chat --config '{"change_recall": null}'   # a step off
Run it on two checkouts (PYTHONPATH=that checkout) to compare before and after a change.
"""
from __future__ import annotations
import argparse, json, sys, tempfile, time
from collections import Counter
from pathlib import Path


def chat_stream(bench, enc, questions, k: int = 5, progress: bool = False, config=None, dump=None) -> dict:
    from earmem.core import hit_at_k, recall_at_k
    from earmem.memory import MemoryStore
    turns, pairs, counts, t0 = bench.banks("episodic"), [], Counter(), time.time()
    if dump is not None:   # --dump: one JSON line per question, the hits as 22a's present_newer received them (studies/present_tap.py)
        from present_tap import install, snapshot
        tap, out = install(), open(dump, "w")
    banks = list(dict.fromkeys(q.bank for q in questions))
    with tempfile.TemporaryDirectory(prefix="locomo36-") as d:
        for n, b in enumerate(banks):
            ms, gold_of = turns[b], {}
            with MemoryStore(Path(d) / b, encoder=enc, config=config) as st:
                for sess in dict.fromkeys(m.metadata["session"] for m in ms):
                    part = [m for m in ms if m.metadata["session"] == sess]
                    msgs = [{"role": "user", "name": m.metadata["speaker"], "content": m.text.split(": ", 1)[-1], "timestamp": m.timestamp}
                            for m in part]
                    for i in range(0, len(msgs), 1000):   # the door's limit of turns per call
                        res = st.add_messages(msgs[i:i + 1000], session=f"{b}:{sess}")
                        gold_of.update({r.id: m.id for r, m in zip(res.episodes, part[i:i + 1000])})
                        counts["claims"] += len(res.memories)
                        counts["updated"] += sum(r.action == "updated" for r, _, _ in res.memories)
                counts["unsure_linked"] += sum("may_update" in r.metadata for r in st.records())
                for q in (q for q in questions if q.bank == b):
                    ids, found = [], st.search(q.text, k=k)
                    if dump is not None:
                        row = snapshot(tap, q.text, qid=q.id, bank=b, gold=list(q.gold))
                        for h in row["hits"]: h["turn"] = gold_of.get(h["id"]) or gold_of.get(h["metadata"].get("from_turn"))
                        out.write(json.dumps(row) + "\n")
                    for h in found:
                        g = gold_of.get(h.id) or gold_of.get(h.metadata.get("from_turn"))
                        if g is not None and g not in ids: ids.append(g)
                    pairs.append((recall_at_k(ids, q.gold, k), hit_at_k(ids, q.gold, k), hit_at_k(ids, q.gold, 1)))
            if progress: print(f"  … {n + 1}/{len(banks)} conversations, {time.time() - t0:.0f} s", file=sys.stderr)
    if dump is not None: out.close()
    r = [p[0] for p in pairs]; h = [p[1] for p in pairs]; h1 = [p[2] for p in pairs]
    return dict(recall=100 * sum(r) / len(r), hit=100 * sum(h) / len(h), hit1=round(100 * sum(h1) / len(h1), 1), n=len(pairs), **counts, seconds=round(time.time() - t0))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--split", choices=("fit", "test", "all"), default="fit", help="LoCoMo questions: fit (outside the seed-0 test split), test, all")
    ap.add_argument("--only", default="turns,chat", help="comma-separated: turns, chat")
    ap.add_argument("--json", metavar="OUT", help="write the figures to OUT")
    ap.add_argument("--progress", action="store_true")
    ap.add_argument("--dump", metavar="OUT", help="chat: one JSON line per question with its hits as 22a's present_newer received them (id, turn, text, times, cosines)")
    ap.add_argument("--config", default="{}", help='the chat stores\' StoreConfig overrides as JSON, e.g. \'{"change_recall": null}\' (default: the defaults)')
    a = ap.parse_args(argv)
    from earmem.core import Encoder
    from earmem.experiments.data import load_locomo
    from earmem.memory import StoreConfig
    from earmem.cli.store_study import question_stream
    bench, enc = load_locomo(), Encoder(progress=False)
    qs = [q for q in bench._all_queries() if q.metadata["scorable"]]
    if a.split != "all":
        fit, test = bench.split(test_size=0.2, seed=0)
        keep = {q.id for q in (fit if a.split == "fit" else test)}
        qs = [q for q in qs if q.id in keep]
    out = {"split": a.split}
    if "turns" in a.only:
        t = time.time(); got = question_stream(bench, enc, StoreConfig(), qs)
        out["turns"] = dict(recall=round(got["recall"], 1), hit=round(got["hit"], 1), n=got["n"], seconds=round(time.time() - t))
        print(json.dumps({"turns": out["turns"]}), flush=True)
    if "chat" in a.only:
        got = chat_stream(bench, enc, qs, progress=a.progress, config=StoreConfig(**json.loads(a.config)), dump=a.dump)
        out["chat"] = {**got, "recall": round(got["recall"], 1), "hit": round(got["hit"], 1)}
        print(json.dumps({"chat": out["chat"]}), flush=True)
    if a.json: Path(a.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
