"""The command line answers at once: importing `earmem.cli` and running the memory commands that need no encoding
do not import torch, sentence-transformers, transformers or datasets (checked by value in fresh processes, not timed);
report names follow what ran; `serve http` says where it listens and logs each request."""
import json
import subprocess
import sys

import pytest

HEAVY = ("torch", "sentence_transformers", "transformers", "datasets")


def heavy_after(code: str) -> list:
    "The heavy modules loaded after running `code` in a fresh interpreter."
    probe = f"{code}\nimport sys; print(sorted(m for m in {HEAVY!r} if m in sys.modules))"
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return json.loads(r.stdout.strip().splitlines()[-1].replace("'", '"'))


def test_import_cli_is_light():
    assert heavy_after("import earmem.cli") == []


def test_help_is_light():
    assert heavy_after("from earmem.cli import main\ntry: main(['--help'])\nexcept SystemExit: pass") == []
    assert heavy_after("from earmem.cli import main\nmain(['memory', '--help'])") == []


def test_memory_commands_without_encoding_are_light(tmp_path):
    store = tmp_path / "mem"
    from earmem.cli import main
    assert main(["memory", "add", "Dana chose Postgres", "--kind", "decision", "-s", str(store), "--encoder", "hashing"]) == 0
    for cmd in (["stats"], ["history", "m1"], ["delete", "m1"]):
        code = f"from earmem.cli import main\nassert main(['memory', *{cmd!r}, '-s', {str(store)!r}]) == 0"
        assert heavy_after(code) == [], cmd


def test_reproduce_help_still_lists_methods(capsys):
    from earmem.cli import main
    from earmem.experiments.evaluation import METHODS
    assert main(["reproduce", "locomo", "method", "--help"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in METHODS)


def test_report_names_differ_by_what_ran(tmp_path):
    from earmem.experiments.tables import report_stem, unused_path
    names = {report_stem("locomo"), report_stem("locomo", preset="tuned"), report_stem("locomo", overrides={"lr": 0.001}),
             report_stem("locomo", methods="table2"), report_stem("locomo", preset="tuned", overrides={"lr": 0.001})}
    assert len(names) == 5 and report_stem("locomo") == "locomo-tables-seed0"
    (tmp_path / "r.json").write_text("{}")
    assert unused_path(tmp_path / "r.json") == tmp_path / "r-2.json"
    assert unused_path(tmp_path / "r.json", force=True) == tmp_path / "r.json"


def test_search_leaves_access_times_alone_unless_asked(tmp_path, capsys):
    "`earmem memory search` reads, as `MemoryStore.search` does by default; `--touch` refreshes the hits' last access."
    from earmem.cli import main
    from earmem.memory.store import MemoryStore
    store = str(tmp_path / "mem")
    assert main(["memory", "add", "Dana chose Postgres", "--kind", "decision", "-s", store, "--encoder", "hashing",
                 "--timestamp", "2024-01-02"]) == 0
    accessed = lambda: MemoryStore(store, readonly=True).get("m1").last_access
    before = accessed()
    for flags in ([], ["--no-touch"]):
        assert main(["memory", "search", "what did Dana choose", "-s", store, *flags]) == 0
        assert accessed() == before, flags
    assert main(["memory", "search", "what did Dana choose", "-s", store, "--touch"]) == 0
    assert accessed() > before


@pytest.mark.parametrize("server", ["http", "mcp"])
def test_refusing_a_bind_beyond_loopback_imports_nothing_heavy(tmp_path, server):
    "No key, --host 0.0.0.0: refused at once, before torch & co are imported (the refusal needs no model)."
    transport = ["--transport", "http"] if server == "mcp" else []
    code = ("import os\nfor k in ('EARMEM_API_KEY', 'EARMEM_API_KEYS_FILE'): os.environ.pop(k, None)\n"
            "from earmem.cli import main\n"
            f"assert main(['serve', {server!r}, *{transport!r}, '--store', {str(tmp_path / 'm')!r}, '--host', '0.0.0.0']) == 2")
    assert heavy_after(code) == []


def _stderr_until(p, word: str) -> list:
    "The server's stderr lines up to the first holding `word` (failing if it stops first)."
    lines = []
    while not any(word in line for line in lines):
        line = p.stderr.readline()
        assert line, f"the server stopped: {lines}"
        lines.append(line)
    return lines


@pytest.mark.parametrize("server", ["http", "mcp"])
def test_servers_are_ready_when_they_say_so(tmp_path, server):
    """`earmem serve http` / `serve mcp --transport http` on a MiniLM store: says what it loads, loads it, then 'listening';
    the first search is answered within 2 s of that line (the issue's target; the model is not loaded on the first call)."""
    import os, socket, time, urllib.request
    from earmem.memory.store import MemoryStore
    MemoryStore(tmp_path / "m").close()          # the bundled MiniLM, not loaded until a server needs it
    with socket.socket() as s: s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]
    args = [sys.executable, "-m", "earmem.cli", "serve", server, "--store", str(tmp_path / "m"), "--port", str(port)]
    if server == "mcp": args += ["--transport", "http"]
    env = {k: v for k, v in os.environ.items() if k not in ("EARMEM_API_KEY", "EARMEM_API_KEYS_FILE")}
    p = subprocess.Popen(args, stderr=subprocess.PIPE, text=True, env=env)
    try:
        lines = _stderr_until(p, "listening")
        ready = time.perf_counter()
        if server == "http":
            req = urllib.request.Request(f"http://127.0.0.1:{port}/search", data=b'{"query": "when is the standup?"}',
                                         headers={"content-type": "application/json"})
            answer = json.loads(urllib.request.urlopen(req, timeout=60).read())
        else:
            import anyio
            from mcp.client import Client
            async def go():
                async with Client(f"http://127.0.0.1:{port}/mcp") as c:
                    return json.loads((await c.call_tool("search", {"query": "when is the standup?"})).content[0].text)
            answer = anyio.run(go)
        waited = time.perf_counter() - ready
    finally:
        p.terminate(); p.wait(30)
    said = "".join(lines)
    assert said.index("loading the encoder") < said.index("encoder loaded in") < said.index("listening on http://127.0.0.1:"), said
    assert "about" in said.split("loading the encoder", 1)[1].splitlines()[0], said      # with an estimate
    assert answer["hits"] == [] and waited < 2.0, (answer, waited)


def test_mcp_over_stdio_says_when_it_is_ready(tmp_path):
    """`earmem serve mcp` (stdio) on a MiniLM store: loads the model, then says 'ready' on stderr (stdout is the protocol's);
    an initialize and a first search sent after that line are answered within 2 s."""
    import os, time
    from earmem.memory.store import MemoryStore
    MemoryStore(tmp_path / "m").close()
    env = {k: v for k, v in os.environ.items() if k not in ("EARMEM_API_KEY", "EARMEM_API_KEYS_FILE")}
    p = subprocess.Popen([sys.executable, "-m", "earmem.cli", "serve", "mcp", "--store", str(tmp_path / "m")], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        lines = _stderr_until(p, "ready")
        ready = time.perf_counter()
        send = lambda msg: (p.stdin.write(json.dumps(msg) + "\n"), p.stdin.flush())
        send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                                                                             "clientInfo": {"name": "test", "version": "0"}}})
        init = json.loads(p.stdout.readline())
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "search", "arguments": {"query": "when is the standup?"}}})
        found = json.loads(p.stdout.readline())
        waited = time.perf_counter() - ready
    finally:
        p.kill(); p.wait(30)
    said = "".join(lines)
    assert said.index("encoder loaded in") < said.index("ready: MCP over stdio for every user of"), said
    assert init["result"]["serverInfo"]["name"] and json.loads(found["result"]["content"][0]["text"])["hits"] == [], found
    assert waited < 2.0, waited
