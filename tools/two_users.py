"""Two users, one server: a transcript of ONE `earmem serve http` process and ONE `earmem serve mcp` process (driven by
the official MCP SDK client over stdio), each serving two users of one store folder. Per user it adds, lists, updates,
searches, gives feedback and deletes, and it checks that neither user ever sees the other's memories.

    python tools/two_users.py                    # bundled MiniLM encoder (offline), a fresh temporary folder
    python tools/two_users.py --encoder hashing  # the hashing encoder: no model to load (what the slow test runs)

Exits non-zero when any isolation check fails. tests/test_two_users.py runs it (marked slow)."""
import argparse, json, os, shutil, socket, subprocess, sys, tempfile, time, urllib.error, urllib.request
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parents[1]
MEMORIES = {"ana": [("Ana's team deploys the billing service on Tuesdays", "fact"), ("Ana prefers answers as short bullet lists", "preference")],
            "bo": [("Bo's team deploys the search service on Fridays", "fact"), ("Bo prefers long explanations with examples", "preference")]}
QUESTION = "when does my team deploy?"
FAILURES = []


def check(ok: bool, what: str):
    print(f"    check: {what}: {'OK' if ok else 'FAILED'}")
    if not ok: FAILURES.append(what)


def make_store(folder: Path, encoder: str):
    "A fresh store folder; with the hashing encoder its root store is made here (the servers open it with its encoder)."
    if encoder == "hashing":
        sys.path.insert(0, str(ROOT))
        from earmem.memory.rules.hygiene import HashingEncoder, StoreConfig
        from earmem.memory.store import MemoryStore
        MemoryStore(folder, encoder=HashingEncoder(256), config=StoreConfig(min_relevance=0.05)).close()


def earmem_cmd(*args) -> list:
    return [sys.executable, "-m", "earmem.cli", *args]


def env() -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


# ---- HTTP ------------------------------------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s: s.bind(("127.0.0.1", 0)); return s.getsockname()[1]


def http(base: str, method: str, path: str, body: dict | None = None):
    "One request, printed as the request line and the JSON answer; returns (status, json)."
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base + path, data=data, method=method, headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r: status, out = r.status, json.loads(r.read())
    except urllib.error.HTTPError as e: status, out = e.code, json.loads(e.read())
    print(f"$ {method} {path}" + (f" {json.dumps(body)}" if body is not None else ""))
    print(f"  {status} {json.dumps(out, ensure_ascii=False)[:400]}")
    return status, out


def http_session(folder: Path):
    port = free_port()
    cmd = earmem_cmd("serve", "http", "--store", str(folder), "--port", str(port))
    print(f"# one process: {' '.join(['earmem', *cmd[3:]])}")
    proc = subprocess.Popen(cmd, env=env(), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(1200):
            try: socket.create_connection(("127.0.0.1", port), timeout=0.2).close(); break
            except OSError:
                if proc.poll() is not None: raise RuntimeError(f"server exited: {proc.stderr.read()}")
                time.sleep(0.1)
        base, ids = f"http://127.0.0.1:{port}", {}
        for user, items in MEMORIES.items():
            ids[user] = [http(base, "POST", "/memories", {"user_id": user, "text": t, "kind": k})[1]["id"] for t, k in items]
        for user in MEMORIES:
            print(f"## {user}")
            _, page = http(base, "GET", f"/memories?user_id={user}&limit=10")
            check(sorted(m["text"] for m in page["memories"]) == sorted(t for t, _ in MEMORIES[user]), f"{user} lists only {user}'s memories")
            _, up = http(base, "PUT", f"/memories/{ids[user][0]}", {"user_id": user, "text": MEMORIES[user][0][0] + " at 10:00", "reason": "time added"})
            _, found = http(base, "POST", "/search", {"user_id": user, "query": QUESTION, "k": 3})
            texts = [h["text"] for h in found["hits"]]
            other = "bo" if user == "ana" else "ana"
            check(bool(texts) and all(t.startswith(user.capitalize()) for t in texts), f"{user}'s search returns only {user}'s memories")
            http(base, "POST", "/feedback", {"user_id": user, "search_id": found["search_id"], "cited": [found["hits"][0]["id"]]})
            if user == "ana":  # bo has made no search yet: ana's search id means nothing to him
                status, _ = http(base, "POST", "/feedback", {"user_id": other, "search_id": found["search_id"], "cited": [found["hits"][0]["id"]]})
                check(status == 422, f"{other} cannot cite {user}'s search (search ids are per user)")
            http(base, "DELETE", f"/memories/{ids[user][1]}?user_id={user}")
            _, page = http(base, "GET", f"/memories?user_id={user}")
            check([m["text"] for m in page["memories"]] == [up["text"]], f"{user} keeps only the updated memory")
        _, other_page = http(base, "GET", "/memories?user_id=ana")
        check(all("Bo" not in m["text"] for m in other_page["memories"]), "ana never sees bo's memories")
        http(base, "GET", "/users")
        status, _ = http(base, "GET", "/memories?userid=bo")
        check(status == 422, "a misspelt scope is refused, not ignored")
    finally:
        proc.terminate(); proc.wait(20)


# ---- MCP -------------------------------------------------------------------------------------------------------------
async def mcp_session(folder: Path):
    from mcp.client import Client
    from mcp.client.stdio import StdioServerParameters, stdio_client
    cmd = earmem_cmd("serve", "mcp", "--store", str(folder))
    print(f"# one process: {' '.join(['earmem', *cmd[3:]])}  (stdio, driven by the mcp SDK client)")
    params = StdioServerParameters(command=cmd[0], args=cmd[1:], env=env(), cwd=str(ROOT))
    log = tempfile.TemporaryFile("w+")
    async with Client(stdio_client(params, errlog=log)) as c:
        async def call(tool, args):
            res = json.loads((await c.call_tool(tool, args)).content[0].text)
            print(f">>> {tool}({json.dumps(args)})")
            print(f"    {json.dumps(res, ensure_ascii=False)[:400]}")
            return res
        ids = {u: [(await call("add", {"user_id": u, "text": t, "kind": k}))["id"] for t, k in items] for u, items in MEMORIES.items()}
        for user in MEMORIES:
            print(f"## {user}")
            page = await call("list", {"user_id": user})
            check(sorted(m["text"] for m in page["memories"]) == sorted(t for t, _ in MEMORIES[user]), f"{user} lists only {user}'s memories")
            up = await call("update", {"user_id": user, "id": ids[user][0], "text": MEMORIES[user][0][0] + " at 10:00", "reason": "time added"})
            found = await call("search", {"user_id": user, "query": QUESTION, "k": 3})
            texts = [h["text"] for h in found["hits"]]
            check(bool(texts) and all(t.startswith(user.capitalize()) for t in texts), f"{user}'s search returns only {user}'s memories")
            await call("feedback", {"user_id": user, "search_id": found["search_id"], "cited": [found["hits"][0]["id"]]})
            await call("delete", {"user_id": user, "id": ids[user][1]})
            page = await call("list", {"user_id": user})
            check([m["text"] for m in page["memories"]] == [up["text"]], f"{user} keeps only the updated memory")
        got = await call("get", {"user_id": "ana", "id": ids["bo"][0]})
        check("Bo" not in got.get("text", ""), "ana asking for bo's id gets her own memory or an error, never bo's")
        await call("users", {})
        bad = await call("add", {"user": "bo", "text": "x", "kind": "fact"})
        check("error" in bad and bad["error"].startswith("user:"), "a misspelt scope is refused, not dropped")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--encoder", choices=["minilm", "hashing"], default="minilm", help="minilm (bundled, offline) or hashing")
    p.add_argument("--folder", help="where the two store folders go (default: a fresh temporary folder, removed after)")
    a = p.parse_args(argv)
    root = Path(a.folder) if a.folder else Path(tempfile.mkdtemp(prefix="earmem-two-users-"))
    try:
        for name, run in (("http", http_session), ("mcp", lambda f: anyio.run(mcp_session, f))):
            folder = root / name
            make_store(folder, a.encoder)
            print(f"\n======== earmem serve {name}: two users in {folder.name}/ ({a.encoder} encoder) ========")
            run(folder)
    finally:
        if not a.folder: shutil.rmtree(root, ignore_errors=True)
    print(f"\n{'all isolation checks passed' if not FAILURES else 'FAILED: ' + '; '.join(FAILURES)}")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
