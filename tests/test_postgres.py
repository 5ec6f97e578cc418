"""Contract tests of earmem.memory.backends.postgres.PostgresBackend against a real PostgreSQL + pgvector server (the `pg_url`
fixture in conftest.py): the same rows, ids, history and counts as SQLiteBackend for the same operations; filtered
search against an exact scan; namespaces isolated; feedback log and learner checkpoints; writers in several
processes; bad input and faults. The benchmark (`bench_postgres`) is a command, not a timed test."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from earmem.core import unit_rows
from earmem.memory.rules.hygiene import KINDS
from earmem.memory.index.graph import round_f16
from earmem.memory.backends.postgres_search import PostgresBackend  # the backend with its search (chapter 20d)
from earmem.memory.backends.postgres import connect_postgres
from earmem.memory.index.mirror import COLUMNS, SearchFilter, _Index, item_row
from earmem.memory.backends.sqlite import SQLiteBackend
from earmem.memory.backends.boundary import create_store_folder, learner_seq

ROOT = Path(__file__).resolve().parents[1]
DIM = 16
KIND_LIST = list(KINDS)


def rows_for(V, start=0, ids=True):
    "Row tuples (COLUMNS order) of synthetic memories with embeddings V; kinds cycle, entities alternate."
    out = []
    for j, v in enumerate(V):
        i, kind = start + j, KIND_LIST[(start + j) % len(KIND_LIST)]
        f = dict(id=f"m{i + 1}" if ids else None, text=f"memory {i}", kind=kind, store=KINDS[kind][0],
                 entities=["Dana", f"E{i % 5}"] if i % 3 == 0 else [f"E{i % 5}"], importance=round(0.1 + (i % 9) / 10, 2),
                 confidence=1.0, created=1.7e9 + 60 * i, accessed=1.7e9 + 60 * i, count=1, source=f"s{i % 4}",
                 metadata=json.dumps({"i": i}), vec=v)
        out.append(item_row(f))
    return out


def vectors(n, seed=0, dim=DIM):
    "Unit vectors as both backends store them (float16 values, chapter 19a), so stored and given compare exactly."
    return round_f16(unit_rows(np.random.default_rng(seed).standard_normal((n, dim))))


@pytest.fixture
def schema(request):
    "A fresh schema name per test."
    return "t_" + request.node.name.replace("[", "_").replace("]", "").replace("-", "_")[:50].lower()


def sqlite_backend(tmp_path, dim=DIM):
    manifest = {"format": "earmem.memory.store.operations-store", "version": 1, "encoder": "test", "dim": dim}
    create_store_folder(tmp_path / "store", manifest)
    return SQLiteBackend(tmp_path / "store", dim)


def apply_script(b, V):
    "The same sequence of writes on any backend: insert, update, touch, audit, erase; returns the revs."
    revs = []
    with b.write() as rev:
        b.insert(rows_for(V[:30]), rev)
        b.audit_many([(1.7e9, f"m{i + 1}", "insert", {"text": f"memory {i}"}) for i in range(30)])
        revs.append(rev)
    with b.write() as rev:
        b.update_many(("text", "entities", "importance"), [("m2", ("memory one, edited", json.dumps(["Zed"]), 0.95))], rev)
        b.update_many(("status",), [("m3", ("retracted",))], rev)
        b.touch(["m4", "m5"], 1.9e9, rev)
        b.touch(["m4"], 1.0, rev)  # never moves backwards
        b.audit_many([(1.8e9, "m2", "update", {"changes": {"text": ["memory 1", "memory one, edited"]}})])
        revs.append(rev)
    with b.write() as rev:
        assert b.erase("m6", rev) and not b.erase("m6", rev) and not b.erase("nope", rev)
        b.audit_many([(1.9e9, "m6", "delete", {})])
        revs.append(rev)
    with b.write() as rev:  # rows were inserted with explicit ids, so the id counter still starts at m1
        ids = b.new_ids(3, {"m31"}) + b.new_ids(1, set())
        revs.append(rev)
    return revs, ids


def test_same_results_as_sqlite(pg_url, schema, tmp_path):
    V = vectors(40)
    pg, sq = PostgresBackend(pg_url, DIM, "alice", schema=schema), sqlite_backend(tmp_path)
    got = [apply_script(b, V) for b in (pg, sq)]
    assert got[0] == got[1] == ([1, 2, 3, 4], ["m6", "m32", "m33", "m34"])
    for mid in ("m1", "m2", "m3", "m4", "m5", "m6"):
        assert pg.row(mid) == sq.row(mid), mid
        assert pg.history(mid) == sq.history(mid), mid
    assert pg.row("m2")[1] == "memory one, edited" and pg.row("m4")[9] == 1.9e9 and pg.row("m6") is None
    assert pg.history("m6") == [(1.7e9, "m6", "insert", {"erased": True}), (1.9e9, "m6", "delete", {})]
    assert pg.ids() == sq.ids() and pg.ids(include_retracted=True) == sq.ids(include_retracted=True)
    assert "m3" not in pg.ids() and "m3" in pg.ids(include_retracted=True) and len(pg.ids()) == 28
    assert pg.counts() == sq.counts() and pg.counts()["retracted"] == 1
    assert pg.check() == sq.check() == 29
    assert pg.active_count() == 28 and pg.has("m3") and not pg.has("m6")


def test_search_matches_the_exact_scan(pg_url, schema, tmp_path):
    V, Q = vectors(600, seed=1), vectors(25, seed=2)
    pg, sq = PostgresBackend(pg_url, DIM, "alice", schema=schema, ef_search=400), sqlite_backend(tmp_path)
    for b in (pg, sq):
        with b.write() as rev: b.insert(rows_for(V), rev)
    filters = [{}, {"kinds": ["fact", "decision"]}, {"entities": ["dana"]}, {"since": 1.7e9 + 60 * 100, "until": 1.7e9 + 60 * 300},
               {"store": "episodic"}, {"kinds": "fact", "entities": ["E2", "e3"]}]
    for f in filters:
        for balanced in (False, True):
            for q in Q:
                r_pg, c_pg = pg.candidates(q, 20, balanced, SearchFilter(**f))
                r_sq, c_sq = sq.candidates(q, 20, balanced, SearchFilter(**f))
                assert [pg.index.ids[r] for r in r_pg] == [sq.index.ids[r] for r in r_sq], (f, balanced)
                np.testing.assert_allclose(c_pg, c_sq, rtol=0, atol=1e-6)
    # an exact numpy scan of the filtered rows agrees too, and the window holds the rows' fields
    allowed = np.array([i for i in range(600) if i % 3 == 0])
    rows, cos = pg.candidates(Q[0], 10, flt=SearchFilter(entities="Dana"))
    exact = allowed[np.argsort(-(V[allowed] @ Q[0]))[:10]]
    assert [pg.index.ids[r] for r in rows] == [f"m{i + 1}" for i in exact]
    assert pg.index.texts[rows[0]] == f"memory {exact[0]}" and np.allclose(pg.index.E[rows[0]], V[exact[0]])
    assert pg.candidates(Q[0], 5, flt=SearchFilter(kinds=["fact"], since=2e9))[0].size == 0


def test_near_duplicates_as_sqlite(pg_url, schema, tmp_path):
    V = vectors(200, seed=3)
    pg, sq = PostgresBackend(pg_url, DIM, "alice", schema=schema), sqlite_backend(tmp_path)
    for b in (pg, sq):
        with b.write() as rev: b.insert(rows_for(V), rev)
    new = round_f16(unit_rows(V[[0, 7, 7, 50]] + 0.05 * vectors(4, seed=4)))
    kinds = [KIND_LIST[0], KIND_LIST[0], KIND_LIST[0], KIND_LIST[50 % 7]]
    (o1, n1), (o2, n2) = pg.near_duplicates(kinds, new, 0.9, ("m51",)), sq.index.near_duplicates(kinds, new, 0.9, ("m51",))
    ids = lambda b, old: [[(round(c, 5), b.ids[r]) for c, r in sorted(x, reverse=True)] for x in old]
    assert ids(pg.index, o1) == ids(sq.index, o2) and n1 == n2
    assert ids(pg.index, o1)[0][0][1] == "m1" and ids(pg.index, o1)[3] == [] and [r for _, r in n1[2]] == [1] and n1[2][0][0] > 0.99
    r = o1[0][0][1]
    assert pg.dedupe_fields(r) == sq.index.dedupe_fields(sq.index.pos["m1"])


def test_namespaces_are_isolated(pg_url, schema):
    a, b = PostgresBackend(pg_url, DIM, "alice", schema=schema), PostgresBackend(pg_url, DIM, "bob", schema=schema)
    Va, Vb = vectors(20, seed=5), vectors(30, seed=6)
    with a.write() as rev: a.insert(rows_for(Va), rev)
    with b.write() as rev: b.insert(rows_for(Vb), rev); b.insert(rows_for(Vb[:1], start=99), rev)
    assert (a.rev, b.rev, len(a.ids()), len(b.ids())) == (1, 1, 20, 31)
    assert a.row("m1")[1] == b.row("m1")[1] == "memory 0" and a.row("m100") is None
    rows, cos = a.candidates(Vb[0], 50)
    assert len(rows) == 20 and set(a.index.ids[r] for r in rows) == {f"m{i + 1}" for i in range(20)}
    with a.write() as rev: a.erase("m1", rev)
    assert a.row("m1") is None and b.row("m1") is not None and b.rev == 1 and not b.changed() and a.counts() != b.counts()
    a2 = PostgresBackend(pg_url, DIM, "alice", schema=schema)
    with a2.write() as rev: a2.touch(["m2"], 2e9, rev)
    assert a.changed() and not b.changed()
    a.refresh(); assert a.rev == 3 and not a.changed()


def test_feedback_log_and_learner_round_trip(pg_url, schema):
    from earmem.core import Candidates, Memory, Query
    from earmem.ear.replay import EAR, EARConfig
    b = PostgresBackend(pg_url, DIM, "alice", schema=schema)
    assert b.last_feedback() == 0 and b.feedback_rows() == []
    with b.write(): s1 = b.log_feedback(1.7e9, "which db?", ["m1", "m2"], [1, -1], "", {"ids": ["m1", "m2"], "positions": [0, 1]}, b"\1" * 8)
    with b.write(): s2 = b.log_feedback(1.7e9 + 1, "who?", ["m3"], [-1], "")
    rows = b.feedback_rows()
    assert rows == [(s1, "which db?", [1, -1], {"ids": ["m1", "m2"], "positions": [0, 1]}, b"\1" * 8), (s2, "who?", [-1], None, None)]
    assert b.feedback_rows(after=s1) == rows[1:] and b.counts()["feedback"] == 2 and b.last_feedback() == s2 > s1
    ear = EAR(DIM, EARConfig(K=4, s=2), seed=0)
    E = vectors(4, seed=7)
    cands = Candidates(Query("q", "q"), E[0], [Memory(f"m{i}", "t", "semantic", "fact") for i in range(4)], E, E @ E[0])
    ear.observe(cands, [np.array([0, 1])], [np.array([1, -1], dtype=np.int8)])
    v1 = b.save_learner(ear, s2)
    assert learner_seq(v1) == s2 and b.learner == v1
    other = PostgresBackend(pg_url, DIM, "alice", schema=schema)
    assert other.refresh() == v1
    version, loaded = other.load_learner(v1)
    np.testing.assert_allclose(np.asarray(loaded.scores(cands)), np.asarray(ear.scores(cands)), atol=1e-6)
    assert b.save_learner(ear, s1) == v1  # an older checkpoint loses to the current one (and its rows go)
    v2 = b.save_learner(ear, s2 + 1)
    assert v2 > v1 and other.changed()
    assert other.load_learner(v1)[0] == v2  # the old checkpoint went; the pointer is followed
    assert b._q("SELECT count(*) FROM {s}.learners").fetchone()[0] == 1
    assert b.point_learner(v1) == v2 and b.prune_checkpoints() == 0  # not forced: the pointer stays
    b.save_learner(EAR(8, EARConfig(K=4, s=2), seed=0), s2 + 2)  # a learner of another dimension is refused on load
    with pytest.raises(ValueError, match="adapter: the stored learner .* has dimension 8"): other.load_learner(b.learner)
    assert PostgresBackend(pg_url, DIM, "carol", schema=schema).refresh() == ""  # other namespaces have no learner


WRITER = r"""
import sys, json, numpy as np
sys.path.insert(0, sys.argv[4])
from tests.test_postgres import rows_for, vectors
from earmem.memory.backends.postgres_search import PostgresBackend
from earmem.memory.index.mirror import SearchFilter
url, schema, w = sys.argv[1], sys.argv[2], int(sys.argv[3])
b = PostgresBackend(url, 16, "shared", schema=schema)
for k in range(10):
    V = vectors(20, seed=100 * w + k)
    with b.write() as rev:
        rows = rows_for(V, ids=False)
        ids = b.new_ids(len(rows), set())
        b.insert([(i, *r[1:]) for i, r in zip(ids, rows)], rev)
        b.audit_many([(1.0, i, "insert", {"writer": w}) for i in ids])
    b.candidates(V[0], 5, flt=SearchFilter(kinds=["fact"]))
    with b.write(): b.log_feedback(float(k), f"w{w}", ids[:2], [1, -1], b.learner)
print(b.rev)
"""


def test_writers_in_several_processes_lose_nothing(pg_url, schema):
    PostgresBackend(pg_url, DIM, "shared", schema=schema).close()  # create the schema once
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, pg_url, schema, str(w), str(ROOT)], cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for w in range(4)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [e[-2000:] for _, e in outs]
    b = PostgresBackend(pg_url, DIM, "shared", schema=schema)
    ids = b.ids()
    assert len(ids) == 4 * 10 * 20 == len(set(ids)) and b.rev == 4 * 10 * 2
    assert sorted(int(i[1:]) for i in ids) == list(range(1, 801))  # one id counter, no gaps, no reuse
    assert b.counts()["feedback"] == 40 and b.check() == 800
    assert b._q("SELECT count(*) FROM {s}.audit WHERE namespace='shared'").fetchone()[0] == 800


def test_a_failed_write_leaves_nothing(pg_url, schema):
    b = PostgresBackend(pg_url, DIM, "alice", schema=schema)
    V = vectors(10, seed=8)
    with b.write() as rev: b.insert(rows_for(V[:5]), rev)
    bad = rows_for(V[5:], start=5)
    bad[3] = (*bad[3][:13], np.zeros(DIM - 1, np.float32).tobytes())
    with pytest.raises(ValueError, match=r"embedding: memory 'm9' has a 15-dimensional"):
        with b.write() as rev: b.insert(rows_for(V[5:8], start=5)[:1], rev); b.insert(bad, rev)
    with pytest.raises(RuntimeError, match="boom"):
        with b.write() as rev: b.insert(rows_for(V[5:], start=5), rev); raise RuntimeError("boom")
    assert (b.rev, len(b.ids())) == (1, 5)
    with pytest.raises(Exception, match="duplicate key"):
        with b.write() as rev: b.insert(rows_for(V[:1]), rev)
    assert (b.rev, len(b.ids())) == (1, 5)
    with pytest.raises(ValueError, match="columns: \\['nope'\\]"):
        with b.write() as rev: b.update_many(("nope",), [("m1", (1,))], rev)
    with pytest.raises(ValueError, match="query: expected one finite embedding of dimension 16"): b.candidates(np.ones(3), 5)
    with pytest.raises(ValueError, match="K: expected a positive integer"): b.candidates(V[0], 0)
    with pytest.raises(TypeError, match="flt: expected a SearchFilter, got dict"): b.candidates(V[0], 5, flt={"store": "attic"})
    with pytest.raises(TypeError, match="flt: expected a SearchFilter"): b.hybrid_candidates(V[0], "memory", 5, 0.5, flt={"kinds": ["fact"]})
    ro = PostgresBackend(pg_url, DIM, "alice", schema=schema, readonly=True)
    with pytest.raises(PermissionError, match="read-only"):
        with ro.write(): pass
    assert ro.ids() == b.ids()


def test_clear_errors_naming_the_cause(pg_url, schema, tmp_path):
    with pytest.raises(ValueError, match="url: cannot reach a PostgreSQL server at postgresql://earmem:\\*\\*\\*@"):
        PostgresBackend(f"postgresql://earmem:secret@/postgres?host={tmp_path}", DIM, connect_timeout=2)
    with pytest.raises(ValueError, match="url: expected a postgresql://"): PostgresBackend("/some/folder", DIM)
    PostgresBackend(pg_url, DIM, schema=schema).close()
    with pytest.raises(ValueError, match=f"dim: the store in schema '{schema}' holds 16-dimensional vectors, got dim=8"):
        PostgresBackend(pg_url, 8, schema=schema)
    conn = connect_postgres(pg_url)
    conn.execute(f"DROP SCHEMA IF EXISTS {schema}_foreign CASCADE; CREATE SCHEMA {schema}_foreign; CREATE TABLE {schema}_foreign.orders (id int)")
    with pytest.raises(ValueError, match="already holds 1 tables that are not an earmem store"):
        PostgresBackend(pg_url, DIM, schema=f"{schema}_foreign")
    assert conn.execute(f"SELECT count(*) FROM information_schema.tables WHERE table_schema='{schema}_foreign'").fetchone()[0] == 1
    conn.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}_info; CREATE TABLE IF NOT EXISTS {schema}_info.info (key TEXT PRIMARY KEY, value TEXT)")
    conn.execute(f"INSERT INTO {schema}_info.info VALUES ('format', 'someone.else') ON CONFLICT DO NOTHING")
    with pytest.raises(ValueError, match="is not an earmem store \\(format 'someone.else'\\)"):
        PostgresBackend(pg_url, DIM, schema=f"{schema}_info")
    with pytest.raises(ValueError, match="schema: no earmem store"): PostgresBackend(pg_url, DIM, schema=f"{schema}_none", create=False)
    with pytest.raises(ValueError, match="schema: expected letters"): PostgresBackend(pg_url, DIM, schema="a; DROP TABLE x")
    with pytest.raises(ValueError, match="namespace: expected a non-empty string"): PostgresBackend(pg_url, DIM, namespace="")
    # a role that may not create the extension, in a database without it
    conn.execute("DROP DATABASE IF EXISTS earmem_noext"); conn.execute("CREATE DATABASE earmem_noext")
    conn.execute("DO $$BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname='earmem_weak') THEN CREATE ROLE earmem_weak LOGIN; END IF; END$$")
    weak = pg_url.replace("postgres:@", "earmem_weak:@").replace("/postgres?", "/earmem_noext?")
    with pytest.raises(ValueError, match="has no usable pgvector extension"): PostgresBackend(weak, DIM)


def test_manifest_and_size(pg_url, schema):
    b = PostgresBackend(pg_url, DIM, "alice", schema=schema)
    assert b.load_manifest() is None and b.size_bytes() > 0
    b.save_manifest({"encoder": "x", "dim": DIM}); b.save_manifest({"encoder": "y", "dim": DIM})
    assert PostgresBackend(pg_url, DIM, "alice", schema=schema).load_manifest() == {"dim": DIM, "encoder": "y"}
    assert PostgresBackend(pg_url, DIM, "bob", schema=schema).load_manifest() is None


def test_a_held_write_lock_times_out(pg_url, schema):
    a = PostgresBackend(pg_url, DIM, "alice", schema=schema)
    b = PostgresBackend(pg_url, DIM, "alice", schema=schema, lock_timeout=0.2)
    with a.write():
        with pytest.raises(TimeoutError, match="write lock of namespace 'alice'.*gave up after 0.2 s"):
            with b.write(): pass
        with PostgresBackend(pg_url, DIM, "bob", schema=schema, lock_timeout=0.2).write() as rev: assert rev == 1  # other namespaces do not wait
    with b.write() as rev: assert rev == 2  # the failed attempt left nothing
    a.close(); b.close()


def test_a_schema_from_before_the_stored_text_column_is_upgraded(pg_url, schema):
    "A memories table without `tsv` (the expression index of the first hybrid release) gets the column, its index, and ranks."
    b = PostgresBackend(pg_url, DIM, schema=schema)
    with b.write() as rev: b.insert(rows_for(vectors(6)), rev)
    b._q("DROP INDEX {s}.memories_tsv"); b._q("ALTER TABLE {s}.memories DROP COLUMN tsv")
    b._q("CREATE INDEX memories_text ON {s}.memories USING gin (to_tsvector('english', text))")
    b.close()
    b = PostgresBackend(pg_url, DIM, schema=schema)
    indexes = {r[0] for r in b._q("SELECT indexname FROM pg_indexes WHERE schemaname=%s", (schema,))}
    columns = {r[0] for r in b._q("SELECT column_name FROM information_schema.columns WHERE table_schema=%s", (schema,))}
    assert "tsv" in columns and "memories_tsv" in indexes and "memories_text" not in indexes
    where, params = b._where()
    assert len(b._lexical_rows("memory", 2, where, params)) == 2            # ranked on the new column
    b.lexical_budget = 5
    b._q("ANALYZE {s}.memories")                                              # the planner's estimates count the words
    assert b._lexical_rows("memory", 2, where, params) == []                # 6 matches > 5: left to the dense side
    b.close()


def test_rows_are_named_tuples_of_their_table(pg_url, schema, tmp_path):
    "Both backends hand back the same named rows: RecordRow, AuditEntry, ReplayRow, FeedbackEntry, MemoryRow."
    from earmem.memory.backends.boundary import AuditEntry, FeedbackEntry, RecordRow, ReplayRow
    from earmem.memory.index.mirror import MemoryRow
    V = vectors(5, seed=9)
    for b in (PostgresBackend(pg_url, DIM, "alice", schema=schema), sqlite_backend(tmp_path)):
        with b.write() as rev:
            b.insert(rows_for(V), rev); b.audit_many([(1.0, "m1", "insert", {"x": 1})])
            seq = b.log_feedback(2.0, "q", ["m1"], [1], "", {"ids": ["m1"], "positions": [0]}, b"\0" * 4)
        r = b.row("m2")
        assert type(r) is RecordRow and (r.id, r.text, json.loads(r.metadata)) == ("m2", "memory 1", {"i": 1})
        assert b.history("m1") == [AuditEntry(1.0, "m1", "insert", {"x": 1})] and b.history("m1")[0].detail == {"x": 1}
        assert b.feedback_rows() == [ReplayRow(seq, "q", [1], {"ids": ["m1"], "positions": [0]}, b"\0" * 4)]
        f = b.dump_feedback()[0]
        assert type(f) is FeedbackEntry and (f.seq, f.at, f.slate, f.learner) == (seq, 2.0, ["m1"], "")
        rows = b.dump_rows()
        assert type(rows[0]) is MemoryRow and rows == rows_for(V) and rows[3].embedding == V[3].tobytes()


PLANTED = ("pl%40nted%3As3cret", "Q-S3CRET-2")


def planted_url(pg_url):
    "The test server's URL carrying a password twice (user info, percent-escaped, and the query); the server ignores both."
    return pg_url.replace("postgres:@", f"postgres:{PLANTED[0]}@") + f"&password={PLANTED[1]}"


def assert_hidden(text):
    for s in (*PLANTED, "pl@nted", "s3cret", "S3CRET"):
        assert s not in text, (s, text)


def test_passwords_never_show(pg_url, schema, tmp_path):
    "repr and every error that names the URL show it through redact_url; a driver's message is scrubbed too."
    from earmem.memory.backends.boundary import redact_url
    url = planted_url(pg_url)
    b = PostgresBackend(url, DIM, "alice", schema=schema)
    assert_hidden(repr(b)); assert "postgres:***@" in repr(b) and "password=***" in repr(b) and "host=" in repr(b)
    with pytest.raises(TimeoutError) as e:
        other = PostgresBackend(url, DIM, "alice", schema=schema, lock_timeout=0.2)
        with b.write():
            with other.write(): pass
    assert_hidden(str(e.value))
    dead = url.replace(f"host={pg_url.split('host=')[1].split('&')[0]}", f"host={tmp_path}/none")
    with pytest.raises(ValueError, match="url: cannot reach a PostgreSQL server") as e: PostgresBackend(dead, DIM, connect_timeout=1)
    assert_hidden(str(e.value))
    with pytest.raises(ValueError) as e: PostgresBackend(url + "&port=notaport", DIM)
    assert_hidden(str(e.value))
    with pytest.raises(ValueError, match="schema: no earmem store") as e: PostgresBackend(url, DIM, schema=f"{schema}_none", create=False)
    assert_hidden(str(e.value))
    with pytest.raises(ValueError, match="url: expected a postgresql://") as e: PostgresBackend(f"host=x password={PLANTED[1]}", DIM)
    assert_hidden(str(e.value))
    assert redact_url(url).replace("***", "") in url.replace(PLANTED[0], "").replace(PLANTED[1], "")   # only the secrets went


def test_metadata_filters_in_sql_match_the_index(pg_url, schema, tmp_path):
    "_where's jsonb equality and _Index.mask's metadata_matches select the same rows, alone and with kind/entity filters."
    V = vectors(40, seed=11)
    metas = [{"team": "core", "n": 1}, {"team": "edge", "n": 1.0}, {"team": "core", "n": "1"}, {"team": None, "flag": True},
             {"flag": 1, "tags": ["core"]}, {}]
    rows = [(*r[:12], json.dumps(metas[i % len(metas)], sort_keys=True), r[13]) for i, r in enumerate(rows_for(V))]
    pg, sq = PostgresBackend(pg_url, DIM, "alice", schema=schema), sqlite_backend(tmp_path)
    for b in (pg, sq):
        with b.write() as rev: b.insert(rows, rev)
    filters = [{"metadata": {"team": "core"}}, {"metadata": {"n": 1}}, {"metadata": {"n": "1"}}, {"metadata": {"flag": True}},
               {"metadata": {"flag": 1}}, {"metadata": {"team": None}}, {"metadata": {"missing": None}}, {"metadata": {"tags": "core"}},
               {"metadata": {"team": "core", "n": 1}}, {"metadata": {"team": "core"}, "kinds": ["fact", "episode"]},
               {"metadata": {"n": 1}, "entities": ["dana"]}, {"metadata": {"team": "core"}, "store": "episodic"}]
    expect = lambda f: sorted(r[0] for r in rows if all(k in json.loads(r[12]) and json.loads(r[12])[k] == v and
                                                        type(json.loads(r[12])[k]) in ((int, float) if type(v) in (int, float) else (type(v),))
                                                        for k, v in f["metadata"].items()))
    for f in filters:
        got = [sorted(b.index.ids[r] for r in b.candidates(V[0], 40, False, SearchFilter(**f))[0]) for b in (pg, sq)]
        assert got[0] == got[1], f
        if len(f) == 1: assert got[0] == expect(f), f
    assert len(pg.candidates(V[0], 40, flt=SearchFilter(metadata={"n": 1}))[0]) == 14   # 1 and 1.0, not "1"
    assert pg.candidates(V[0], 40, flt=SearchFilter(metadata={"tags": "core"}))[0].size == 0   # a list never equals its member
