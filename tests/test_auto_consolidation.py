"""Issue 39: a server consolidates on its own (chapter 24b). Through the real HTTP door: three users' feedback arrives over
HTTP and, once `EARMEM_CONSOLIDATE_EVERY` rows wait (cy's left out), the server trains one pooled model in the background and
switches every store while it keeps answering. A one-user server consolidates that user's store on its own log. Counting
waits for rows, not sequence numbers: on PostgreSQL the feedback seq runs across users. Off on an install that cannot train."""
import json, os, socket, subprocess, sys, time, urllib.request, uuid
from pathlib import Path

import pytest

from earmem.core import Encoder
from earmem.memory.backends.boundary import MANIFEST_NAME, namespace_folder
from earmem.memory.rules.hygiene import HashingEncoder, StoreConfig
from earmem.memory.service import auto_consolidate
from earmem.memory.service.auto_consolidate import AutoConsolidation
from earmem.memory.service.users import StorePool
from earmem.memory.store import MemoryStore

ROOT = Path(__file__).resolve().parents[1]
FACTS = ("keeps two grey cats", "plays the cello", "works as a nurse")


def people(user, n): return [f"{user}{i}" for i in range(n)]


def make_pool(path, users, encoder):
    with StorePool(path, encoder=encoder, config=StoreConfig(min_relevance=-1)) as pool:
        for user, n in users.items(): pool.store(user).add_many([f"{p} {v}" for p in people(user, n) for v in FACTS], kind="fact")


def call(url, method="POST", body=None):
    req = urllib.request.Request(url, None if body is None else json.dumps(body).encode(), {"content-type": "application/json"}, method=method)
    with urllib.request.urlopen(req, timeout=60) as r: return json.loads(r.read())


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0)); return s.getsockname()[1]


def encoders(path, users):
    return {u: json.loads((namespace_folder(path, u) / MANIFEST_NAME).read_text())["encoder"] for u in users}


def test_the_http_server_consolidates_the_pool_in_the_background(tmp_path):
    users = {"ana": 2, "bo": 2, "cy": 3}
    make_pool(tmp_path / "team", users, Encoder(cache=False, progress=False))
    base = encoders(tmp_path / "team", ["default", *users])
    port, log = free_port(), open(tmp_path / "server.log", "w+")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "EARMEM_CONSOLIDATE_EVERY": "4", "EARMEM_CONSOLIDATE_CHECK_SECONDS": "0.2",
           "EARMEM_CONSOLIDATE_EXCLUDE": "cy", "EARMEM_CONSOLIDATE_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "earmem.cli", "serve", "http", "--store", str(tmp_path / "team"), "--port", str(port)],
                            env=env, stderr=log, stdout=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}"
        for _ in range(600):
            try: socket.create_connection(("127.0.0.1", port), timeout=0.2).close(); break
            except OSError: time.sleep(0.1)
            assert proc.poll() is None, Path(tmp_path / "server.log").read_text()
        for user, n in users.items():   # cy first would count too: cy's rows are the ones left out
            for p in people(user, n):
                s = call(f"{url}/search?user_id={user}", body={"query": f"which pet does {p} have?", "k": 3})
                cited = [h["id"] for h in s["hits"] if h["text"] == f"{p} keeps two grey cats"]
                call(f"{url}/feedback?user_id={user}", body={"search_id": s["search_id"], "cited": cited})
        for _ in range(1200):   # the background run: train on ana's and bo's 4 rows, switch every store
            if "store(s) switched" in Path(tmp_path / "server.log").read_text(): break
            assert proc.poll() is None, Path(tmp_path / "server.log").read_text()
            time.sleep(0.1)
        hits = call(f"{url}/search?user_id=cy", body={"query": "which pet does cy0 have?", "k": 1})["hits"]   # still serving
        assert hits and hits[0]["text"] == "cy0 keeps two grey cats"
    finally:
        proc.terminate(); proc.wait(60); log.close()
    said = Path(tmp_path / "server.log").read_text()
    assert "automatic consolidation: after 4 new feedback rows across users, leaving out cy" in said, said
    assert "4 store(s) switched" in said and "failed" not in said, said
    after = encoders(tmp_path / "team", ["default", *users])
    assert len(set(after.values())) == 1 and set(after.values()).isdisjoint(base.values())   # one pooled model for every user
    lineage = json.loads((namespace_folder(tmp_path / "team", "ana") / MANIFEST_NAME).read_text())["lineage"]
    assert (lineage["feedback_rows"], lineage["excluded_users"], lineage["users_with_feedback"]) == (4, 1, 2)


def test_a_one_user_server_consolidates_that_store(tmp_path):
    make_pool(tmp_path / "solo", {"ana": 3}, Encoder(cache=False, progress=False))
    with StorePool(tmp_path / "solo", namespace="ana") as pool:
        st = pool.store()
        for p in people("ana", 3):
            h = st.search(f"which pet does {p} have?", k=3); st.feedback(h, cited=[x.id for x in h if x.text == f"{p} keeps two grey cats"])
        before, said = st.manifest["encoder"], []
        auto = AutoConsolidation(pool, every=3, check_seconds=60, exclude=(), say=said.append)
        out = auto.check()
        assert out is not None and st.manifest["encoder"] != before and st.new_feedback() == 0
        assert auto.check() is None and len(auto.runs) == 1 and "switched" in said[-1]


def test_counts_rows_not_sequence_numbers_on_postgres(pg_url):
    "On PostgreSQL the feedback seq is one sequence for every user: ana's 2 rows after bo's 5 are 2 rows, not 7."
    tag = uuid.uuid4().hex[:8]
    with StorePool(pg_url, encoder=HashingEncoder(64), config=StoreConfig(min_relevance=-1)) as pool:
        ana, bo = (pool.store(f"{u}-{tag}") for u in ("ana", "bo"))
        for st, n in ((bo, 5), (ana, 2)):
            st.add_many([f"fact {i} of {st.namespace}" for i in range(n)], kind="fact")
            for i in range(n):
                h = st.search(f"fact {i}", k=2); st.feedback(h, cited=[h[0].id])
        assert (ana.new_feedback(), bo.new_feedback(), ana._backend.last_feedback() > 2) == (2, 5, True)
        assert ana.maybe_consolidate(min_new_rows=3) is None   # seq differences would have said 7 and tried to train
        counts = pool.new_feedback()
        assert (counts[f"ana-{tag}"], counts[f"bo-{tag}"]) == (2, 5)


def test_the_policy_says_it_is_off_where_it_cannot_train(tmp_path, monkeypatch):
    def no_torch(feature, *modules): raise ImportError(f"{feature} needs torch; install the research extra")
    monkeypatch.setattr(auto_consolidate, "require_research", no_torch)
    with StorePool(tmp_path / "p", encoder=HashingEncoder(64)) as pool:
        said = []
        auto = AutoConsolidation(pool, every=5, check_seconds=1, exclude=(), say=said.append)
        assert auto.start() is False and auto._thread is None
        assert said == ["automatic consolidation: off (automatic consolidation needs torch; install the research extra)"]
    monkeypatch.setenv("EARMEM_CONSOLIDATE_EVERY", "lots")
    with pytest.raises(ValueError, match="EARMEM_CONSOLIDATE_EVERY"): AutoConsolidation(StorePool(tmp_path / "q", encoder=HashingEncoder(64)))
