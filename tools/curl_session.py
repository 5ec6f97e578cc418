"""The curl session of issue 21: `earmem serve http` behind an API key, answered by curl.

    python tools/curl_session.py            # prints each request, its status and body; exits 1 if any status differs

What it shows, on a fresh store in a temporary folder and a free loopback port:
no key → 401, wrong Host → 421, oversized body → 413, a write lock held by another process → 409, and (second server)
the disk full → 507, each with its message; then that neither server log holds a "Traceback".

The disk-full server is `earmem serve http` with one documented monkeypatch, applied by this script's `--disk-full`
mode before the CLI runs: SQLite's write path (`SQLiteBackend.insert`) raises `sqlite3.OperationalError("database or
disk is full")`, which is what SQLite raises on ENOSPC (chapter 25 simulates ENOSPC the same way, at the driver).
Needs curl on the PATH and the server extra (fastapi, uvicorn).
"""
from __future__ import annotations
import json, os, socket, sqlite3, subprocess, sys, tempfile, time
from pathlib import Path

KEY = "curl-session-" + "k" * 24


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0)); return s.getsockname()[1]


def start(store: Path, port: int, log: Path, disk_full: bool = False) -> subprocess.Popen:
    "`earmem serve http --store STORE --port PORT` with EARMEM_API_KEY set, its output to `log`; waits until it answers."
    cmd = [sys.executable, __file__, "--disk-full"] if disk_full else [sys.executable, "-m", "earmem.cli"]
    env = {**os.environ, "EARMEM_API_KEY": KEY}
    p = subprocess.Popen([*cmd, "serve", "http", "--store", str(store), "--port", str(port)], env=env,
                         stdout=log.open("w"), stderr=subprocess.STDOUT)
    for _ in range(300):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2): return p
        except OSError: time.sleep(0.1)
        if p.poll() is not None: raise RuntimeError(f"the server exited: {log.read_text()}")
    raise RuntimeError("the server did not start listening")


def curl(port: int, method: str, path: str, *, body=None, key: str | None = KEY, host: str | None = None, data_file=None) -> tuple:
    "Run curl; returns (the command as shown, status, body)."
    url = f"http://127.0.0.1:{port}{path}"
    args = ["curl", "-s", "-o", "-", "-w", "\n%{http_code}", "-X", method, url]
    shown = ["curl", "-X", method, url]
    if key: args += ["-H", f"Authorization: Bearer {key}"]; shown += ["-H", "'Authorization: Bearer $EARMEM_API_KEY'" if key == KEY else f"'Authorization: Bearer {key}'"]
    if host: args += ["-H", f"Host: {host}"]; shown += ["-H", f"'Host: {host}'"]
    if body is not None:
        args += ["-H", "Content-Type: application/json", "--data-binary", json.dumps(body)]
        shown += ["-d", f"'{json.dumps(body)}'"]
    if data_file is not None:
        args += ["-H", "Content-Type: application/json", "--data-binary", f"@{data_file}"]
        shown += ["--data-binary", f"@{Path(data_file).name} ({Path(data_file).stat().st_size:,} bytes)"]
    out = subprocess.run(args, capture_output=True, text=True, timeout=120).stdout
    text, _, status = out.rpartition("\n")
    return " ".join(shown), int(status), text


def hold_lock(db: Path) -> subprocess.Popen:
    "Another process that takes the store's SQLite write lock (BEGIN IMMEDIATE) and keeps it until killed."
    code = ("import sqlite3, sys, time; c = sqlite3.connect(sys.argv[1], isolation_level=None); "
            "c.execute('BEGIN IMMEDIATE'); print('held', flush=True); time.sleep(600)")
    p = subprocess.Popen([sys.executable, "-c", code, str(db)], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "held"
    return p


def session() -> int:
    bad = 0
    def show(label, want, got):
        nonlocal bad
        cmd, status, text = got
        bad += status != want
        print(f"$ {cmd}\n{status} {text}\n   ({label}: expected {want}{'' if status == want else ', GOT ' + str(status)})\n")
    with tempfile.TemporaryDirectory() as d:
        d = Path(d); store, port, log = d / "mem", free_port(), d / "server.log"
        subprocess.run([sys.executable, "-m", "earmem.cli", "memory", "add", "Dana chose Postgres for orders", "--kind", "decision",
                        "--store", str(store), "--encoder", "hashing"], check=True, capture_output=True)
        server = start(store, port, log)
        try:
            print(f"# earmem serve http --store <tmp>/mem --port {port}   (EARMEM_API_KEY set)\n")
            show("key given", 200, curl(port, "GET", "/stats"))
            show("no key", 401, curl(port, "GET", "/memories", key=None))
            show("wrong key", 401, curl(port, "GET", "/memories", key="not-the-key"))
            show("wrong Host", 421, curl(port, "GET", "/memories", host="evil.example"))
            big = d / "big.json"; big.write_text(json.dumps({"text": "x" * 2_000_000}))
            show("oversized body", 413, curl(port, "POST", "/memories", data_file=big))
            holder = hold_lock(store / "memories.sqlite")
            try: show("write lock held by another process (the store waits lock_timeout = 10 s)", 409,
                      curl(port, "POST", "/memories", body={"text": "Lee prefers tea", "kind": "preference"}))
            finally: holder.kill(); holder.wait()
            show("lock released", 201, curl(port, "POST", "/memories", body={"text": "Lee prefers tea", "kind": "preference"}))
        finally: server.terminate(); server.wait(10)
        port2, log2 = free_port(), d / "server-full.log"
        server = start(store, port2, log2, disk_full=True)
        try:
            print(f"# the same store served with the disk-full monkeypatch (tools/curl_session.py --disk-full), port {port2}\n")
            show("disk full", 507, curl(port2, "POST", "/memories", body={"text": "Ana prefers coffee", "kind": "preference"}))
            show("reads still work", 200, curl(port2, "GET", "/memories"))
        finally: server.terminate(); server.wait(10)
        for name, f in (("server log", log), ("disk-full server log", log2)):
            text = f.read_text()
            print(f"# {name}: {len(text.splitlines())} lines, 'Traceback' found {text.count('Traceback')} times")
            bad += "Traceback" in text
    print("\nall statuses as expected, no traceback" if not bad else f"\n{bad} problem(s)")
    return int(bad > 0)


def disk_full_cli(argv: list) -> None:
    "Run the earmem CLI with SQLite's write path failing the way a full disk makes it fail."
    import earmem.memory.backends.sqlite as sq
    def full(self, *a, **k): raise sqlite3.OperationalError("database or disk is full")
    sq.SQLiteBackend.insert = full
    from earmem.cli import main
    sys.exit(main(argv))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--disk-full"]: disk_full_cli(sys.argv[2:])
    else: sys.exit(session())
