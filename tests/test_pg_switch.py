"""PostgreSQL consolidation with two vector columns (chapter 20e): the new vectors and their HNSW entries are in the idle column
before the switch, readers keep the old ranking until it commits, the switch rewrites only the rows written meanwhile, a write
during staging is re-staged, an old one-column schema opens and consolidates, a failed switch leaves the old column serving."""
import uuid
from urllib.parse import urlsplit, urlunsplit

import numpy as np
import pytest

import earmem.memory.store.consolidate as cons
import earmem.memory.backends.postgres_staging  # noqa: F401  (the PostgreSQL staging and switch, chapter 20e)
from earmem.memory import MemoryStore
from earmem.memory.rules.hygiene import HashingEncoder, StoreConfig
from earmem.memory.index.graph import round_f16

A, B = HashingEncoder(64, 0), HashingEncoder(64, 1)
TEXTS = [f"memory number {i} about topic {i % 7}" for i in range(50)]
QUERY = "memory number 3 about topic 3"


def _pg(url, ns=None):
    st = MemoryStore(url, encoder=A, namespace=ns or "s" + uuid.uuid4().hex[:10], config=StoreConfig(min_relevance=-1))
    st.add_many(TEXTS, kind="fact")
    return st


def _unit(enc, texts):
    "Unit embeddings of `texts` as a store keeps documents (float16 values, chapter 19a)."
    V = np.asarray(enc.encode_documents(list(texts)), np.float32)
    return round_f16(V / np.linalg.norm(V, axis=1, keepdims=True))


def _nearest(st, enc, k=5) -> list:
    "The k nearest rows of the serving column to QUERY under `enc` (the backend's HNSW query, no blending)."
    where, params = st._backend._where()
    return [r for _, r in st._backend._nearest(_unit(enc, [QUERY])[0], k, where, params)]


def _ranks_as(st, enc, k=5) -> bool:
    "True when the serving column ranks as `enc` does: its k nearest rows hold `enc`'s vectors and score as the exact top k (ties aside)."
    got, rows, q = _nearest(st, enc, k), st._backend.dump_rows(), _unit(enc, [QUERY])[0]
    E = np.stack([np.frombuffer(r.embedding, np.float32) for r in got])
    own = float((E * _unit(enc, [r.text for r in got])).sum(1).min())
    exact = np.sort(_unit(enc, [r.text for r in rows]) @ q)[::-1][:k]
    return own > 0.999 and np.allclose(E @ q, exact, atol=1e-5)


def _exact(st, enc, k=5) -> list:
    "The exact k best scores to QUERY when every memory is embedded by `enc`."
    return list(np.sort(_unit(enc, [r.text for r in st._backend.dump_rows()]) @ _unit(enc, [QUERY])[0])[::-1][:k])


def _filled(st, column) -> int:
    return st._backend._q(f"SELECT count(*) FROM {{s}}.memories WHERE namespace=%s AND {column} IS NOT NULL", (st.namespace,)).fetchone()[0]


def test_staged_column_is_indexed_before_the_switch_and_readers_keep_the_old_ranking(pg_url):
    st = _pg(pg_url)
    reader = MemoryStore(pg_url, namespace=st.namespace, readonly=True)
    assert _ranks_as(st, A) and not _ranks_as(st, B)
    texts, _ = st._memory_texts()
    st._backend.stage_vectors(cons._embed_rows(B, texts, 64, False), batch=16)
    assert (st._backend.staged_count(), _filled(st, "embedding_alt"), st._backend.column) == (50, 50, "embedding")
    b = st._backend
    with b.db.transaction():                       # the idle column's HNSW index already answers for every staged vector
        b._q("SET LOCAL enable_seqscan = off"); b._q("SET LOCAL hnsw.ef_search = 1000")
        q, walk = _unit(B, [QUERY])[0], "SELECT id, namespace FROM {s}.memories ORDER BY embedding_alt <#> %s LIMIT 5000"
        plan = "\n".join(r[0] for r in b._q("EXPLAIN " + walk, (q,)))
        got = [m for m, ns in b._q(walk, (q,)) if ns == st.namespace]     # what the index holds, in its order
    text = {r.id: r.text for r in b.dump_rows()}
    assert "memories_alt_hnsw" in plan and len(got) == 50 and np.allclose(_unit(B, [text[m] for m in got[:5]]) @ q, _exact(st, B), atol=1e-5)
    assert _ranks_as(st, A) and reader.search(QUERY, k=1)[0].text == QUERY and reader.encoder.model_id == A.model_id
    st.switch_encoder(B, B.model_id, {"base": A.model_id, "key": "k"}, progress=False)
    assert (st._backend.column, _filled(st, "embedding"), _filled(st, "embedding_alt"), st._backend.staged_count()) == ("embedding_alt", 0, 50, 0)
    assert _ranks_as(st, B) and not _ranks_as(st, A)
    assert (reader.search(QUERY, k=1)[0].text, reader.encoder.model_id, reader._backend.column) == (QUERY, B.model_id, "embedding_alt")  # followed
    reader.close(); st.close()


def test_the_switch_rewrites_only_the_rows_written_meanwhile(pg_url, monkeypatch):
    from earmem.memory.backends.postgres import PostgresBackend
    st = _pg(pg_url)
    writer = MemoryStore(pg_url, namespace=st.namespace)            # another process, writing while the vectors are staged
    staged, seen = PostgresBackend.stage_vectors, {}
    def stage_then_write(self, vectors, batch=500):
        out = staged(self, vectors, batch)
        seen["new"] = writer.add("a memory written during the staging", "fact").id
        writer.update(seen["changed"], text="memory number 7 rewritten during the staging")
        seen["xmin"] = dict(self._q("SELECT id, xmin::text FROM {s}.memories WHERE namespace=%s", (self.namespace,)).fetchall())
        seen["serving"] = self._q("SELECT embedding IS NOT NULL, embedding_alt IS NULL FROM {s}.memories WHERE namespace=%s AND id=%s",
                                  (self.namespace, seen["new"])).fetchone()
        return out
    seen["changed"] = st._backend.ids()[7]
    monkeypatch.setattr(PostgresBackend, "stage_vectors", stage_then_write)
    monkeypatch.setattr(PostgresBackend, "clear_idle", lambda self, batch=500: 0)   # keep every row version the switch left
    st.switch_encoder(B, B.model_id, {"base": A.model_id, "key": "k"}, progress=False)
    assert seen["serving"] == (True, True)                          # the write went to the serving column
    after = dict(st._backend._q("SELECT id, xmin::text FROM {s}.memories WHERE namespace=%s", (st.namespace,)).fetchall())
    assert sorted(m for m in after if after[m] != seen["xmin"][m]) == sorted([seen["new"], seen["changed"]])
    rows = {r.id: r for r in st._backend.dump_rows()}                # re-staged: in B's space, the rewritten text's vector
    for m in (seen["new"], seen["changed"]):
        assert float(np.frombuffer(rows[m].embedding, np.float32) @ _unit(B, [rows[m].text])[0]) > 0.999
    assert len(rows) == 51 and st._backend.check() == 51
    writer.close(); st.close()


def test_a_failed_switch_leaves_the_old_column_serving_and_the_next_one_succeeds(pg_url, monkeypatch):
    from earmem.memory.backends.postgres import PostgresBackend
    st = _pg(pg_url)
    def boom(self, *a, **k): raise OSError("simulated crash inside the switch transaction")
    monkeypatch.setattr(PostgresBackend, "save_manifest", boom)
    with pytest.raises(OSError, match="simulated crash"):
        st.switch_encoder(B, B.model_id, {"base": A.model_id, "key": "k"}, progress=False)
    monkeypatch.undo()
    assert (st._backend._meta("slot"), st._backend.column, _filled(st, "embedding_alt")) == ("embedding", "embedding", 50)  # staged, not flipped
    re = MemoryStore(pg_url, namespace=st.namespace)
    assert (re.manifest["encoder"], re.lineage, re._backend.column, _ranks_as(re, A)) == (A.model_id, None, "embedding", True)  # the old store, whole
    re.switch_encoder(B, B.model_id, {"base": A.model_id, "key": "k"}, progress=False)   # the leftovers are cleared first
    assert (re._backend.column, _ranks_as(re, B), _filled(re, "embedding")) == ("embedding_alt", True, 0)
    re.close(); st.close()


def test_revert_flips_back_and_empties_the_fine_tuned_column(pg_url):
    st = _pg(pg_url)
    st.switch_encoder(B, B.model_id, {"base": A.model_id, "key": "k"}, progress=False)
    assert (st._backend.column, _filled(st, "embedding")) == ("embedding_alt", 0)
    st.add("added while the fine-tuned encoder serves", "fact")
    assert (_filled(st, "embedding_alt"), _filled(st, "embedding")) == (51, 0)
    assert st.revert_encoder(progress=False)["encoder"] == A.model_id and st.lineage is None
    assert (st._backend.column, _filled(st, "embedding"), _filled(st, "embedding_alt")) == ("embedding", 51, 0)
    assert _ranks_as(st, A) and st._backend.check() == 51
    st.close()


@pytest.fixture
def fresh_db(pg_url):
    "A database of its own on the test server (its `earmem` schema is made by this test alone); dropped afterwards."
    import psycopg
    name, parts = "old_" + uuid.uuid4().hex[:8], urlsplit(pg_url)
    try:
        with psycopg.connect(pg_url, autocommit=True) as c: c.execute(f"CREATE DATABASE {name}")
    except psycopg.errors.InsufficientPrivilege: pytest.skip("the test server's role may not create databases")
    yield urlunsplit(parts._replace(path="/" + name))
    with psycopg.connect(pg_url, autocommit=True) as c: c.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def test_an_old_one_column_schema_opens_and_consolidates(fresh_db):
    st = _pg(fresh_db)
    info = lambda: dict(st._backend._q("SELECT key, value FROM {s}.info").fetchall())["version"]
    col = lambda: st._backend._q("SELECT attname, attnotnull FROM pg_attribute WHERE attrelid = 'earmem.memories'::regclass "
                                 "AND attname LIKE 'embedding%%' ORDER BY attname").fetchall()
    st._backend._q("UPDATE {s}.info SET value = '1' WHERE key = 'version'")    # as the first version of chapter 20c left it
    assert col() == [("embedding", True)]
    st.close()
    st = MemoryStore(fresh_db, namespace=st.namespace)
    assert st.search(QUERY, k=1)[0].text == QUERY and _ranks_as(st, A)
    st.switch_encoder(B, B.model_id, {"base": A.model_id, "key": "k"}, progress=False)
    assert (info(), col(), st._backend.column, _ranks_as(st, B)) == ("2", [("embedding", False), ("embedding_alt", False)], "embedding_alt", True)
    st.close()
