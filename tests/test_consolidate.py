"""Consolidation (chapter 23d): the encoder switch is one commit, so a crash at any point leaves the old store or the new one,
whole. Fast: the switch primitive with hashing encoders (a fault between the commit and the manifest file, a reader in another
process following the switch). Slow: SIGKILL at random moments of `consolidate()` on the bundled MiniLM, and of the switch alone.

CI size: 5 trials each. Full run (>= 50 trials):
    EARMEM_CONSOLIDATE_CRASH_TRIALS=50 pytest -q -m slow tests/test_consolidate.py -s"""
import json, os, random, shutil, signal, subprocess, sys, textwrap, time
from pathlib import Path

import numpy as np
import pytest

import earmem.memory.consolidate as cons
from earmem.memory import MemoryStore
from earmem.memory.hygiene import HashingEncoder, StoreConfig
from earmem.memory.storage import MANIFEST_NAME

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
        from earmem.memory.hygiene import HashingEncoder
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
    assert st._learner_seq == 1 and getattr(st._learner, "steps", 0) == 0   # a fresh adapter, past the logged row
    assert st.revert_encoder(progress=False)["encoder"] == A.model_id
    assert st.lineage is None and st.manifest["encoder"] == A.model_id
    st.close()
    assert _verdict(tmp_path / "s") == "old"


def test_consolidate_refuses_postgres():
    class U: url, path = "postgresql://u@h/db", "postgresql://u@h/db"
    with pytest.raises(NotImplementedError, match="PostgreSQL backend"): MemoryStore._refuse_url(U(), "consolidate")


# ================================================================================================ slow: SIGKILL loops
def _kill_loop(tmp_path, template, code, trials, span):
    "Copy `template`, run `code` on the copy, SIGKILL it after a random share of `span` seconds; the verdicts counted."
    rng, counts = random.Random(0), {}
    for t in range(trials):
        path = tmp_path / f"t{t}"; shutil.copytree(template, path)
        p = subprocess.Popen([sys.executable, "-c", code.format(path=str(path))], env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try: p.wait(timeout=rng.uniform(0.1, 1.1) * span)
        except subprocess.TimeoutExpired: os.kill(p.pid, signal.SIGKILL); p.wait()
        v = _verdict(path)
        counts[v] = counts.get(v, 0) + 1
        shutil.rmtree(path, ignore_errors=True)
    print(f"\n[consolidate SIGKILL] {trials} trials over {span:.1f} s: {counts}")
    return counts


SWITCH = """
from earmem.memory import MemoryStore
from earmem.memory.hygiene import HashingEncoder
st = MemoryStore({path!r}); b = HashingEncoder(64, 1)
st.switch_encoder(b, b.model_id, {{"base": st.manifest["encoder"], "key": "kx"}}, progress=False)"""

CONSOLIDATE = """
from earmem.memory import MemoryStore
st = MemoryStore({path!r}); st.consolidate(progress=False)"""


def _timed(code, template, tmp_path) -> float:
    path = tmp_path / "timed"; shutil.copytree(template, path)
    t0 = time.perf_counter(); subprocess.run([sys.executable, "-c", code.format(path=str(path))], env=ENV, check=True, timeout=900)
    span = time.perf_counter() - t0
    assert _verdict(path) == "new"
    shutil.rmtree(path)
    return span


@pytest.mark.slow
def test_sigkill_during_switch(tmp_path):
    _store(tmp_path / "template", n=5000).close()
    span = _timed(SWITCH, tmp_path / "template", tmp_path)
    counts = _kill_loop(tmp_path, tmp_path / "template", SWITCH, TRIALS, span)
    assert set(counts) <= {"old", "new"}, counts


@pytest.mark.slow
def test_sigkill_during_consolidate(tmp_path):
    from earmem.core import Encoder
    st = _store(tmp_path / "template", n=60, enc=Encoder(cache=False, progress=False))
    for i in range(30):
        hits = st.search(f"memory number {i} about topic {i % 7}", k=5)
        st.feedback(hits, cited=[h.id for h in hits if h.text == f"memory number {i} about topic {i % 7}"])
    st.close()
    span = _timed(CONSOLIDATE, tmp_path / "template", tmp_path)
    counts = _kill_loop(tmp_path, tmp_path / "template", CONSOLIDATE, TRIALS, span)
    assert set(counts) <= {"old", "new"}, counts
