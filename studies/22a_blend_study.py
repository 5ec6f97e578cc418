"""Issue 19 (0): what the store's blend of relevance, recency and importance costs and buys, through MemoryStore with its defaults.

Two measurements per config (a JSON object of StoreConfig overrides; `{}` = the defaults):
- stream: LoCoMo's scorable questions asked in turn of each conversation's store (its dialogue turns), k = 5, Recall@5 / Hit@5.
  `--split fit` (the 1,228 questions outside the seed-0 test split: where choices are made), `test` (report once) or `all`.
- fresh: handwritten corrections that the door does not catch (an old statement and a fresher one of the same fact, ten
  unrelated facts beside them): how often the fresher ranks first for a question about it.

    python studies/22a_blend_study.py '{}' '{"recency_weight": 0, "importance_weight": 0}' --split fit
"""
import argparse, json, tempfile, time
from earmem.core import Encoder
from earmem.memory import MemoryStore, StoreConfig
from earmem.memory.rules.hygiene import to_epoch

PAIRS = [("Dana prefers tabs for indentation", "Dana now prefers spaces for indentation", "Does Dana use tabs or spaces?"),
         ("Bob lives in Paris", "Bob moved to Rome last month", "Where does Bob live?"),
         ("The standup is at 10am", "The standup was moved to 3pm", "When is the standup?"),
         ("Alice drinks green tea every morning", "These days Alice drinks coffee in the morning", "What does Alice drink in the morning?"),
         ("Our database is MySQL", "We migrated the database to Postgres", "Which database do we use?"),
         ("Sam is allergic to peanuts", "Sam is allergic to peanuts and shellfish", "What is Sam allergic to?"),
         ("The deploy key is stored in Vault", "The deploy key now lives in AWS Secrets Manager", "Where is the deploy key kept?"),
         ("Priya's team uses Jira for tickets", "Priya's team switched from Jira to Linear", "What ticket tracker does Priya's team use?"),
         ("The office wifi password is sunflower42", "The office wifi password changed to maple77", "What is the office wifi password?"),
         ("Lena works at Acme as a designer", "Lena now works at Globex as a product manager", "Where does Lena work?"),
         ("The build runs on Jenkins", "The build now runs on GitHub Actions", "What runs our build?"),
         ("Marco's favourite food is sushi", "Marco says his favourite food is ramen now", "What is Marco's favourite food?")]
OTHERS = ["Caroline went to a support group on Tuesday", "Melanie painted a sunrise over the lake", "The quarterly report is due Friday",
          "Tom adopted a cat named Pixel", "The team lunch is on Thursday at noon", "Jin is learning to play the cello",
          "The printer on floor 3 is broken", "Rosa ran a half marathon in April", "Our API rate limit is 100 requests per minute",
          "Ben's daughter starts school in September"]


def fresh(cfg: StoreConfig, enc) -> int:
    "How many of PAIRS' fresher statements (2 days old) rank first above the older one (92 days old) and OTHERS."
    now, first = to_epoch("2026-06-01"), 0
    for old, new, q in PAIRS:
        with tempfile.TemporaryDirectory() as d, MemoryStore(d, encoder=enc, config=cfg, clock=lambda: now) as st:
            st.add_many([dict(text=t, kind="fact", timestamp="2026-03-01") for t in OTHERS + [old]])
            st.add(new, "fact", timestamp="2026-05-30")
            texts = [h.text for h in st.search(q, k=5)]
        first += bool(texts) and texts[0] == new
    return first


def stream(cfg: StoreConfig, enc, split: str) -> tuple:
    "(Recall@5, Hit@5, n) of LoCoMo's question stream through each conversation's store (`earmem.cli.store_study.question_stream`)."
    from earmem.experiments.data import load_locomo
    from earmem.cli.store_study import question_stream
    bench = load_locomo()
    qs = [q for q in bench._all_queries() if q.metadata["scorable"]]
    if split != "all":
        fit, test = bench.split(test_size=0.2, seed=0)
        keep = {q.id for q in (fit if split == "fit" else test)}
        qs = [q for q in qs if q.id in keep]
    got = question_stream(bench, enc, cfg, qs)
    return round(got["recall"], 1), round(got["hit"], 1), got["n"]


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("configs", nargs="*", default=["{}"], help="JSON objects of StoreConfig overrides")
    ap.add_argument("--split", choices=("fit", "test", "all"), default="fit")
    ap.add_argument("--skip-stream", action="store_true", help="only the corrections")
    a = ap.parse_args()
    enc = Encoder(progress=False)
    for c in a.configs:
        cfg, t = StoreConfig(**json.loads(c)), time.time()
        out = {"config": json.loads(c), "fresher_first": f"{fresh(cfg, enc)}/{len(PAIRS)}"}
        if not a.skip_stream:
            r, h, n = stream(cfg, enc, a.split)
            out.update(split=a.split, n=n, recall5=r, hit5=h)
        print(json.dumps({**out, "seconds": round(time.time() - t)}), flush=True)
