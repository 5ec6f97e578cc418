"The Explorer in the store (issue 39, chapter 23dx): the exploratory slot, its counts from the feedback log, and forgetting."
import pytest
from earmem.memory import MemoryStore, StoreConfig
from earmem.memory.rules.hygiene import HashingEncoder

FACTS = [f"{p} has a {a} called {n}" for p, a, n in [("Ann", "cat", "Tom"), ("Ann", "dog", "Rex"), ("Bob", "cat", "Kit"),
         ("Bob", "parrot", "Polly"), ("Cleo", "horse", "Star"), ("Ann", "hamster", "Bit"), ("Dev", "fish", "Nemo"),
         ("Eve", "snake", "Sid")]]
QUESTIONS = ["which pets does Ann have?", "who owns a cat?", "what is the horse called?", "Bob's birds"]


def pets(path, **cfg):
    st = MemoryStore(path, encoder=HashingEncoder(64), config=StoreConfig(min_relevance=-1.0, recency_weight=0.0, **cfg))
    st.add_many([{"text": t, "kind": "fact"} for t in FACTS])
    return st


def teach(st, n=12, **search):
    for i in range(n):
        h = st.search(QUESTIONS[i % 4], k=3, **search)
        st.feedback(h, cited=[x.id for x in h if "Ann" in x.text][:1])


def test_off_by_default_and_marked_when_on(tmp_path):
    assert StoreConfig().explore_slots == 0
    with pets(tmp_path / "s") as st:
        plain = st.search(QUESTIONS[0], k=3)
        assert not any(h.explored for h in plain) and "[explored" not in plain.explain()
        hits = st.search(QUESTIONS[0], k=3, explore=True)
        assert hits.ids[:2] == plain.ids[:2] and [h.explored for h in hits] == [False, False, True]
        assert hits[2].id not in plain.ids and "[explored" in hits[2].explain()
        two = st.search(QUESTIONS[0], k=3, explore=2)
        assert [h.explored for h in two] == [False, True, True]
        assert not any(h.explored for h in st.search(QUESTIONS[0], k=1, explore=True))   # the one hit stays ranked


def test_config_and_argument(tmp_path):
    with pets(tmp_path / "s", explore_slots=1) as st:
        assert st.search(QUESTIONS[0], k=3)[2].explored
        assert not st.search(QUESTIONS[0], k=3, explore=False)[2].explored
    assert StoreConfig.from_json(StoreConfig(explore_slots=2).to_json()).explore_slots == 2
    assert StoreConfig.from_json({}).explore_slots == 0   # a manifest written before issue 39
    with pytest.raises(ValueError, match="explore_slots"): StoreConfig(explore_slots=-1)
    with pytest.raises(ValueError, match="explore"), pets(tmp_path / "t") as st: st.search(QUESTIONS[0], k=3, explore=-2)


def test_feedback_on_the_explored_hit_is_logged_and_counted(tmp_path):
    with pets(tmp_path / "s") as st:
        hits = st.search(QUESTIONS[0], k=3, explore=True)
        out = st.feedback(hits, cited=[hits[2].id])
        assert out["labels"][hits[2].id] == 1 and st.stats()["feedback"] == 1
        assert st._exposure()[hits[2].id] == [1, 1] and st._exposure()[hits[0].id] == [1, -1]
        assert hits.positions[2] == hits.candidates.ids.index(hits[2].id)   # the slate the learner sees holds the explored slot


def test_counts_are_the_log(tmp_path):
    with pets(tmp_path / "s", explore_slots=1) as st:
        teach(st)
        seen = st._exposure()
        assert sum(n for n, _ in seen.values()) == 3 * 12 and len(seen) == len(FACTS)   # exploration reached every memory
    with MemoryStore(tmp_path / "s", encoder=HashingEncoder(64)) as back:
        assert back._exposure() == seen    # reopened: read again from the log


def test_forgetting_erases_the_counts(tmp_path):
    with pets(tmp_path / "s", explore_slots=1) as st:
        teach(st)
        gone = max(st._exposure(), key=lambda m: st._exposure()[m][0])
        st.delete(gone)
        after = st._exposure()
        assert gone not in after and sum(n for n, _ in after.values()) == 3 * st.stats()["feedback"]
        assert all(gone not in h.ids for h in [st.search(q, k=3) for q in QUESTIONS])
        st.clear()
        assert st._exposure() == {}


def test_another_process_forgets(tmp_path):
    with pets(tmp_path / "s", explore_slots=1) as st:
        teach(st)
        gone = max(st._exposure(), key=lambda m: st._exposure()[m][0])
        with MemoryStore(tmp_path / "s", encoder=HashingEncoder(64)) as other: other.delete(gone)
        st.search(QUESTIONS[0], k=3)             # catches up with the other process's commit
        assert gone not in st._exposure()
        assert sum(n for n, _ in st._exposure().values()) == 3 * st.stats()["feedback"]
