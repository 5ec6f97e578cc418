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
