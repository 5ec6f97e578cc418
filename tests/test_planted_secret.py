"A planted PostgreSQL password searched for in the output of every door (repr, stats, errors, CLI, HTTP, MCP, server log): 0 hits."
import anyio, contextlib, io, json, os, socket, subprocess, sys, time, uuid, urllib.request
import pytest
pytest.importorskip("fastapi"); pytest.importorskip("mcp")
from urllib.parse import urlsplit, urlunsplit
from fastapi.testclient import TestClient
from earmem.memory.rules.hygiene import HashingEncoder
from earmem.memory.store import MemoryStore
from earmem.memory.service.users import StorePool
from earmem.serve.http import create_app
from earmem.serve.mcp import build_mcp_server

SECRET = "PLANTED7x"   # the part every planted password contains

def planted(url: str) -> list:
    "The server's URL with a password planted in each form libpq accepts: userinfo, '@' inside it (raw and %40), ?password=."
    u = urlsplit(url); user, host = (u.username or "postgres"), (u.hostname or "") + (f":{u.port}" if u.port else "")
    q = u.query + "&" if u.query else ""
    base = lambda netloc, query: urlunsplit((u.scheme, netloc, u.path, query, ""))
    return [base(f"{user}:Zq9{SECRET}@{host}", u.query), base(f"{user}:Zq9@{SECRET}@{host}", u.query),
            base(f"{user}:Zq9%40{SECRET}@{host}", u.query), base(f"{user}@{host}", q + f"password=Zq9{SECRET}")]

def closed_port() -> int:
    with socket.socket() as s: s.bind(("127.0.0.1", 0)); return s.getsockname()[1]

def hits(*outputs) -> list:
    return [o for o in outputs if SECRET in str(o)]

@pytest.fixture
def urls(pg_url):
    return planted(pg_url)

def test_python_doors(urls):
    for url in urls:
        ns = "sec" + uuid.uuid4().hex[:8]
        with MemoryStore(url, encoder=HashingEncoder(64), namespace=ns) as s:
            s.add("Dana chose Postgres", "decision")
            with pytest.raises(KeyError) as e: s.get("m404")
            assert hits(repr(s), s.stats(), str(s.path), e.value) == [], url

def test_failing_connection_errors():
    for bad in planted(f"postgresql://postgres@127.0.0.1:{closed_port()}/postgres?connect_timeout=2"):
        with pytest.raises(Exception) as e: MemoryStore(bad, encoder=HashingEncoder(64), namespace="nobody")
        chain, x = [], e.value
        while x is not None: chain.append(repr(x) + str(x)); x = x.__cause__ or (None if x.__suppress_context__ else x.__context__)  # what a traceback shows
        assert hits(*chain) == [], chain

def test_cli_stats(urls):
    from earmem.cli import main
    for url in urls:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            main(["memory", "stats", "--store", url, "--user", "cli" + uuid.uuid4().hex[:6], "--encoder", "hashing-64"])
            main(["memory", "get", "m404", "--store", url, "--encoder", "hashing-64"])
        assert hits(out.getvalue(), err.getvalue()) == [], (out.getvalue(), err.getvalue())

async def _answer(tool, args):
    "What an MCP tool answers: its result, or the text of the error it raises (what the host is sent, flagged is_error)."
    try: return await tool.run(args)
    except Exception as e: return str(e)

def test_http_and_mcp(urls):
    for url in urls:
        with StorePool(url, encoder=HashingEncoder(64)) as pool:
            c = TestClient(create_app(pool))
            outs = [c.get("/stats", params={"user_id": "web"}).text, c.get("/memories/m404", params={"user_id": "web"}).text,
                    c.get("/nowhere").text, c.get("/users").text]
            server = build_mcp_server(pool)
            stats, get = (server._tool_manager.get_tool(n) for n in ("stats", "get"))
            outs += [anyio.run(_answer, stats, {"user_id": "web"}), anyio.run(_answer, get, {"user_id": "web", "id": "m404"})]
            assert outs[-1].startswith('{"error": "user_id: '), outs[-1]   # the error was read, not lost
            assert hits(*outs) == [], outs

@pytest.mark.slow  # four `earmem serve http` processes
def test_server_log(urls, tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("EARMEM_API_KEY", "EARMEM_API_KEYS_FILE")}
    for i, url in enumerate(urls):
        with socket.socket() as s: s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]
        log = tmp_path / f"server{i}.log"
        p = subprocess.Popen([sys.executable, "-m", "earmem.cli", "serve", "http", "--store", url, "--port", str(port)], env=env,
                             stdout=log.open("w"), stderr=subprocess.STDOUT)
        try:
            for _ in range(300):
                try: urllib.request.urlopen(f"http://127.0.0.1:{port}/stats?user_id=log", timeout=2).read(); break
                except OSError: time.sleep(0.1)
            with contextlib.suppress(OSError): urllib.request.urlopen(f"http://127.0.0.1:{port}/memories/m404?user_id=log", timeout=5)
        finally: p.terminate(); p.wait(10)
        text = log.read_text()
        assert text.strip() and SECRET not in text, text
