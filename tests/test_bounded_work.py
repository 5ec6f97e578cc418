"""Bounded work per request (issue 37): an add_messages call through any door (they share MemoryTools) is refused,
with the limit named and nothing written, when its turns state more claims than `MemoryTools.max_claims` or hold,
with their claims, more characters to encode than `MemoryTools.max_chars`; within the caps it is written. Generated:
claims per turn × turns × sentence length, through the HTTP app behind the guard and through the tool layer."""
import itertools
import pytest
from earmem.memory.store.agent_view import MemoryTools
from test_faults import AUTH, client

NAMES, CITIES = "Ana Ben Cara Dan Eve".split(), "Paris Rome Oslo Lima Kyiv".split()


def name(i: int) -> str:
    "A distinct given name for each i: Ana, Anb, …, letters in base 26."
    out = ""
    while True:
        out, i = "abcdefghijklmnopqrstuvwxyz"[i % 26] + out, i // 26
        if not i: break
    return NAMES[len(out) % 5] + out


def turns(n: int, claims: int, pad: int) -> list:
    "n user turns, each stating `claims` residence facts of distinct people, each sentence `pad` words longer."
    extra = " near the old harbour" * (pad // 4)
    return [{"role": "user", "content": " ".join(f"{name(i * claims + j)} lives in {CITIES[j % 5]}{extra}." for j in range(claims))} for i in range(n)]


CASES = [(n, k, pad) for n, k, pad in itertools.product((1, 40, 300), (1, 4, 12), (0, 30))]


@pytest.mark.parametrize("n,k,pad", CASES)
def test_add_messages_is_bounded_at_the_http_door(tmp_path, monkeypatch, n, k, pad):
    monkeypatch.setattr(MemoryTools, "max_claims", 500)
    monkeypatch.setattr(MemoryTools, "max_chars", 60_000)
    s, c = client(tmp_path)
    before = len(s)
    msgs = turns(n, k, pad)
    r = c.post("/memories/messages", headers=AUTH, json={"messages": msgs})
    chars_turns = sum(len(m["content"]) for m in msgs)
    if n * k > 500:
        assert r.status_code == 422 and f"claims; the limit is 500 a call (nothing was written)" in r.json()["error"], r.text
        assert len(s) == before
    elif r.status_code == 422:        # within the claim cap: refused only for characters, and only when turns + claims exceed them
        assert "characters to encode; the limit is 60,000 a call" in r.json()["error"] and chars_turns > 30_000, (chars_turns, r.text)
        assert len(s) == before
    else:
        assert r.status_code == 201, r.text
        assert len(r.json()["memories"]) == n * k and chars_turns <= 60_000
    s.close()


def test_the_tool_layer_caps_every_door(tmp_path):
    "MCP (stdio and HTTP), the HTTP app and the framework doors call MemoryTools: its caps are theirs."
    from test_faults import store
    s = store(tmp_path); t = MemoryTools(s)
    n = len(s)
    with pytest.raises(ValueError, match="1,200 claims; the limit is 1,000 a call"): t.run("add_messages", {"messages": turns(100, 12, 0)})
    with pytest.raises(ValueError, match="characters to encode; the limit is 300,000 a call"): t.run("add_messages", {"messages": turns(200, 1, 300)})
    assert len(s) == n                                      # nothing written
    assert len(t.run("add_messages", {"messages": turns(20, 2, 0)})["memories"]) == 40
    s.close()
