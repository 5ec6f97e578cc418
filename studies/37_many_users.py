"""Many users in turn through a real `earmem serve http` or `earmem serve mcp --transport http` under a common descriptor limit (issue 37).

Starts the HTTP server (or the MCP server, driven by the official MCP client over streamable HTTP: `--door mcp`) as a child process with `ulimit -n` set (default 1024) on a fresh store folder, then adds one
memory for each of N users in turn over loopback (and searches each 10th user back), and reports the server's open
file descriptors and resident memory along the way, its bound on open stores (EARMEM_MAX_OPEN_USERS), failures and
the rate. The store is created with the model-free test encoder so the run measures the server, not the encoder.
Usage: python studies/37_many_users.py [--door http|mcp] [--users 10000] [--nofile 1024] [--every 1000] [--json out.json]
"""
import argparse, json, os, resource, socket, subprocess, sys, tempfile, time
import urllib.request
from pathlib import Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0)); return s.getsockname()[1]


def _parsed(raw: bytes):
    try: return json.loads(raw or b"null")
    except ValueError: return raw.decode(errors="replace")[:200]   # a server out of descriptors may answer plain text

def _call(url: str, body: dict | None = None, method: str = "POST"):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r: return r.status, _parsed(r.read())
    except urllib.error.HTTPError as e: return e.code, _parsed(e.read())


def _fds(pid: int) -> int: return len(os.listdir(f"/proc/{pid}/fd"))


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"): return int(line.split()[1]) / 1024
    return float("nan")


def _mcp_run(url: str, users: int, step):
    "Drive `step` for each user through one session of the official MCP client; returns the first user's search at the end."
    import anyio
    from mcp.client import Client
    async def go():
        async with Client(url) as c:
            async def tool(name, args):
                r = await c.call_tool(name, args)
                out = _parsed(r.content[0].text.encode()) if r.content else None
                return (400 if r.is_error else 201 if name == "add" else 200), out
            for i in range(users):
                add = await tool("add", {"text": f"user {i} drinks tea", "kind": "fact", "user_id": f"u{i}"})
                search = await tool("search", {"query": "drinks tea", "user_id": f"u{i}"}) if i % 10 == 0 else None
                step(i, lambda _: add, lambda _: search)
            return await tool("search", {"query": "drinks tea", "user_id": "u0"})
    return anyio.run(go)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--users", type=int, default=10_000, help="distinct users served in turn (default 10,000)")
    ap.add_argument("--nofile", type=int, default=1024, help="the server's descriptor limit, as `ulimit -n` (default 1024)")
    ap.add_argument("--every", type=int, default=1000, help="report every this many users (default 1,000)")
    ap.add_argument("--door", choices=("http", "mcp"), default="http", help="the server: earmem serve http (default) or earmem serve mcp --transport http")
    ap.add_argument("--json", help="write the figures to this file")
    a = ap.parse_args()
    folder = Path(tempfile.mkdtemp()) / "store"
    from earmem.memory import HashingEncoder, MemoryStore
    MemoryStore(folder, encoder=HashingEncoder(64)).close()   # the root store, made with the test encoder the server reopens
    port = _free_port()
    limit = lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (a.nofile, a.nofile))
    log = open(folder.parent / "server.log", "w")   # the server says a line per request: a file, never an unread pipe
    cmd = ["serve", "http"] if a.door == "http" else ["serve", "mcp", "--transport", "http"]
    server = subprocess.Popen([sys.executable, "-m", "earmem.cli", *cmd, "--store", str(folder), "--port", str(port)],
                              preexec_fn=limit, stdout=log, stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}"
    rows, failures, t0 = [], [], time.time()
    try:
        for _ in range(300):
            try: socket.create_connection(("127.0.0.1", port), timeout=0.2).close(); break
            except OSError: time.sleep(0.2)
        else: raise SystemExit("the server did not answer within 60 s")
        def step(i, add, search):   # one user: add a memory, every 10th searches it back
            status, out = add(i)
            if status != 201: failures.append((i, status, out))
            if i % 10 == 0:
                status, out = search(i)
                if status != 200 or not isinstance(out, dict) or not out["hits"] or out["hits"][0]["text"] != f"user {i} drinks tea":
                    failures.append((i, "search", status))
            if (i + 1) % a.every == 0 or i + 1 == a.users:
                rows.append(dict(users=i + 1, fds=_fds(server.pid), rss_mb=round(_rss_mb(server.pid), 1), seconds=round(time.time() - t0, 1)))
                print(f"{rows[-1]['users']:>7,} users  server fds {rows[-1]['fds']:>5}  RSS {rows[-1]['rss_mb']:>7.1f} MB  "
                      f"{rows[-1]['seconds']:>7.1f} s  failures {len(failures)}", flush=True)
        if a.door == "http":
            for i in range(a.users):
                step(i, lambda i: _call(f"{base}/memories", {"text": f"user {i} drinks tea", "kind": "fact", "user_id": f"u{i}"}),
                     lambda i: _call(f"{base}/search", {"query": "drinks tea", "user_id": f"u{i}"}))
            back = _call(f"{base}/search", {"query": "drinks tea", "user_id": "u0"})   # the first user, evicted long ago, reopened
        else:
            back = _mcp_run(f"{base}/mcp", a.users, step)
    finally:
        server.terminate(); server.wait(timeout=30)
    out = dict(door=a.door, users=a.users, nofile=a.nofile, max_open=int(os.environ.get("EARMEM_MAX_OPEN_USERS", 128)), rows=rows,
               failures=len(failures), first_failures=failures[:5], first_user_back=back[0] == 200 and isinstance(back[1], dict) and bool(back[1]["hits"]),
               users_per_second=round(a.users / max(rows[-1]["seconds"], 1e-9), 1))
    print(json.dumps({k: v for k, v in out.items() if k != "rows"}))
    if a.json: Path(a.json).write_text(json.dumps(out, indent=1))
    return 0 if not failures and out["first_user_back"] else 1


if __name__ == "__main__":
    sys.exit(main())
