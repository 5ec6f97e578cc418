"""Issue 21's classes as cases, each one test: the network doors' access rules and fault map (earmem.serve.access around
the HTTP app), faults named at the store, and feedback you can trust (earmem.memory.store.trust). `CASES` joins the reliability
chapter's table next to tests/test_reliability.py's."""
import errno
import shutil
import sqlite3
import warnings
from pathlib import Path

import numpy as np
import pytest

from earmem.memory.rules.hygiene import HashingEncoder, StoreConfig
from earmem.memory.store import MemoryStore

CASES = []  # (class, case id, outcome, function(tmp_path))
KEY, READER, SECRET = "k" * 32, "r" * 32, "Pl4nted-s3cret-pw"


def case(cls: str, outcome: str, name: str | None = None):
    def deco(fn):
        CASES.append((cls, name or fn.__name__, outcome, fn)); return fn
    return deco


def store(tmp_path, **kw) -> MemoryStore:
    s = MemoryStore(tmp_path / "s", encoder=HashingEncoder(32), config=StoreConfig(min_relevance=-1.0), **kw)
    if not len(s):
        s.add_many([{"text": t, "kind": "fact"} for t in ("Dana chose Postgres for orders", "Caroline studies counseling",
                                                          "The deploy window is Friday")])
    return s


def client(tmp_path, limits=None, **kw):
    "A TestClient on the HTTP app behind `protect` (keys: one read-write, one read-only)."
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient
    from earmem.serve.access import Limits, parse_keys, protect
    from earmem.serve.http import create_app
    s = store(tmp_path, **kw)
    app = protect(create_app(s), s, keys=parse_keys(f"{KEY}\n{READER} read\n"), limits=limits or Limits(), environ={})
    return s, TestClient(app, base_url="http://127.0.0.1:8766", raise_server_exceptions=False)


AUTH = {"Authorization": f"Bearer {KEY}"}


def answer(r, status, contains=""):
    assert r.status_code == status, (r.status_code, r.text)
    err = r.json()["error"]
    assert contains in err and "Traceback" not in err, err
    return err


# ================================================================================================= network doors: access
DOOR_ACCESS = [  # (case id, request(client) -> response, status, message part)
    ("no-key", lambda c: c.get("/stats"), 401, "a valid API key is required"),
    ("wrong-key", lambda c: c.get("/stats", headers={"Authorization": "Bearer " + "x" * 32}), 401, "a valid API key"),
    ("x-api-key-header", lambda c: c.get("/stats", headers={"X-API-Key": KEY}), 200, None),
    ("dns-rebinding-host", lambda c: c.get("/stats", headers={**AUTH, "host": "evil.example"}), 421, "is not a name this server answers to"),
    ("foreign-origin", lambda c: c.get("/stats", headers={**AUTH, "origin": "https://evil.example"}), 403, "origin:"),
    ("null-origin", lambda c: c.get("/stats", headers={**AUTH, "origin": "null"}), 403, "origin:"),
    ("read-only-key-writes", lambda c: c.post("/memories", headers={"Authorization": f"Bearer {READER}"}, json={"text": "x y", "kind": "fact"}), 403, "read-only"),
    ("read-only-key-deletes", lambda c: c.delete("/memories/m1", headers={"Authorization": f"Bearer {READER}"}), 403, "read-only"),
    ("read-only-key-searches", lambda c: c.post("/search", headers={"Authorization": f"Bearer {READER}"}, json={"query": "Dana"}), 200, None),
]

for _id, _req, _status, _msg in DOOR_ACCESS:
    def _fn(tmp_path, req=_req, status=_status, msg=_msg):
        s, c = client(tmp_path); n = len(s)
        r = req(c)
        if msg is None: assert r.status_code == status, r.text
        else: answer(r, status, msg)
        assert len(s) == n
        s.close()
    case("network doors: access", f"answered with its status and a message; nothing written", f"http/{_id}")(_fn)


@case("network doors: access", "a server bound beyond loopback without keys refuses to start, naming EARMEM_API_KEY")
def refuse_open_bind(tmp_path):
    from earmem.serve.access import load_keys, require_keys
    with pytest.raises(ValueError, match="an API key is required; set EARMEM_API_KEY"): require_keys("0.0.0.0", load_keys({}))
    require_keys("127.0.0.1", [])


@case("network doors: access", "a per-user key may not act for another user (403)")
def per_user_key(tmp_path):
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient
    from earmem.serve.access import parse_keys, protect
    from earmem.serve.http import create_app
    s = store(tmp_path)
    c = TestClient(protect(create_app(s), s, keys=parse_keys(f"{KEY} write ana\n"), environ={}), base_url="http://localhost")
    answer(c.post("/search", headers=AUTH, json={"query": "Dana", "user_id": "bob"}), 403, "may not act for user 'bob'")
    s.close()


# ================================================================================================= network doors: limits
DOOR_LIMITS = [
    ("body-too-large", lambda c: c.post("/memories", headers=AUTH, content=b'{"text": "' + b"x" * 3000 + b'", "kind": "fact"}'), 413, "larger than the limit of 2,000 bytes"),
    ("text-too-long", lambda c: c.post("/memories", headers=AUTH, json={"text": "x" * 300, "kind": "fact"}), 422, "text: 300 characters; the limit is 200"),
    ("too-many-entities", lambda c: c.post("/memories", headers=AUTH, json={"text": "x y", "kind": "fact", "entities": list("abcdef")}), 422, "entities: 6 names; the limit is 4"),
    ("metadata-too-large", lambda c: c.post("/memories", headers=AUTH, json={"text": "x y", "kind": "fact", "metadata": {"k": "v" * 200}}), 422, "metadata: more than 100 bytes"),
    ("search-entities", lambda c: c.post("/search", headers=AUTH, json={"query": "x", "entities": [f"e{i}" for i in range(50)]}), 422, "entities: 50 names"),
    ("query-too-long", lambda c: c.post("/search", headers=AUTH, json={"query": "q" * 500}), 422, "query: 500 characters"),
]

for _id, _req, _status, _msg in DOOR_LIMITS:
    def _fn(tmp_path, req=_req, status=_status, msg=_msg):
        from earmem.serve.access import Limits
        s, c = client(tmp_path, Limits(body_bytes=2000, text_chars=200, entities=4, metadata_bytes=100)); n = len(s)
        answer(req(c), status, msg)
        assert len(s) == n
        s.close()
    case("network doors: limits", "413 / 422 naming the field and the limit; nothing written", f"http/{_id}")(_fn)


# ================================================================================================= network doors: faults
def _lock_held(tmp_path):
    s, c = client(tmp_path, lock_timeout=0.2)
    holder = sqlite3.connect(str(s.path / "memories.sqlite"), isolation_level=None); holder.execute("BEGIN IMMEDIATE")
    try: err = answer(c.post("/memories", headers=AUTH, json={"text": "Ana prefers tea", "kind": "preference"}), 409, "write lock")
    finally: holder.rollback(); holder.close()
    assert str(tmp_path) not in err
    s.close()


def _raising(method, exc):
    def fn(tmp_path):
        s, c = client(tmp_path)
        setattr(s, method, lambda *a, **k: (_ for _ in ()).throw(exc(tmp_path)))
        return s, c
    return fn


DOOR_FAULTS = [  # (case id, exception raised by the store, request, status, message part)
    ("disk-full", lambda p: OSError(errno.ENOSPC, f"No space left on device: '{p}/s/vectors.npy'"), "add", 507, "No space left"),
    ("read-only-store", lambda p: PermissionError(f"store: {p}/s is read-only (opened with readonly=True); nothing was written"), "add", 403, "read-only"),
    ("read-only-file-system", lambda p: OSError(errno.EROFS, "Read-only file system"), "add", 403, "Read-only file system"),
    ("backend-unavailable", lambda p: ConnectionError(f"postgresql://ana:{SECRET}@db/mem: server closed the connection"), "add", 503, "postgresql://ana:***@db/mem"),
    ("bad-value", lambda p: ValueError("importance: expected a number in [0, 1]"), "add", 422, "importance:"),
    ("unexpected-bug", lambda p: ZeroDivisionError(f"secret detail in {p}"), "add", 500, "internal error (ZeroDivisionError)"),
]

for _id, _exc, _method, _status, _msg in DOOR_FAULTS:
    def _fn(tmp_path, exc=_exc, method=_method, status=_status, msg=_msg):
        s, c = client(tmp_path)
        setattr(s, "add_many", lambda *a, **k: (_ for _ in ()).throw(exc(tmp_path)))
        err = answer(c.post("/memories", headers=AUTH, json={"text": "Ana prefers tea", "kind": "preference"}), status, msg)
        assert str(tmp_path) not in err and SECRET not in err and "secret detail" not in err, err
        del s.add_many
        s.close()
    case("network doors: faults named", "the store's fault as its status with the Python message, no server path or password, no traceback", f"http/{_id}")(_fn)

case("network doors: faults named", "write lock held by another process: 409 naming the lock, no server path", "http/lock-held")(_lock_held)


@case("network doors: faults named", "unknown id: 404 with the store's message, the folder replaced by <store>")
def unknown_id(tmp_path):
    s, c = client(tmp_path)
    err = answer(c.get("/memories/nope", headers=AUTH), 404, "no memory 'nope' in <store>")
    assert str(tmp_path) not in err
    s.close()


@case("network doors: faults named", "a planted PostgreSQL password in any URL form is redacted from every door message")
def planted_password(tmp_path):
    from earmem.serve.access import clean_message, fault
    forms = [f"postgresql://ana:{SECRET}@db:5432/mem", f"postgresql://ana:{SECRET}@x@db/mem", f"postgresql://db/mem?password={SECRET}&sslmode=require",
             f"host=db user=ana password={SECRET} dbname=mem", f"postgres://ana:{SECRET}@[::1]:5432/mem"]
    for u in forms:
        assert SECRET not in clean_message(f"cannot connect to {u}: refused"), u
        assert SECRET not in fault(ConnectionError(f"{u} is down"))[2]


# ================================================================================================= store faults (issue 21)
def _bad(fn_, exc, pattern):
    def fn(tmp_path):
        s = store(tmp_path); n = len(s)
        with pytest.raises(exc, match=pattern): fn_(s, tmp_path)
        assert len(s) == n
        s.close()
    return fn


STORE_FAULTS = [
    ("zero-width-only-text", lambda s, p: s.add("\u200b\u200d\ufeff", "fact"), ValueError, "text: has only invisible characters"),
    ("lone-surrogate-text", lambda s, p: s.add("abc \ud800", "fact"), ValueError, "text: contains a lone surrogate"),
    ("lone-surrogate-source", lambda s, p: s.add("abc", "fact", source="\udc00"), ValueError, "source: contains a lone surrogate"),
    ("lone-surrogate-metadata", lambda s, p: s.add("abc", "fact", metadata={"k": "\ud800"}), ValueError, "metadata: contains a lone surrogate"),
    ("lone-surrogate-query", lambda s, p: s.search("Dana \ud800"), ValueError, "query: contains a lone surrogate"),
    ("zero-width-query", lambda s, p: s.search("\u200b"), ValueError, "query: has only invisible"),
    ("all-zero-embedding", lambda s, p: s.add_many([{"text": "z", "kind": "fact"}], embeddings=np.zeros((1, 32), np.float32)), ValueError, "embeddings: row 0 is all zeros"),
    ("all-zero-query", lambda s, p: s.search(np.zeros(32, np.float32)), ValueError, "query: row 0 is all zeros"),
]
for _id, _fn_, _exc, _pat in STORE_FAULTS:
    case("store faults (issue 21)", f"{_exc.__name__} naming the field; nothing written", f"store/{_id}")(_bad(_fn_, _exc, _pat))


@case("store faults (issue 21)", "a store path below a file: ValueError naming the file")
def below_file(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(ValueError, match="is a file, so no store folder can be made below it"): MemoryStore(tmp_path / "f" / "s", encoder=HashingEncoder(32))


class _Flipped(HashingEncoder):
    def encode_documents(self, texts): return -super().encode_documents(texts)
    def encode_queries(self, texts): return -super().encode_queries(texts)


@case("store faults (issue 21)", "an encoder swapped for another of the same name and dimension: refused (probe fingerprint)")
def swapped_encoder(tmp_path):
    store(tmp_path).close()
    with pytest.raises(ValueError, match="embeds a probe text differently"): MemoryStore(tmp_path / "s", encoder=_Flipped(32))
    MemoryStore(tmp_path / "s", encoder=HashingEncoder(32)).close()


@case("store faults (issue 21)", "folder removed under an open store: writes refused (named), nothing vanishes; close() does not raise")
def folder_removed(tmp_path):
    s = store(tmp_path)
    shutil.rmtree(tmp_path / "s")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(PermissionError, match="folder was removed or moved"): s.add("Ana prefers tea", "preference")
        with pytest.raises(PermissionError, match="folder was removed or moved"): s.feedback(s.search("Dana", k=2), [])
        s.close()


@case("store faults (issue 21)", "acknowledged = committed: a failing checkpoint after feedback warns, never raises; the row counts once")
def deferred_checkpoint(tmp_path):
    s = store(tmp_path)
    s._backend.save_learner = lambda *a, **k: (_ for _ in ()).throw(OSError(errno.ENOSPC, "No space left on device"))
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        s.feedback(s.search("Dana", k=2), cited=[])
        s.close()
    assert any("checkpoint deferred" in str(x.message) for x in w)
    s = MemoryStore(tmp_path / "s")
    assert (s.stats()["feedback"], s.stats()["learner_steps"]) == (1, 1)
    s.close()


# ================================================================================================= learner trust
def _poisoned(tmp_path, guard):
    from earmem.memory.store.trust import Guard, feed_stream, hit_at_k, poison_store
    s, Q, right = poison_store(tmp_path / "p", memories=30, questions=10, dim=32, lr=0.05)
    s.guard = Guard(window=10) if guard else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        feed_stream(s, Q, right, 60)  # the learner gate holds off the first ~30
    return s, Q, right, hit_at_k(s, Q, right)


@case("learner trust", "poisoned feedback (always citing a wrong hit) cannot take hit@5 down behind the guard; refusals counted")
def guard_holds(tmp_path):
    s, Q, right, h = _poisoned(tmp_path, guard=True)
    assert h == 1.0 and s.guard_refused > 0 and s.health(window=10)["healthy"]
    s.close()


@case("learner trust", "an unguarded poisoned learner shows in health() (agreement below the floor); rollback(to=0) restores hit@5, across reopen")
def rollback_restores(tmp_path):
    from earmem.memory.store.trust import hit_at_k
    s, Q, right, h = _poisoned(tmp_path, guard=False)
    assert h < 1.0 and not s.health(window=10)["healthy"]
    assert s.rollback(to=0)["ignored"] == 60 and hit_at_k(s, Q, right) == 1.0
    s.close()
    s = MemoryStore(tmp_path / "p")
    assert hit_at_k(s, Q, right) == 1.0 and len(s.feedback_log()) == 60
    s.close()


# ================================================================================================= benchmark loaders (issue 21)
def _locomo_file(tmp_path, mutate=None):
    import json
    from earmem.toys import tiny_locomo
    data = tiny_locomo()
    if mutate: mutate(data)
    (tmp_path / "locomo10.json").write_text(json.dumps(data))
    return tmp_path / "locomo10.json"


def _turn0(d): return d[0]["conversation"]["session_1"][0]


LOADER_CASES = [  # (case id, mutate(data) or None, load_locomo keywords, error pattern or None when it must load)
    ("template-attribute-access", None, {"turn_template": "{text.__class__.__mro__}"}, "turn_template: .* uses attribute or index access"),
    ("template-index-access", None, {"turn_template": "{speaker[0]}"}, "uses attribute or index access"),
    ("template-type-error", lambda d: _turn0(d).update(blip_caption="a dog"), {"with_captions": True, "caption_template": "{caption:d}"}, "caption_template: cannot fill"),
    ("duplicate-ids", lambda d: _turn0(d).update(dia_id=f"obs:S1:{_turn0(d)['speaker']}:1"), {}, "the id 'obs:S1:.*:1'; ids must be unique"),
    ("observations-not-a-list", lambda d: d[0].update(observation={"session_1_observation": {"Ana": 5}}), {}, None),
]

for _id, _mut, _kw, _pat in LOADER_CASES:
    def _fn(tmp_path, mut=_mut, kw=_kw, pat=_pat):
        from earmem.experiments.data import load_locomo
        f = _locomo_file(tmp_path, mut)
        if pat is None: assert len(load_locomo(f, **kw).memories) > 0
        else:
            with pytest.raises(ValueError, match=pat): load_locomo(f, **kw)
    case("benchmark loaders", "a ValueError naming the argument or the file (or, for a malformed optional part, dropped and reported), never a raw TypeError", f"locomo/{_id}")(_fn)


@pytest.mark.parametrize("cls, name, outcome, fn", CASES, ids=[c[1] for c in CASES])
def test_case(tmp_path, cls, name, outcome, fn): fn(tmp_path)
