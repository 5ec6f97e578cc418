"""The fifth held-out chat corpus of issue 36 (nbs/memory/store/data/truth_chats_fresh4.json): its shape and its answer keys.

Written by hand without reading the store's rules or ranking code. Checks the file only (no store, no scoring:
the split stays unscored until the final measurement)."""
import json, re
from collections import Counter
from datetime import datetime
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHATS = json.loads((ROOT / "nbs/memory/store/data/truth_chats_fresh4.json").read_text())
QS = [(c, q) for c in CHATS for q in c["questions"]]
CATEGORIES = {"residence_work", "relationship", "possession_state", "preference", "negation", "plan", "number",
              "date_time", "correction", "third_person", "across_sessions", "bare_ack", "distinct_shared"}


def test_ids_split_and_categories():
    assert [c["id"] for c in CHATS] == [f"hd{i:02d}" for i in range(50)]  # unique, hd00..hd49 in order
    assert {c["split"] for c in CHATS} == {"fresh4"} and {c["note"] for c in CHATS} == {"hand"}
    assert all(set(c) == {"id", "category", "split", "messages", "questions", "note"} for c in CHATS)
    cats = Counter(c["category"] for c in CHATS)
    assert set(cats) == CATEGORIES and min(cats.values()) >= 3, cats
    assert len(CHATS) >= 50 and len(QS) >= 50


@pytest.mark.parametrize("c", CHATS, ids=lambda c: c["id"])
def test_messages(c):
    ms = c["messages"]
    assert 2 <= len(ms) <= 8 and 1 <= len(c["questions"]) <= 2
    assert all(set(m) == {"role", "content", "time"} for m in ms)
    assert {m["role"] for m in ms} <= {"user", "assistant"} and all(m["content"].strip() for m in ms)
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", m["time"]) for m in ms)
    t = [datetime.fromisoformat(m["time"][:-1]) for m in ms]
    assert all(a < b for a, b in zip(t, t[1:])), "times strictly increase"
    if c["category"] == "across_sessions":  # days apart, with unrelated chat between
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
