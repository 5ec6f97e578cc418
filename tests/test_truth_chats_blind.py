"""The held-out chat corpora of issue 36 written without reading the store's rules (nbs/memory/store/data/
truth_chats_fresh3.json, the fourth held-out set, truth_chats_fresh4.json, the fifth, truth_chats_fresh5.json, the sixth, truth_chats_fresh6.json, the seventh, and truth_chats_fresh7.json, the eighth):
their shape and their answer keys.

Checks the files only (no store, no scoring: a split stays unscored until its final measurement) and that
studies/36_truth_baseline.py refuses --split fresh3, fresh4, fresh5, fresh6 or fresh7 with pairs, naming the argument."""
import importlib.util, json, re
from collections import Counter
from datetime import datetime
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PREFIX = {"fresh3": "hc", "fresh4": "hd", "fresh5": "he", "fresh6": "hf", "fresh7": "hg"}  # each corpus's id prefix
CORPORA = {s: json.loads((ROOT / f"nbs/memory/store/data/truth_chats_{s}.json").read_text()) for s in PREFIX}
CHATS = [(s, c) for s, cs in CORPORA.items() for c in cs]
QS = [(c, q) for _, c in CHATS for q in c["questions"]]
CATEGORIES = {"residence_work", "relationship", "possession_state", "preference", "negation", "plan", "number",
              "date_time", "correction", "third_person", "across_sessions", "bare_ack", "distinct_shared"}


@pytest.mark.parametrize("split", list(PREFIX))
def test_ids_split_and_categories(split):
    chats = CORPORA[split]
    assert [c["id"] for c in chats] == [f"{PREFIX[split]}{i:02d}" for i in range(50)]  # unique, in order
    assert {c["split"] for c in chats} == {split} and {c["note"] for c in chats} == {"hand"}
    assert all(set(c) == {"id", "category", "split", "messages", "questions", "note"} for c in chats)
    cats = Counter(c["category"] for c in chats)
    assert set(cats) == CATEGORIES and min(cats.values()) >= 3, cats
    assert sum(len(c["questions"]) for c in chats) >= 50


@pytest.mark.parametrize("split,c", CHATS, ids=lambda x: x["id"] if isinstance(x, dict) else x)
def test_messages(split, c):
    ms = c["messages"]
    assert 2 <= len(ms) <= 8 and 1 <= len(c["questions"]) <= 2
    assert all(set(m) == {"role", "content", "time"} for m in ms)
    assert {m["role"] for m in ms} <= {"user", "assistant"} and all(m["content"].strip() for m in ms)
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", m["time"]) for m in ms)
    t = [datetime.fromisoformat(m["time"][:-1]) for m in ms]
    assert all(a < b for a, b in zip(t, t[1:])), "times strictly increase"
    if split == "fresh4" and c["category"] == "across_sessions":  # days apart, with unrelated chat between
        assert (t[-1] - t[0]).days >= 7 and len(ms) >= 6


@pytest.mark.parametrize("c,q", QS, ids=lambda x: x.get("id", "") if isinstance(x, dict) else "")
def test_answer_keys(c, q):
    "current / stale are exact substrings of the messages holding them, and tell the two memories apart."
    assert set(q) == {"q", "current", "stale"}
    texts = [m["content"] for m in c["messages"]]
    cur, st, f = q["current"], q["stale"], str.casefold
    assert cur and any(cur in m["content"] for m in c["messages"] if m["role"] == "user"), f"{cur!r} in no user message"
    assert f(cur) not in f(q["q"]) and (st is None or f(st) not in f(q["q"])), "the question must not hold the answer"
    if st is None: return
    assert st and any(st in t for t in texts), f"{st!r} in no message"
    assert f(cur) not in f(st) and f(st) not in f(cur)
    assert any(f(st) in f(t) and f(cur) not in f(t) for t in texts), "some message holds the stale fact without the current"
    if c["category"] != "distinct_shared":  # a change: the stale value is said first, the current one later
        first = lambda s: next(i for i, t in enumerate(texts) if f(s) in f(t))
        assert first(st) < first(cur)


@pytest.mark.parametrize("split", list(PREFIX))
def test_baseline_refuses_chat_only_splits_with_pairs(capsys, split):
    spec = importlib.util.spec_from_file_location("truth36", ROOT / "studies/36_truth_baseline.py")
    mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
    assert mod._corpus(mod.CHATS, split).name == f"truth_chats_{split}.json"
    for only in ("pairs", "pairs,chats,concurrency"):
        with pytest.raises(SystemExit): mod.main(["--split", split, "--only", only])
        assert "--only" in capsys.readouterr().err
