"Updates that land, identifiers that stay apart: the round-3 judge through MemoryStore (issues 20 and 21)."
import threading
import pytest
from earmem.memory.rules.hygiene import HashingEncoder, StoreConfig, check_entities
from earmem.memory.store import MemoryStore
from earmem.memory.rules.updates import judge_change

CFG = StoreConfig(conflict_similarity=0.25, min_relevance=0.0)  # the hashing encoder's cosines are lower than MiniLM's: widen the related band


def test_a_sure_update_lands_and_an_unsure_one_keeps_both_newest_first(tmp_path):
    "Issue 36: 'the team standup' / 'the standup' may be one meeting or two: both stay, linked, the newer leads; a sure update supersedes."
    with MemoryStore(tmp_path / "s", encoder=HashingEncoder(256), config=CFG) as st:
        a = st.add("The team standup is at 4pm", "fact", entities=["standup"])
        b = st.add("The standup moved to 3pm", "fact", entities=["standup"])
        assert (b.action, b.supersedes) == ("inserted", None) and st.get(b.id).metadata["may_update"] == a.id
        hits = st.search("when is the team standup?", k=5)
        assert hits.ids[:2] == [b.id, a.id] and [(c["newer"], c["older"]) for c in hits.conflicts] == [(b.id, a.id)]
        c = st.add("The standup moved to 2pm", "fact", entities=["standup"])
        assert (c.action, c.supersedes, c.reason) == ("updated", b.id, "time 3pm → 2pm")
        assert [st.get(m).status for m in (a.id, b.id, c.id)] == ["active", "superseded", "active"]


def test_update_of_a_superseded_memory_is_refused(tmp_path):
    with MemoryStore(tmp_path / "s", encoder=HashingEncoder(256), config=CFG) as st:
        a = st.add("The standup is at 4pm", "fact", entities=["standup"])
        b = st.add("The standup moved to 3pm", "fact", entities=["standup"])
        with pytest.raises(ValueError, match=f"memory '{a.id}' is superseded by '{b.id}'"):
            st.update(a.id, text="The standup is at 5pm")
        assert st.get(a.id).text == "The standup is at 4pm"
        assert st.update(b.id, importance=0.9).importance == 0.9


def test_identifiers_are_identity_with_two_concurrent_writers(tmp_path):
    MemoryStore(tmp_path / "s", encoder=HashingEncoder(256), config=CFG).close()
    errors = []
    def writer(start):
        try:
            with MemoryStore(tmp_path / "s", encoder=HashingEncoder(256)) as st:
                for n in range(start, start + 30, 2):
                    st.add(f"Invoice #{1000 + n} from Globex is $1,200", "fact", entities=["Globex"])
                    st.add(f"Room {100 + n} has a broken projector", "fact", entities=["projector"])
        except Exception as e: errors.append(e)
    threads = [threading.Thread(target=writer, args=(s,)) for s in (0, 1)]
    for t in threads: t.start()
    for t in threads: t.join()
    assert errors == []
    with MemoryStore(tmp_path / "s") as st:
        assert st.stats()["superseded"] == 0 and len(st) == 60
        assert sorted(r.action for r in st.add_many(["Invoice #1000 from Globex is $1,250"], kind="fact", entities=["Globex"])) == ["updated"]


def test_judge_depends_only_on_the_pair():
    pairs = [("Invoice #1042 is $1,200", "Invoice #1043 is $1,200"), ("The team standup is at 4pm", "The standup moved to 3pm"),
             ("Room 12 has the projector", "Room 12 has no projector")]
    first = [judge_change(o, n) for o, n in pairs]
    again = [judge_change(o, n) for o, n in reversed(pairs)][::-1]
    assert first == again and [d.action for d in first] == ["distinct", "update", "update"]


def test_a_few_thousand_entities_are_checked_and_searched(tmp_path):
    many = [f"Entity {i}" for i in range(4000)]
    assert check_entities(many + [e.lower() for e in many]) == tuple(many)
    with MemoryStore(tmp_path / "s", encoder=HashingEncoder(64), config=StoreConfig(min_relevance=-1.0)) as st:
        st.add_many([dict(text="Dana chose Postgres", kind="decision", entities=["Dana"]),
                     dict(text="Sam chose MySQL", kind="decision", entities=["Sam"])])
        assert st.search("which database?", entities=many + ["dana"], k=5).ids == ["m1"]
