"Issue 20/21 polish: kind optional on every door, bounded unauthenticated feedback, idempotent feedback, read-only named, migrate keeps the probe."
import anyio, json, pytest
pytest.importorskip("fastapi"); pytest.importorskip("mcp")
from fastapi.testclient import TestClient
from earmem.memory.agent import MemoryTools
from earmem.memory.hygiene import HashingEncoder
from earmem.memory.store import MemoryStore
from earmem.memory.users import StorePool
from earmem.serve.http import create_app
from earmem.serve.mcp import build_mcp_server

@pytest.fixture
def pool(tmp_path):
    with StorePool(tmp_path / "mem", encoder=HashingEncoder(64)) as p: yield p

def test_store_and_tools_add_without_kind(tmp_path):
    with MemoryStore(tmp_path / "s", encoder=HashingEncoder(64)) as s:
        assert s.get(s.add("Actually, the standup is at 3pm not 4pm").id).kind == "correction"
        t = MemoryTools(s)
        out = t.call("add", {"text": "I prefer aisle seats"})
        assert "error" not in out and s.get(out["id"]).kind == "preference"
        assert t.call("add", {"kind": "fact"}) == {"error": "text: is required by add"}

def test_http_add_without_kind(pool):
    c = TestClient(create_app(pool))
    r = c.post("/memories", json={"user_id": "dana", "text": "The team standup is at 4pm on weekdays"})
    assert r.status_code == 201, r.text
    assert c.get(f"/memories/{r.json()['id']}", params={"user_id": "dana"}).json()["kind"] == "fact"

def test_mcp_add_without_kind(pool):
    server = build_mcp_server(pool)
    tool = server._tool_manager.get_tool("add")
    assert tool.parameters["required"] == ["text"]
    out = anyio.run(tool.run, {"user_id": "dana", "text": "Looked through the deploy logs"})
    assert pool.store("dana").get(out["id"]).kind == "observation"
