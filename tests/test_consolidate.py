"""Consolidation (chapter 23d): the encoder switch is one commit, so a crash at any point leaves the old store or the new one,
whole. Fast: the switch primitive with hashing encoders (a fault between the commit and the manifest file, a reader in another
process following the switch). Slow: SIGKILL at random moments of `consolidate()` on the bundled MiniLM, and of the switch alone.

Each kill aims at a phase (start, fine-tuning, re-embedding, the switch transaction, after the commit) measured by one traced run,
and the verdicts are counted per phase the kill landed in (the child's trace says). PostgreSQL (chapter 20e, the `pg_url` server):
the switch and revert, readers on the old vectors while new ones are staged, a crash inside the switch transaction, and (slow) a
SIGKILL loop over the staging and the switch. CI size: 5 trials each. Full run (>= 50 trials each):
    EARMEM_REQUIRE_POSTGRES=1 EARMEM_CONSOLIDATE_CRASH_TRIALS=50 nice -n 10 pytest -q -m slow tests/test_consolidate.py -k sigkill -s"""
import json, os, random, shutil, signal, subprocess, sys, textwrap, time
from pathlib import Path

import numpy as np
import pytest

import earmem.memory.store.consolidate as cons
from earmem.memory import MemoryStore
from earmem.memory.rules.hygiene import HashingEncoder, StoreConfig
from earmem.memory.backends.boundary import MANIFEST_NAME

TRIALS = int(os.environ.get("EARMEM_CONSOLIDATE_CRASH_TRIALS", "5"))
A, B = HashingEncoder(64, 0), HashingEncoder(64, 1)
ENV = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1]), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def _store(path, n=50, enc=A):
    st = MemoryStore(path, encoder=enc, config=StoreConfig(min_relevance=-1))
    st.add_many([f"memory number {i} about topic {i % 7}" for i in range(n)], kind="fact")
    return st


def _verdict(path) -> str:
    "'old' or 'new' when the store is whole in one space (every vector is its encoder's), else a description of the damage."
    st = MemoryStore(path)
    try:
        st.check()
        ix, enc = st._backend.index, st.encoder
        rows = [p for p in ix.pos.values()]
        texts = [ix.texts[p] for p in rows]
        V = np.asarray(enc.encode_documents(texts), np.float32)
        V /= np.linalg.norm(V, axis=1, keepdims=True)
        worst = float((V * ix.E[rows]).sum(1).min())
        if worst < 0.999: return f"half-switched: a stored vector is not its encoder's (cosine {worst:.3f}, encoder {st.manifest['encoder']})"
        if len(st.search("memory number 3", k=3)) == 0: return "search returns nothing"
        return "old" if st.lineage is None else "new"
    finally: st.close()


def test_switch_survives_a_crash_between_commit_and_manifest(tmp_path, monkeypatch):
    st = _store(tmp_path / "s")
    def boom(*a, **k): raise OSError("simulated crash before the manifest file was replaced")
    monkeypatch.setattr(cons, "atomic_write_json", boom)
    st.switch_encoder(B, B.model_id, {"base": A.model_id, "key": "k1"}, progress=False)
    st.close()
    assert json.loads((tmp_path / "s" / MANIFEST_NAME).read_text())["encoder"] == A.model_id   # the file is stale …
    monkeypatch.undo()
    re = MemoryStore(tmp_path / "s")                                                               # … the database wins
    assert (re.manifest["encoder"], re.lineage["key"]) == (B.model_id, "k1")
    re.close()
    assert json.loads((tmp_path / "s" / MANIFEST_NAME).read_text())["encoder"] == B.model_id    # and the file is repaired
    assert _verdict(tmp_path / "s") == "new"


def test_a_reader_follows_a_switch_made_by_another_process(tmp_path):
    _store(tmp_path / "s").close()
    reader = MemoryStore(tmp_path / "s", readonly=True)
    before = reader.search("memory number 3", k=1).ids
    code = textwrap.dedent(f"""
        from earmem.memory import MemoryStore
        from earmem.memory.rules.hygiene import HashingEncoder
        st = MemoryStore({str(tmp_path / 's')!r}); b = HashingEncoder(64, 1)
        st.switch_encoder(b, b.model_id, {{"base": st.manifest["encoder"], "key": "k2"}}, progress=False); st.close()""")
    subprocess.run([sys.executable, "-c", code], check=True, env=ENV, timeout=120)
    hits = reader.search("memory number 3", k=1)
    assert reader.manifest["encoder"] == B.model_id and reader.encoder.model_id == B.model_id
    assert hits.ids == before                       # the same memory, found in the new space
    reader.close()


def test_revert_and_learner_restart(tmp_path):
    st = _store(tmp_path / "s")
    hits = st.search("memory number 3", k=5); st.feedback(hits, cited=[hits.ids[0]])
    st.switch_encoder(B, B.model_id, {"base": A.model_id, "key": "k3"}, progress=False)
    assert st._learner_seq == st._backend.last_feedback() and getattr(st._learner, "steps", 0) == 0   # a fresh adapter, past the logged row (the seq runs across namespaces)
    assert st.revert_encoder(progress=False)["encoder"] == A.model_id
    assert st.lineage is None and st.manifest["encoder"] == A.model_id
    st.close()
    assert _verdict(tmp_path / "s") == "old"


def test_a_backend_that_cannot_stage_is_refused():
    class U: url, path, _backend = "x://u@h/db", "x://u@h/db", object()
    with pytest.raises(NotImplementedError, match="cannot stage new vectors"): MemoryStore._refuse_url(U(), "consolidate")


# ================================================================================================ PostgreSQL (chapter 20e)
def _pg(pg_url, enc=A):
    import uuid
    st = MemoryStore(pg_url, encoder=enc, namespace="c" + uuid.uuid4().hex[:10], config=StoreConfig(min_relevance=-1))
    st.add_many([f"memory number {i} about topic {i % 7}" for i in range(50)], kind="fact")
    return st


def _pg_space(st, enc) -> float:
    "The worst cosine between a stored vector of the namespace and `enc`'s vector of its text (1.0: all in `enc`'s space)."
    rows = st._backend.dump_rows()
    E = np.stack([np.frombuffer(r.embedding, np.float32) for r in rows])
    V = np.asarray(enc.encode_documents([r.text for r in rows]), np.float32)
    V /= np.linalg.norm(V, axis=1, keepdims=True)
    return float((E * V).sum(1).min())


def test_postgres_switch_and_revert(pg_url):
    st = _pg(pg_url)
    hits = st.search("memory number 3", k=5); st.feedback(hits, cited=[hits.ids[0]])
    reader = MemoryStore(pg_url, namespace=st.namespace, readonly=True)
    out = st.switch_encoder(B, B.model_id, {"base": A.model_id, "key": "k1", "feedback_rows": 1}, progress=False)
    assert (out["memories"], st.manifest["encoder"], st.lineage["key"]) == (50, B.model_id, "k1")
    assert _pg_space(st, B) > 0.999 and st._backend.staged_count() == 0 and st._backend.check() == 50   # HNSW index valid
    assert st._learner_seq == st._backend.last_feedback() and getattr(st._learner, "steps", 0) == 0   # a fresh adapter, past the logged row (the seq runs across namespaces)
    assert reader.search("memory number 3", k=1).ids == [hits.ids[0]] and reader.encoder.model_id == B.model_id  # followed
    again = MemoryStore(pg_url, namespace=st.namespace)                    # a new process sees the lineage in the manifest
    assert again.lineage == {"base": A.model_id, "key": "k1", "feedback_rows": 1}
    again.close()
    assert st.revert_encoder(progress=False)["encoder"] == A.model_id and st.lineage is None and _pg_space(st, A) > 0.999
    reader.close(); st.close()


def test_postgres_readers_serve_the_old_vectors_while_staged(pg_url):
    st = _pg(pg_url)
    texts, _ = st._memory_texts()
    st._backend.stage_vectors(cons._embed_rows(B, texts, 64, False))
    assert st._backend.staged_count() == 50 and _pg_space(st, A) > 0.999 and st.manifest["encoder"] == A.model_id
    assert st.search("memory number 3 about topic 3", k=1)[0].text == "memory number 3 about topic 3"
    st.close()


def test_postgres_switch_refuses_a_memory_without_a_staged_vector(pg_url, monkeypatch):
    st = _pg(pg_url)
    staged = type(st._backend).stage_vectors
    monkeypatch.setattr(type(st._backend), "stage_vectors", lambda self, v: staged(self, dict(list(v.items())[:10])))
    with pytest.raises(RuntimeError, match="40 memories .* have no staged vector"):
        st.switch_encoder(B, B.model_id, {"base": A.model_id, "key": "k3"}, progress=False)
    assert _pg_space(st, A) > 0.999 and st.manifest["encoder"] == A.model_id
    st.close()


# ================================================================================================ slow: SIGKILL loops
PHASES = ("start", "train", "re-embed", "switch", "committed", "finished")  # where a kill can land, in order

TRACE = """
import os, sys, time
import earmem.memory.store.consolidate as C
trace = open({trace!r}, "a", buffering=1)
last = ["start"]
def mark(p): last[0] = p; trace.write(f"{{p}} {{time.time()}}\\n")
def before(owner, name, phase, after=()):
    f = getattr(owner, name)
    def g(*a, **k):
        if not after or last[0] in after: mark(phase)
        return f(*a, **k)
    setattr(owner, name, g)
before(C, "train_encoder", "train"); before(C, "_embed_rows", "re-embed", after=("start", "train"))
before(C.SQLiteBackend, "switch_vectors", "switch"); before(C.MemoryStore, "_sync_learner", "committed", after=("switch",))
mark("start")
"""


def _phases(trace: Path) -> list:
    "(phase, time) marks a traced child wrote before it died or finished."
    if not trace.exists(): return []
    return [(p, float(t)) for p, t in (line.split() for line in trace.read_text().splitlines() if line.strip())]


def _wait_for(p, trace: Path, phase: str, limit: float) -> bool:
    "Poll the child's trace until it marks `phase` (True), or it exits / `limit` seconds pass (False)."
    end = time.time() + limit
    while time.time() < end and p.poll() is None:
        if any(m == phase for m, _ in _phases(trace)): return True
        time.sleep(0.01)
    return False


def _kill_loop(tmp_path, template, code, trials, windows, span):
    """Copy `template`, run `code` (traced) on the copy and SIGKILL it: trial t aims at phase t mod len(windows), killed a uniform
    share of that phase's measured length after the child marks it; every 4th trial at a uniform moment of the whole run instead.
    Counts the verdicts per phase the kill landed in (read from the child's trace)."""
    rng, counts, aims = random.Random(0), {}, list(windows)
    for t in range(trials):
        path, trace = tmp_path / f"t{t}", tmp_path / f"t{t}.trace"; shutil.copytree(template, path)
        p = subprocess.Popen([sys.executable, "-c", TRACE.format(trace=str(trace)) + code.format(path=str(path))], env=ENV,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if t % 4 == 3: delay = rng.uniform(0.02, 1.05) * span
        else:
            aim = aims[t % len(aims)]; lo, hi = windows[aim]
            delay = rng.uniform(0, hi - lo) if aim == "start" or _wait_for(p, trace, aim, 3 * span) else 0.0
            if aim == "start": delay = rng.uniform(0, hi)
        try: p.wait(timeout=delay); landed = "finished"
        except subprocess.TimeoutExpired:
            os.kill(p.pid, signal.SIGKILL); p.wait()
            marks = [m for m, _ in _phases(trace)]
            landed = marks[-1] if marks else "launch"
        v = _verdict(path)
        counts.setdefault(landed, {}).setdefault(v, 0); counts[landed][v] += 1
        print(f"[consolidate SIGKILL] trial {t}: killed in {landed} -> {v}", flush=True)
        shutil.rmtree(path, ignore_errors=True); trace.unlink(missing_ok=True)
    print(f"\n[consolidate SIGKILL] {trials} trials over {span:.1f} s; kills per phase -> verdicts: {json.dumps(counts)}")
    return counts


def _timed(code, template, tmp_path) -> tuple:
    "(phase windows in seconds from launch, total seconds) of one traced, unkilled run of `code` on a copy of `template`."
    path, trace = tmp_path / "timed", tmp_path / "timed.trace"; shutil.copytree(template, path)
    t0 = time.time()
    subprocess.run([sys.executable, "-c", TRACE.format(trace=str(trace)) + code.format(path=str(path))], env=ENV, check=True, timeout=1800)
    span = time.time() - t0
    marks = [(m, at - t0) for m, at in _phases(trace)] + [("finished", span)]
    windows = {m: (at, nxt) for (m, at), (_, nxt) in zip(marks, marks[1:])}
    windows["start"] = (0.0, windows.get("start", (0.0, marks[0][1]))[1])   # the launch (imports) counts as start
    assert _verdict(path) == "new"
    shutil.rmtree(path); trace.unlink()
    print(f"\n[consolidate SIGKILL] timed run: {span:.1f} s; phase windows (s from launch): "
          + ", ".join(f"{m} {a:.1f}-{b:.1f}" for m, (a, b) in windows.items()))
    return windows, span


SWITCH = """
from earmem.memory import MemoryStore
from earmem.memory.rules.hygiene import HashingEncoder
st = MemoryStore({path!r}); b = HashingEncoder(64, 1)
st.switch_encoder(b, b.model_id, {{"base": st.manifest["encoder"], "key": "kx"}}, progress=False)"""

CONSOLIDATE = """
from earmem.memory import MemoryStore
st = MemoryStore({path!r}); st.consolidate(progress=False)"""


def _check(counts):
    bad = {ph: v for ph, vs in counts.items() for v in vs if v not in ("old", "new")}
    assert not bad, bad
    assert all(set(vs) <= {"old"} for ph, vs in counts.items() if ph in ("launch", "start", "train", "re-embed")), counts   # before the commit: old
    assert all(set(vs) <= {"new"} for ph, vs in counts.items() if ph in ("committed", "finished")), counts                 # after it: new


@pytest.mark.slow
def test_sigkill_during_switch(tmp_path):
    _store(tmp_path / "template", n=5000).close()
    windows, span = _timed(SWITCH, tmp_path / "template", tmp_path)
    _check(_kill_loop(tmp_path, tmp_path / "template", SWITCH, TRIALS, windows, span))


@pytest.mark.slow
def test_sigkill_during_consolidate(tmp_path):
    from earmem.core import Encoder
    st = _store(tmp_path / "template", n=60, enc=Encoder(cache=False, progress=False))
    for i in range(30):
        hits = st.search(f"memory number {i} about topic {i % 7}", k=5)
        st.feedback(hits, cited=[h.id for h in hits if h.text == f"memory number {i} about topic {i % 7}"])
    st.close()
    windows, span = _timed(CONSOLIDATE, tmp_path / "template", tmp_path)
    _check(_kill_loop(tmp_path, tmp_path / "template", CONSOLIDATE, TRIALS, windows, span))


# ================================================================================================ slow: PostgreSQL
PG_TRACE = """
import earmem.memory.backends.postgres_staging as PGC
before(PGC.PostgresBackend, "stage_vectors", "stage"); before(PGC.PostgresBackend, "switch_vectors", "switch")
"""

PG_SWITCH = """
from earmem.memory import MemoryStore
from earmem.memory.rules.hygiene import HashingEncoder
st = MemoryStore({url!r}, namespace={ns!r}); b = HashingEncoder(64, 1)
st.switch_encoder(b, b.model_id, {{"base": st.manifest["encoder"], "key": "kx"}}, progress=False)"""


def _pg_verdict(pg_url, ns) -> str:
    st = MemoryStore(pg_url, namespace=ns)
    try:
        st._backend.check()
        worst = _pg_space(st, st.encoder)
        if worst < 0.999: return f"half-switched: cosine {worst:.3f} under {st.manifest['encoder']}"
        return "old" if st.lineage is None else "new"
    finally: st.close()


@pytest.mark.slow
def test_sigkill_during_postgres_switch(pg_url, tmp_path):
    "SIGKILL while a PostgreSQL namespace of 3,000 memories is re-embedded, staged and switched: old or new, whole, every time."
    import uuid
    def fresh():
        ns = "k" + uuid.uuid4().hex[:10]
        st = MemoryStore(pg_url, encoder=A, namespace=ns, config=StoreConfig(min_relevance=-1))
        st.add_many([f"memory number {i} about topic {i % 7}" for i in range(3000)], kind="fact"); st.close()
        return ns
    rng, counts, ns = random.Random(1), {}, fresh()
    trace = tmp_path / "timed.trace"
    t0 = time.time()
    subprocess.run([sys.executable, "-c", TRACE.format(trace=str(trace)) + PG_TRACE + PG_SWITCH.format(url=pg_url, ns=ns)], env=ENV, check=True, timeout=900)
    span = time.time() - t0
    assert _pg_verdict(pg_url, ns) == "new"
    marks = [(m, at - t0) for m, at in _phases(trace)] + [("finished", span)]
    windows = {m: (a, b) for (m, a), (_, b) in zip(marks, marks[1:])}
    print(f"\n[postgres SIGKILL] timed run {span:.1f} s; windows: " + ", ".join(f"{m} {a:.1f}-{b:.1f}" for m, (a, b) in windows.items()))
    aims = [m for m in windows if m != "start"]
    for t in range(TRIALS):
        ns, trace = fresh(), tmp_path / f"t{t}.trace"
        p = subprocess.Popen([sys.executable, "-c", TRACE.format(trace=str(trace)) + PG_TRACE + PG_SWITCH.format(url=pg_url, ns=ns)],
                             env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if t % 4 == 3: delay = rng.uniform(0.02, 1.05) * span
        else:
            aim = aims[t % len(aims)]; lo, hi = windows[aim]
            delay = rng.uniform(0, hi - lo) if _wait_for(p, trace, aim, 3 * span) else 0.0
        try: p.wait(timeout=delay); landed = "finished"
        except subprocess.TimeoutExpired:
            os.kill(p.pid, signal.SIGKILL); p.wait()
            marks = [m for m, _ in _phases(trace)]; landed = marks[-1] if marks else "launch"
        v = _pg_verdict(pg_url, ns)
        counts.setdefault(landed, {}).setdefault(v, 0); counts[landed][v] += 1
        print(f"[postgres SIGKILL] trial {t}: killed in {landed} -> {v}", flush=True)
    print(f"[postgres SIGKILL] {TRIALS} trials; kills per phase -> verdicts: {json.dumps(counts)}")
    _check(counts)


@pytest.mark.slow
def test_postgres_consolidate_with_minilm(pg_url):
    "The whole consolidation on PostgreSQL with the bundled MiniLM: trained, staged, switched, lineage in the manifest, reverted."
    import psycopg
    from earmem.core import Encoder
    db = "earmem_minilm"                                    # a schema holds one dimension: MiniLM's 384 get a database of their own
    with psycopg.connect(pg_url, autocommit=True) as c:
        if not c.execute("SELECT 1 FROM pg_database WHERE datname=%s", (db,)).fetchone(): c.execute(f"CREATE DATABASE {db}")
    from urllib.parse import urlsplit, urlunsplit
    url = urlunsplit(urlsplit(pg_url)._replace(path="/" + db))
    assert url.startswith("postgres")
    st = _pg(url, enc=Encoder(cache=False, progress=False))
    for i in range(30):
        hits = st.search(f"memory number {i} about topic {i % 7}", k=5)
        st.feedback(hits, cited=[h.id for h in hits if h.text == f"memory number {i} about topic {i % 7}"])
    est = st.consolidate(dry_run=True)
    out = st.consolidate(progress=False)
    assert out["triples"] == est["triples"] > 0 and st.lineage["key"] == out["key"] and st.lineage["feedback_rows"] == 30
    assert Path(st.manifest["encoder"]).is_dir() and _pg_space(st, st.encoder) > 0.999 and st._backend.check() == 50
    assert len(st.search("memory number 3 about topic 3", k=3)) == 3       # served from the new vectors (same ranks as SQLite's)
    st.revert_encoder(progress=False)
    assert st.lineage is None and _pg_space(st, st.encoder) > 0.999 and not Path(out["encoder"]).exists()
    st.close()
