"""Issue 19 on PostgreSQL: how long a consolidation's switch holds the namespace's write lock, while another handle keeps writing
and reading. One namespace of N memories (hashing encoders: no model, so the figures are the database's), switched by
`MemoryStore.switch_encoder` (chapter 23d over 25b) to another encoder of the same dimension, then reverted. The lock hold is
the time from taking the namespace's lock to the commit of the switch's transaction; the writer adds a memory every 50 ms on its
own connection (lock_timeout 120 s, so its wait is measured, not cut), the reader searches every 50 ms.

    nice -n 10 python studies/25b_pg_switch_bench.py [--memories 3000] [--url postgresql://…]

Without --url a throwaway server is started (`earmem.toys.embedded_server`). The script uses only what every version of the
PostgreSQL switch has, so the same file measures an older checkout too: PYTHONPATH=/path/to/checkout python studies/25b_pg_switch_bench.py
"""
import argparse, importlib, statistics, subprocess, tempfile, threading, time, uuid
from pathlib import Path

from earmem.memory import MemoryStore
from earmem.memory.rules.hygiene import HashingEncoder, StoreConfig
from earmem.memory.backends.postgres import PostgresBackend
import torch, earmem.ear.replay, earmem.memory.store.consolidate  # noqa: F401  (imported here once: threads importing torch at once race)

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("--memories", type=int, default=3000)
ap.add_argument("--url", help="a PostgreSQL + pgvector server (default: a throwaway one)")
a = ap.parse_args()
uptime = lambda: subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()

server = None
if a.url is None:
    from earmem.toys import embedded_server
    server, a.url = embedded_server(Path(tempfile.mkdtemp()) / "pg")
A, B = HashingEncoder(64, 0), HashingEncoder(64, 1)
ns = "bench_" + uuid.uuid4().hex[:8]
st = MemoryStore(a.url, encoder=A, namespace=ns, config=StoreConfig(min_relevance=-1))
t0 = time.perf_counter()
for i in range(0, a.memories, 500):
    st.add_many([f"memory number {j} about topic {j % 97} and item {j % 13}" for j in range(i, min(a.memories, i + 500))], kind="fact")
print(f"# {len(st)} memories in namespace {ns} in {time.perf_counter() - t0:.0f} s; {uptime()}", flush=True)

events, held = {}, []                       # wall time of each phase; (seconds, switched?) of the consolidating handle's writes
def timed(owner, name, label):
    f = getattr(owner, name, None)
    if f is None: return
    def g(self, *args, **kw):
        t = time.perf_counter()
        try: return f(self, *args, **kw)
        finally:
            if self is st._backend: events[label] = events.get(label, 0) + time.perf_counter() - t
    setattr(owner, name, g)

lock_at = {}
_lock, _refresh, _switch = PostgresBackend._lock_namespace, PostgresBackend.refresh, None
def lock(self):
    got = _lock(self)
    if self is st._backend: lock_at["t"], lock_at["switch"] = time.perf_counter(), False
    return got
def refresh(self):
    if self is st._backend and "t" in lock_at:   # `write` refreshes right after its transaction commits
        held.append((time.perf_counter() - lock_at.pop("t"), lock_at.pop("switch")))
    return _refresh(self)
PostgresBackend._lock_namespace, PostgresBackend.refresh = lock, refresh
importlib.import_module("earmem.memory.backends.postgres_staging")   # the chapter that teaches the backend to stage and switch
_switch = PostgresBackend.switch_vectors
def switch(self, *args, **kw):
    lock_at["switch"] = True
    return _switch(self, *args, **kw)
PostgresBackend.switch_vectors = switch
for name, label in [("stage_vectors", "stage"), ("clear_idle", "empty the old column")]: timed(PostgresBackend, name, label)

stop, waits, reads, errors = threading.Event(), [], [], []
def writer():
    w = MemoryStore(a.url, namespace=ns, lock_timeout=120)         # the encoder the manifest names
    i = 0
    while not stop.is_set():
        t = time.perf_counter()
        try: w.add(f"written during the consolidation {i}", "fact")
        except Exception as e: errors.append(f"writer: {type(e).__name__}: {e}")
        waits.append(time.perf_counter() - t); i += 1; time.sleep(0.05)
    w.close()
def reader():
    r = MemoryStore(a.url, namespace=ns, readonly=True)
    while not stop.is_set():
        t = time.perf_counter()
        try: r.search("memory number 42 about topic 42", k=5)
        except Exception as e: errors.append(f"reader: {type(e).__name__}: {e}")
        reads.append(time.perf_counter() - t); time.sleep(0.05)
    r.close()

def run(label, call):
    events.clear(); held.clear(); waits.clear(); reads.clear()
    threads = [threading.Thread(target=f) for f in (writer, reader)]
    for t in threads: t.start()
    time.sleep(1.0)
    t = time.perf_counter(); call(); wall = time.perf_counter() - t
    time.sleep(1.0); stop.set()
    for t in threads: t.join()
    stop.clear()
    hold = [s for s, sw in held if sw]
    print(f"{label}: wall {wall:.1f} s | switch lock held {hold[0]:.2f} s | "
          + " | ".join(f"{k} {v:.1f} s" for k, v in events.items())
          + f" | writer: {len(waits)} adds, worst wait {max(waits):.2f} s, median {statistics.median(waits) * 1000:.0f} ms"
          + f" | reader: {len(reads)} searches, worst {max(reads):.2f} s | errors {len(errors)}", flush=True)

run("switch", lambda: st.switch_encoder(B, B.model_id, {"base": A.model_id, "key": "bench"}, progress=False))
run("revert", lambda: st.revert_encoder(progress=False))
print(f"# {len(st)} memories after; {uptime()}")
for e in errors[:5]: print("#", e)
st.close()
if server is not None: server.cleanup()
