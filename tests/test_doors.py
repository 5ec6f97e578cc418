"The doors wired together: chat ingestion on HTTP and MCP, the access rules on the served apps, no server folder in a client's error."
import anyio, pytest
pytest.importorskip("fastapi"); pytest.importorskip("mcp")
from fastapi.testclient import TestClient
from earmem.memory.rules.hygiene import HashingEncoder
from earmem.memory.service.users import StorePool
from earmem.serve.access import protect
from earmem.serve.http import create_app, serve_http
from earmem.serve.mcp import build_mcp_server, serve_mcp

CHAT = [{"role": "user", "name": "Dana", "content": "I prefer aisle seats."},
        {"role": "user", "name": "Dana", "content": "The team standup is at 4pm on weekdays."}]

@pytest.fixture
def pool(tmp_path):
    with StorePool(tmp_path / "mem", encoder=HashingEncoder(64)) as p: yield p

def test_http_add_messages_per_user(pool):
    c = TestClient(create_app(pool))
    r = c.post("/memories/messages", json={"user_id": "dana", "messages": CHAT, "session": "s1"})
    assert r.status_code == 201, r.text
    out = r.json()
    assert len(out["episodes"]) == 2 and {m["kind"] for m in out["memories"]} >= {"preference"}
    other = c.get("/memories", params={"user_id": "bo"})
    assert other.status_code == 404 and "no user 'bo'" in other.json()["error"]   # another user sees none of it: bo is not even made
    assert c.get("/memories", params={"user_id": "dana"}).json()["total"] >= 3

def test_mcp_add_messages_tool(pool):
    server = build_mcp_server(pool)
    tool = server._tool_manager.get_tool("add_messages")
    out = anyio.run(tool.run, {"user_id": "dana", "messages": CHAT, "session": "s1", "extract": False})
    assert [e["action"] for e in out["episodes"]] == ["inserted", "inserted"] and out["memories"] == []

def test_protected_app_needs_key_host_and_hides_folder(pool, tmp_path):
    app = protect(create_app(pool), pool, host="127.0.0.1", environ={"EARMEM_API_KEY": "k" * 32})
    c = TestClient(app, base_url="http://127.0.0.1")
    assert c.get("/memories").status_code == 401
    auth = {"Authorization": "Bearer " + "k" * 32}
    assert c.post("/memories", json={"text": "Ana drinks tea", "kind": "fact"}, headers=auth).status_code == 201   # a write makes the user
    r = c.get("/memories/m404", headers=auth)
    assert r.status_code == 404 and str(tmp_path) not in r.text and "<store>" in r.text, r.text
    assert TestClient(app, base_url="http://evil.example").get("/memories", headers=auth).status_code == 421

def test_servers_refuse_open_binds_without_keys(tmp_path, monkeypatch):
    monkeypatch.delenv("EARMEM_API_KEY", raising=False); monkeypatch.delenv("EARMEM_API_KEYS_FILE", raising=False)
    with pytest.raises(ValueError, match="API key is required"): serve_http(tmp_path / "m", host="0.0.0.0")
    with pytest.raises(ValueError, match="API key is required"): serve_mcp(tmp_path / "m", transport="http", host="0.0.0.0")
    assert not (tmp_path / "m").exists()   # refused before anything was opened

def test_stdio_answers_every_malformed_line(tmp_path):
    "Over stdio every line gets an answer: JSON-RPC's -32700 / -32600 for what the SDK cannot read, the SDK's own for the rest."
    import json, os, select, subprocess, sys
    p = subprocess.Popen([sys.executable, "-m", "earmem.serve.mcp", "--store", str(tmp_path / "m")], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    def ask(line):
        p.stdin.write(line + "\n"); p.stdin.flush()
        ready, _, _ = select.select([p.stdout], [], [], 120)
        return json.loads(p.stdout.readline()) if ready else None
    try:
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
        assert ask(json.dumps(init))["id"] == 1
        p.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
        assert ask("{not json")["error"]["code"] == -32700
        assert ask('{"jsonrpc": "2.0", "id": 2}') == {"jsonrpc": "2.0", "id": 2, "error": {"code": -32600, "message": "Invalid request: a request needs a method (a string)"}}
        assert ask("[1, 2]")["error"]["code"] == -32600
        assert ask('{"jsonrpc": "1.0", "id": 6, "method": "ping"}')["id"] == 6
        assert ask('{"jsonrpc": "2.0", "id": 7, "method": "ping"}') == {"jsonrpc": "2.0", "id": 7, "result": {}}
    finally:
        p.kill(); p.wait(30)
