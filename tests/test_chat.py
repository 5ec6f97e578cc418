"Chat ingestion through MemoryStore.add_messages (issue 20): rules offline by default, an LLM extractor over a fake client."
import json
from earmem.memory import MemoryStore, LLMExtractor
from earmem.memory.rules.hygiene import HashingEncoder, StoreConfig

CHAT = [{"role": "user", "name": "Dana", "content": "The team standup is at 4pm. I'm flying to Lisbon tomorrow."},
        {"role": "assistant", "content": "Noted."},
        {"role": "system", "content": "You are helpful."},
        {"role": "user", "name": "Dana", "content": "Actually, it's 3pm not 4pm."}]


def test_rules_store_turns_and_claims_and_the_correction_supersedes(tmp_path):
    with MemoryStore(tmp_path / "s", encoder=HashingEncoder(256), config=StoreConfig(min_relevance=-1.0)) as st:
        r = st.add_messages(CHAT, session="s1", timestamp="2026-03-04T09:00:00Z")
        assert [st.get(e.id).text[:5] for e in r.episodes] == ["Dana:", "assis", "Dana:"]
        assert r.skipped == [(2, "system message")]
        assert [(x.action, t) for x, t, _ in r.memories] == [("inserted", "The team standup is at 4pm"),
                                                             ("inserted", "Dana is flying to Lisbon on 2026-03-05"),
                                                             ("updated", "The team standup is at 3pm")]
        assert st.search("standup time", k=3, kinds=["fact"]).ids[0] == r.memories[2][0].id
        assert json.loads(json.dumps(r.to_json()))["memories"][2]["reason"] == "time 4pm → 3pm"


class _Fake:
    def __init__(self, reply): self.reply, self.calls = reply, 0
    def chat(self, messages): self.calls += 1; return self.reply


def test_llm_extractor_over_a_fake_client(tmp_path):
    reply = json.dumps({"memories": [{"text": "Dana's team standup is at 4pm", "kind": "fact", "entities": ["Dana"], "turn": 0},
                                     {"text": "Dana's team standup is at 3pm", "kind": "correction", "turn": 3, "replace": ["4pm", "3pm"]}]})
    fake = _Fake(reply)
    with MemoryStore(tmp_path / "s", encoder=HashingEncoder(256), config=StoreConfig(min_relevance=-1.0)) as st:
        r = st.add_messages(CHAT, session="s1", extract=LLMExtractor(fake))
        assert fake.calls == 1
        assert [(x.action, k) for x, _, k in r.memories] == [("inserted", "fact"), ("updated", "fact")]
        assert st.get(r.memories[1][0].id).metadata["extracted_by"] == "llm"


# ---- relative dates (issue 36): every phrase class × message times at month ends, a leap day, a year end and a Sunday ----
from datetime import datetime, timedelta, timezone
import pytest
from dateutil.relativedelta import relativedelta
from dateutil.rrule import DAILY, rrule
from hypothesis import given, settings, strategies as hs
from earmem.memory.store.chat import resolve_dates

TIMES = ["2026-01-31T09:00:00", "2026-03-31T23:30:00", "2024-02-29T12:00:00", "2025-12-31T18:00:00", "2026-03-01T08:00:00", "2026-11-30T10:00:00"]
WORDS = {1: "one", 2: "two", 3: "three", 7: "seven", 12: "twelve"}
MONTHS = "January February March April May June July August September October November December".split()
WEEKDAYS = "Monday Tuesday Wednesday Thursday Friday Saturday Sunday".split()
day = lambda d: f"on {d.date().isoformat()}"
ym = lambda d: f"in {d.year:04d}-{d.month:02d}"


def monday(d): return d - timedelta(days=d.weekday())


def expected(w: datetime) -> list:
    "(phrase, resolved) pairs computed from dateutil and rrule, independently of the chapter's code."
    out = [("today", day(w)), ("tomorrow", day(w + relativedelta(days=1))), ("yesterday", day(w - relativedelta(days=1))),
           ("the day before yesterday", day(w - relativedelta(days=2))), ("the day after tomorrow", day(w + relativedelta(days=2))),
           ("last week", f"the week of {monday(w - timedelta(weeks=1)).date()}"), ("next week", f"the week of {monday(w + timedelta(weeks=1)).date()}"),
           ("last month", ym(w - relativedelta(months=1))), ("next month", ym(w + relativedelta(months=1))),
           ("last year", f"in {w.year - 1}"), ("next year", f"in {w.year + 1}"), ("a week ago", day(w - timedelta(days=7)))]
    sat = w - timedelta(days=1) if w.weekday() == 6 else list(rrule(DAILY, dtstart=w, count=7, byweekday=5))[0]
    out.append(("this weekend", f"the weekend of {sat.date()}"))
    for n in (1, 2, 3, 7, 12):
        for said in (str(n), WORDS[n]):
            out += [(f"{said} days ago", day(w - relativedelta(days=n))), (f"{said} weeks ago", day(w - relativedelta(weeks=n))),
                    (f"{said} months ago", ym(w - relativedelta(months=n))), (f"{said} years ago", f"in {w.year - n}"),
                    (f"in {said} days", day(w + relativedelta(days=n))), (f"in {said} months", ym(w + relativedelta(months=n)))]
    for i, wd in enumerate(WEEKDAYS):
        nxt = list(rrule(DAILY, dtstart=w + timedelta(days=1), count=7, byweekday=i))[0]
        last = list(rrule(DAILY, dtstart=w - timedelta(days=7), count=7, byweekday=i))[0]
        out += [(f"next {wd}", day(nxt)), (f"last {wd}", day(last)), (f"on {wd}", day(nxt))]
    for m, name in enumerate(MONTHS, 1):
        coming = [d for d in (datetime(w.year + y, m, 1) for y in (0, 1)) if (d.year, d.month) >= (w.year, w.month)][0]
        after = [d for d in (datetime(w.year + y, m, 1) for y in (0, 1)) if (d.year, d.month) > (w.year, w.month)][0]
        before = [d for d in (datetime(w.year + y, m, 1) for y in (0, -1)) if (d.year, d.month) < (w.year, w.month)][0]
        out += [(f"in {name}", ym(coming)), (f"next {name}", ym(after)), (f"last {name}", ym(before))]
    return out


TABLE = [(t, p, r) for t in TIMES for p, r in expected(datetime.fromisoformat(t))]


@pytest.mark.parametrize("t,phrase,resolved", TABLE, ids=[f"{t[:10]}-{p.replace(' ', '_')}" for t, p, _ in TABLE])
def test_every_relative_date_class_resolves_against_the_message_time(t, phrase, resolved):
    at = datetime.fromisoformat(t).replace(tzinfo=timezone.utc).timestamp()
    assert resolve_dates(f"We will meet the team {phrase}, Peter March said", at) == f"We will meet the team {resolved}, Peter March said"


def test_the_resolved_form_keeps_the_sentence_grammatical():
    at = datetime(2026, 12, 2, 9, tzinfo=timezone.utc).timestamp()
    assert resolve_dates("I was in Rome last week", at) == "I was in Rome the week of 2026-11-23"
    assert resolve_dates("The move was postponed until next month", at) == "The move was postponed until 2027-01"
    assert resolve_dates("We moved here in March and may stay; Peter March came last Friday", at) == \
        "We moved here in March and may stay; Peter March came on 2026-11-27"   # past 'in March' left as said


PHRASES = ["today", "tomorrow", "the day before yesterday", "last week", "next month", "3 days ago", "two weeks ago", "in 5 months",
           "a week ago", "last Friday", "next Monday", "on Sunday", "this weekend", "in March", "next May", "last June", "this April",
           "last year", "in twelve years", "we will", "I'm going", "Peter March", "may", "the", "in", "on", "since", "until",
           "2027", "3", "days", "ago", "'s", ",", "."]
HARMLESS = ["Peter", "March", "May", "may", "week", "month", "year", "days", "weekend", "the", "day", "before", "after", "Monday",
            "3", "2027", "will", "we", "I'm", "room", "Berlin", "moved", "to", "at", "4pm", ",", "."]   # no anchor: in/on/next/last/this/ago/today …
when = hs.floats(min_value=0, max_value=4102444800)   # 1970 – 2100


@settings(max_examples=300, deadline=None)
@given(hs.lists(hs.sampled_from(PHRASES), max_size=12).map(" ".join), when)
def test_resolving_is_idempotent(text, at):
    once = resolve_dates(text, at)
    assert resolve_dates(once, at) == once


@settings(max_examples=300, deadline=None)
@given(hs.one_of(hs.text(max_size=80), hs.lists(hs.sampled_from(PHRASES), max_size=12).map(" ".join)), when)
def test_resolving_never_raises(text, at):
    assert isinstance(resolve_dates(text, at), str)


@settings(max_examples=300, deadline=None)
@given(hs.lists(hs.sampled_from(HARMLESS), max_size=14).map(" ".join), when)
def test_text_without_a_date_phrase_is_untouched(text, at):
    assert resolve_dates(text, at) == text


# ---- "I meant X" corrections (issue 36): the speaker's latest claim with one value of X's type, else stored as said ----
MEANT = [  # (claim, correction, the claim it becomes or None: stored as said)
    ("I live in Berlin.", "Actually I meant Munich", "Dana lives in Munich"),
    ("The standup is at 4pm.", "Sorry, I meant 3pm", "The standup is at 3pm"),
    ("The review is on Monday.", "I meant Tuesday, not Monday", "The review is on 2026-03-10"),   # weekdays as dated
    ("The design review is on Monday.", "Oops, I meant Thursday.", "The design review is on 2026-03-05"),
    ("I have 3 cats.", "Correction: 4", "Dana has 4 cats"),
    ("My manager is Sarah.", "I meant Priya", "Dana's manager is Priya"),
    ("The budget is $400.", "Actually I meant $450", "The budget is $450"),
    ("My flight is on May 3.", "I meant May 5", "Dana's flight is on May 5"),
    ("I live in Berlin and work in Paris.", "Actually I meant Munich", None),      # two places: which one?
    ("I live in Berlin.", "Sorry, I meant 4pm", None),                             # no time to correct
    ("The standup is at 4pm.", "I meant to call you", None),                      # no value at all
    ("The standup is at 4pm on Monday.", "I meant 5pm on Tuesday", None),          # two values: not one slot
    ("I prefer tea.", "Actually I meant Munich", None),                            # nothing of that type
    ("The standup is every Monday.", "I meant Tuesday", "The standup is every Tuesday"),   # a weekday kept as said
]


@pytest.mark.parametrize("claim,fix,becomes", MEANT)
def test_i_meant_corrections_land_only_when_unambiguous(tmp_path, claim, fix, becomes):
    with MemoryStore(tmp_path / "s", encoder=HashingEncoder(256), config=StoreConfig(min_relevance=-1.0)) as st:
        r = st.add_messages([{"role": "user", "name": "Dana", "content": claim}, {"role": "assistant", "content": "Noted."},
                             {"role": "user", "name": "Dana", "content": fix}], session="s", timestamp="2026-03-04T09:00:00Z")
        first, last = r.memories[0], r.memories[-1]
        if becomes is None:
            assert (last[0].action, last[2]) == ("inserted", "correction") and st.get(first[0].id).status == "active"
        else:
            assert (last[0].action, last[1], last[0].supersedes) == ("updated", becomes, first[0].id)
            assert st.get(first[0].id).status == "superseded"


def test_i_meant_corrects_its_own_speaker_only(tmp_path):
    with MemoryStore(tmp_path / "s", encoder=HashingEncoder(256), config=StoreConfig(min_relevance=-1.0)) as st:
        r = st.add_messages([{"role": "user", "name": "Dana", "content": "I live in Berlin."},
                             {"role": "user", "name": "Sam", "content": "Actually I meant Munich"}], timestamp="2026-03-04")
        assert [(x.action, k) for x, _, k in r.memories] == [("inserted", "fact"), ("inserted", "correction")]


def test_the_issue_example_i_meant_munich_supersedes_berlin(tmp_path):
    with MemoryStore(tmp_path / "s", encoder=HashingEncoder(256), config=StoreConfig(min_relevance=-1.0)) as st:
        r = st.add_messages([{"role": "user", "content": "I live in Berlin."}, {"role": "user", "content": "Actually I meant Munich"}])
        assert [(x.action, t) for x, t, _ in r.memories] == [("inserted", "I live in Berlin"), ("updated", "I live in Munich")]
        assert st.get(r.memories[0][0].id).metadata["superseded_by"] == r.memories[1][0].id


# ---- a corrected raw turn never outranks its correction (issue 36) ----
def _corrected_chat(st, first="I live in Berlin.", fix="Actually I meant Munich"):
    return st.add_messages([{"role": "user", "content": first}, {"role": "assistant", "content": "Nice city!"},
                            {"role": "user", "content": fix}], session="s", timestamp="2026-03-04T09:00:00Z")


def test_the_correction_leads_its_raw_turn_with_the_default_encoder(tmp_path):
    with MemoryStore(tmp_path / "s") as st:   # the bundled MiniLM, the default config
        r = _corrected_chat(st)
        claim, turn = r.memories[-1][0].id, r.episodes[0].id
        assert st.get(turn).metadata["corrected_by"] == claim
        hits = st.search("where does the user live", k=3)
        assert hits.ids[0] == claim and hits[0].text == "I live in Munich"
        block = st.inject(hits, budget_tokens=300)
        assert block.index("I live in Munich") < block.index("I live in Berlin")


@pytest.mark.parametrize("first,fix,query", [("The standup is at 4pm.", "Actually, it's 3pm not 4pm.", "standup time"),
                                              ("I live in Berlin.", "Actually I meant Munich", "where do I live"),
                                              ("My flight is on May 3.", "Sorry, I meant May 5", "when is my flight")])
def test_the_correction_precedes_its_raw_turn_in_search_and_inject(tmp_path, first, fix, query):
    with MemoryStore(tmp_path / "s", encoder=HashingEncoder(256), config=StoreConfig(min_relevance=-1.0)) as st:
        r = _corrected_chat(st, first, fix)
        claim, turn = r.memories[-1][0].id, r.episodes[0].id
        assert r.memories[-1][0].action == "updated"
        ids = st.search(query, k=3, kinds=["episode", "fact"]).ids
        assert claim in ids and (turn not in ids or ids.index(claim) < ids.index(turn)), ids
        block = st.inject(st.search(query, k=3), budget_tokens=300)
        assert turn not in block.ids or block.ids.index(claim) < block.ids.index(turn)


# ---- batch ingestion (issue 36): one encode call, one transaction per add_messages, the same outcomes ----
def test_one_add_messages_call_encodes_once_and_commits_once(tmp_path):
    with MemoryStore(tmp_path / "s", encoder=HashingEncoder(256), config=StoreConfig(min_relevance=-1.0)) as st:
        calls = {"encode": 0, "write": 0}
        encode, write = st._encode, st._write
        def counted_encode(*a, **kw): calls["encode"] += 1; return encode(*a, **kw)
        def counted_write(*a, **kw): calls["write"] += 1; return write(*a, **kw)
        st._encode, st._write = counted_encode, counted_write
        chat = [{"role": "user", "name": "Dana", "content": f"The locker of team T{i:03d} is number {i}."} for i in range(50)]
        chat += [{"role": "user", "name": "Dana", "content": "The team standup is at 4pm."},
                 {"role": "user", "name": "Dana", "content": "The team standup moved to 5pm."},      # an update within the call
                 {"role": "user", "name": "Dana", "content": "Actually, it's 6pm not 5pm."}]         # a correction of it
        r = st.add_messages(chat, session="s", timestamp="2026-03-04T09:00:00Z")
        assert calls == {"encode": 1, "write": 1}
        acts = [x.action for x, _, _ in r.memories]
        assert acts[:50] == ["inserted"] * 50 and acts[50:] == ["inserted", "updated", "updated"]
        assert r.memories[-1][1] == "The team standup moved to 6pm" and r.memories[-1][0].supersedes == r.memories[-2][0].id
        assert st.get(r.memories[-3][0].id).status == st.get(r.memories[-2][0].id).status == "superseded"


def test_a_correction_in_a_later_call_lands_on_the_stored_claim_and_marks_its_turn(tmp_path):
    with MemoryStore(tmp_path / "s", encoder=HashingEncoder(256), config=StoreConfig(min_relevance=-1.0)) as st:
        first = st.add_messages([{"role": "user", "content": "The team standup is at 4pm."}], session="a", timestamp="2026-03-04")
        second = st.add_messages([{"role": "user", "content": "Actually, it's 3pm not 4pm."}], session="b", timestamp="2026-03-05")
        (r, text, _), old = second.memories[0], first.memories[0][0].id
        assert (r.action, text, r.supersedes) == ("updated", "The team standup is at 3pm", old)
        assert st.get(first.episodes[0].id).metadata["corrected_by"] == r.id
        ids = st.search("when is the standup", k=3).ids
        assert ids.index(r.id) < ids.index(first.episodes[0].id)


# ---- the structured LLM extractor against a scripted OpenAI-compatible server (issue 36) ----
from earmem.ear.llm import ChatClient
from earmem.toys import StubChatServer

ITEM = lambda text, kind, turn, replace=None: {"text": text, "kind": kind, "entities": ["Dana"], "turn": turn, "replace": replace}


def test_structured_llm_extractor_asks_for_the_schema_and_its_correction_lands(tmp_path):
    reply = json.dumps({"memories": [ITEM("Dana's team standup is at 4pm", "fact", 0), ITEM("Dana's team standup is at 3pm", "correction", 3, ["4pm", "3pm"])]})
    with StubChatServer(reply) as srv, MemoryStore(tmp_path / "s", encoder=HashingEncoder(256), config=StoreConfig(min_relevance=-1.0)) as st:
        ex = LLMExtractor(ChatClient(srv.url, model="m", retries=0), instructions="Only the team's schedule.")
        r = st.add_messages(CHAT, session="s1", extract=ex)
        body = srv.requests[0]["body"]
        assert body["response_format"] == {"type": "json_schema", "json_schema": ex.sender.extra_body["response_format"]["json_schema"]}
        assert body["response_format"]["json_schema"]["strict"] is True and "Only the team's schedule." in body["messages"][0]["content"]
        assert [(x.action, t) for x, t, _ in r.memories] == [("inserted", "Dana's team standup is at 4pm"), ("updated", "Dana's team standup is at 3pm")]
        assert ex.failures == 0


@pytest.mark.parametrize("answer,why", [("{not json", "the reply is not JSON"),
                                        (json.dumps({"memories": [ITEM("x", "rumour", 0)]}), "memories[0].kind"),
                                        (json.dumps({"memories": [{"text": "x", "kind": "fact"}]}), "memories[0]: expected the keys"),
                                        (json.dumps({"facts": []}), 'expected {"memories"'),
                                        ((500, '{"error": "down"}'), "RuntimeError: LLM endpoint"),
                                        ((400, '{"error": "response_format json_schema is not supported"}'), "RuntimeError: LLM endpoint")])
def test_structured_llm_extractor_falls_back_to_the_rules_on_any_failure(tmp_path, answer, why):
    with StubChatServer(answer) as srv, MemoryStore(tmp_path / "s", encoder=HashingEncoder(256), config=StoreConfig(min_relevance=-1.0)) as st:
        ex = LLMExtractor(ChatClient(srv.url, model="m", retries=0))
        r = st.add_messages(CHAT, session="s1", timestamp="2026-03-04T09:00:00Z", extract=ex)
        assert ex.failures == 1 and ex.problem.startswith(why), ex.problem
        assert [t for _, t, _ in r.memories] == ["The team standup is at 4pm", "Dana is flying to Lisbon on 2026-03-05", "The team standup is at 3pm"]


def test_a_reply_that_says_nothing_never_leads_the_turn_it_answers(tmp_path):
    "Issue 36 (22a's replies_after_turns): an assistant 'Congratulations!' that matches the question best is returned below the user turn it answers (brought in from under the floor); a reply with words of its own keeps its rank; off, the reply leads."
    chat = [{"role": "user", "content": "I work at Pied Piper as a site manager."}, {"role": "assistant", "content": "Noted, Pied Piper."},
            {"role": "user", "content": "I just started a new job at Soylent."}, {"role": "assistant", "content": "Congratulations!"},
            {"role": "user", "content": "Any pasta idea?"}, {"role": "assistant", "content": "Congratulations pasta: aglio e olio."}]
    got = {}
    for on in (True, None):
        with MemoryStore(tmp_path / f"s{on}", encoder=HashingEncoder(256), config=StoreConfig(replies_after_turns=on, retriever="dense")) as st:
            st.add_messages(chat, session="s1", timestamp="2026-03-04T09:00:00Z", extract=False)
            got[on] = [h.text for h in st.search("Congratulations!", k=3)]
    assert got[None][0] == "assistant: Congratulations!" and "user: I just started a new job at Soylent." not in got[None]
    assert got[True][:2] == ["user: I just started a new job at Soylent.", "assistant: Congratulations!"]
    assert "assistant: Congratulations pasta: aglio e olio." in got[True]   # words of its own: kept, not moved below 'Any pasta idea?'
    assert "user: Any pasta idea?" not in got[True]


# ---- a turn and a claim drawn from it take one of the k slots (issue 36, 22a `fold_drawn`): generated chats × k × queries ----
import tempfile
from pathlib import Path
SAYINGS = ["My doubles partner at the club is Hiro.", "I work at Zalando in Berlin.", "The kitchen budget is 12,000 euros.",
           "I moved to Leeds and I started at Spotify.", "My flight to Oslo leaves at 07:40.", "Great, thanks!",
           "We booked a cottage in Northumberland.", "Zara goes to Little Acorns nursery.", "I prefer tabs over spaces."]
ASKS = ["Who is my doubles partner?", "Where do I work?", "What is the budget?", "When does my flight leave?", "Where do I live?"]

@settings(max_examples=25, deadline=None)
@given(hs.lists(hs.tuples(hs.sampled_from(["user", "assistant"]), hs.sampled_from(SAYINGS)), min_size=1, max_size=10),
       hs.integers(1, 6), hs.sampled_from(ASKS))
def test_fold_drawn_shows_each_statement_once_and_loses_none(turns, k, ask):
    msgs = [{"role": r, "content": t, "timestamp": f"2026-03-{1 + i:02d}T09:00:00Z"} for i, (r, t) in enumerate(turns)]
    off = dict(min_relevance=-1.0, change_recall=None, replies_after_turns=None)   # the steps that bring in other candidates, off in both arms
    with tempfile.TemporaryDirectory() as d:
        with MemoryStore(Path(d) / "s", encoder=HashingEncoder(64), config=StoreConfig(**off)) as st:
            st.add_messages(msgs, session="s")
            on, every = st.search(ask, k=k), st.search(ask, k=50)
            st.config = StoreConfig(**off, fold_drawn=None)
            plain = st.search(ask, k=k)
            turn_of = {r.id: (r.metadata or {}).get("from_turn") for r in st.records()}
    shown, folded = set(on.ids), {i for h in on for i in h.folded}
    assert not shown & folded and len(folded) == sum(len(h.folded) for h in on)              # each statement once
    assert not [h.id for h in on if turn_of[h.id] in shown]                                   # never a claim beside its turn
    assert all(turn_of[i] == h.id or turn_of[h.id] == i for h in on for i in h.folded)       # only a turn and its own claims fold
    assert set(plain.ids) <= shown | folded                                                   # what the unfolded k showed is shown or named
    assert len(on) == min(k, len(every))                                                      # a folded slot goes to the next candidate
    assert all(not h.folded for h in plain)
