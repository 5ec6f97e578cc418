"""The fourth held-out chat corpus of issue 36 (nbs/memory/store/data/truth_chats_fresh3.json): its shape and its answer keys.

Checks the file only (no store, no scoring: the split stays unscored until the final measurement) and that
studies/36_truth_baseline.py refuses --split fresh3 (and fresh4) with pairs, naming the argument."""
import importlib.util, json, re
from collections import Counter
from datetime import datetime
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHATS = json.loads((ROOT / "nbs/memory/store/data/truth_chats_fresh3.json").read_text())
QS = [(c, q) for c in CHATS for q in c["questions"]]


def test_ids_split_and_categories():
    assert [c["id"] for c in CHATS] == [f"hc{i:02d}" for i in range(50)]  # unique, hc00..hc49 in order
    assert {c["split"] for c in CHATS} == {"fresh3"} and {c["note"] for c in CHATS} == {"hand"}
    cats = Counter(c["category"] for c in CHATS)
    assert len(cats) >= 10 and min(cats.values()) >= 3, cats


@pytest.mark.parametrize("c", CHATS, ids=lambda c: c["id"])
def test_messages(c):
    ms = c["messages"]
    assert 2 <= len(ms) <= 8 and 1 <= len(c["questions"]) <= 2
    assert {m["role"] for m in ms} <= {"user", "assistant"} and all(m["content"].strip() for m in ms)
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", m["time"]) for m in ms)
    t = [datetime.fromisoformat(m["time"][:-1]) for m in ms]
    assert all(a < b for a, b in zip(t, t[1:])), "times strictly increase"


@pytest.mark.parametrize("c,q", QS, ids=lambda x: x.get("id", "") if isinstance(x, dict) else "")
def test_answer_keys(c, q):
    "current / stale are exact substrings of the messages holding them, and tell the two memories apart."
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


@pytest.mark.parametrize("split", ["fresh3", "fresh4"])
def test_baseline_refuses_chat_only_splits_with_pairs(capsys, split):
    spec = importlib.util.spec_from_file_location("truth36", ROOT / "studies/36_truth_baseline.py")
    mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
    assert mod._corpus(mod.CHATS, split).name == f"truth_chats_{split}.json"
    for only in ("pairs", "pairs,chats,concurrency"):
        with pytest.raises(SystemExit): mod.main(["--split", split, "--only", only])
        assert "--only" in capsys.readouterr().err
