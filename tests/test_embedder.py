"""Encoders served over HTTP (chapter 06a, issue 40): `OpenAIEmbedder` against a scripted OpenAI-compatible
`/embeddings` server — batching and order, retries, every named failure × batch size leaving the store unchanged, the
manifest's record, reopening (from the manifest, via the environment, another model refused), consolidation's refusal,
and add/search end to end through `MemoryStore`, the CLI and the HTTP door."""
import json

import numpy as np
import pytest

from earmem.ear.embeddings import (EMBEDDINGS_KEY_ENV, EMBEDDINGS_URL_ENV, EmbeddingError, OpenAIEmbedder, StubEmbeddingsServer,
                                   remote_encoder, stub_vector)
from earmem.memory.backends.boundary import MANIFEST_NAME
from earmem.memory.rules.hygiene import StoreConfig
from earmem.memory.store import MemoryStore

TEXTS = ["Dana chose Postgres for orders", "Caroline studies counseling", "The deploy window is Friday",
         "Mel painted a sunrise over the lake", "Mel's kids love pottery"]


@pytest.fixture(autouse=True)
def _no_env(monkeypatch):
    for k in (EMBEDDINGS_URL_ENV, EMBEDDINGS_KEY_ENV, "OPENAI_API_KEY"): monkeypatch.delenv(k, raising=False)


@pytest.fixture
def srv():
    with StubEmbeddingsServer(dim=16) as s: yield s


def embedder(srv, model="stub-a", **kw):
    return OpenAIEmbedder(srv.url, model, **{"retry_wait": 0, "timeout": 5, **kw})


def expected(model, texts, dim=16):
    V = np.array([stub_vector(model, t, dim) for t in texts]); return V / np.linalg.norm(V, axis=1, keepdims=True)


def new_store(path, enc):
    s = MemoryStore(path, encoder=enc, config=StoreConfig(min_relevance=-1.0))
    s.add_many([{"text": t, "kind": "fact"} for t in TEXTS[:3]])
    return s


# ------------------------------------------------------------------------------------------------- the client itself
@pytest.mark.parametrize("batch_size", [1, 2, 3, 7, 64])
@pytest.mark.parametrize("n", [0, 1, 5, 13])
def test_batching_and_order(srv, batch_size, n):
    texts = [f"text number {i} of {n}" for i in range(n)]
    enc = embedder(srv, batch_size=batch_size)
    V = enc.encode_documents(texts)
    assert V.dtype == np.float32 and V.shape == (n, 16 if n else 0)
    assert srv.batches == [min(batch_size, n - i) for i in range(0, n, batch_size)]   # every request at most batch_size texts
    if n: np.testing.assert_allclose(V, expected("stub-a", texts), atol=1e-6)        # rows in text order, though replies are reversed
    np.testing.assert_allclose(enc.encode_queries(texts), V)


@pytest.mark.parametrize("faults", [[429], [503], [500, 502], [429, 503, 504]])
def test_retries_on_429_and_5xx(srv, faults):
    srv.faults = faults
    enc = embedder(srv, retries=3)
    np.testing.assert_allclose(enc.encode_documents(TEXTS[:2]), expected("stub-a", TEXTS[:2]), atol=1e-6)
    assert enc.client.requests == len(faults) + 1


def test_retries_run_out(srv):
    srv.faults = [503] * 5
    with pytest.raises(EmbeddingError, match="HTTP 503") as e: embedder(srv, retries=2).encode_documents(["x"])
    assert e.value.kind == "status" and e.value.status == 503 and len(srv.batches) == 3


def test_request_body_and_key(srv, monkeypatch):
    monkeypatch.setenv(EMBEDDINGS_KEY_ENV, "env-key")
    monkeypatch.setenv("EARMEM_LLM_API_KEY", "chat-key")          # a chat key is never sent to the embeddings host
    embedder(srv, dimensions=16).encode_documents(["a"])
    r = srv.requests[-1]
    assert r["path"] == "/v1/embeddings" and r["authorization"] == "Bearer env-key"
    assert r["body"] == {"model": "stub-a", "input": ["a"], "encoding_format": "float", "dimensions": 16}


def test_no_key_sends_none(srv, monkeypatch):
    monkeypatch.setenv("EARMEM_LLM_API_KEY", "chat-key")
    embedder(srv).encode_documents(["a"])
    assert srv.requests[-1]["authorization"] is None


def test_unreachable():
    enc = OpenAIEmbedder("http://127.0.0.1:9/v1", "m", retries=1, retry_wait=0, timeout=2)
    with pytest.raises(EmbeddingError, match="unreachable after 2") as e: enc.encode_documents(["x"])
    assert e.value.kind == "unreachable" and isinstance(e.value, ConnectionError)


# --------------------------------------------------------------- named failures × batch sizes: the store is unchanged
FAILURES = [(400, "status"), (401, "status"), (404, "status"), ("malformed", "malformed"), ("short", "dimension"), ("nan", "non-finite")]


@pytest.mark.parametrize("fault,kind", FAILURES)
@pytest.mark.parametrize("batch_size", [1, 2, 64])
def test_failure_writes_nothing(tmp_path, srv, fault, kind, batch_size):
    enc = embedder(srv, batch_size=batch_size, retries=0)
    with new_store(tmp_path / "s", enc) as s:
        before = len(s)
        items = [{"text": f"new memory {i} about gardening", "kind": "fact"} for i in range(3)]
        n_batches = -(-len(items) // batch_size)                 # the last of the add's requests fails
        srv.faults = [None] * len(srv.batches) + [None] * (n_batches - 1) + [fault]
        with pytest.raises(EmbeddingError) as e: s.add_many(items)
        assert e.value.kind == kind
        if isinstance(fault, int): assert e.value.status == fault and f"HTTP {fault}" in str(e.value)
        assert len(s) == before and not any("gardening" in h.text for h in s.search("gardening", k=10))
        s.add("The release is on Monday", kind="fact")     # the store still works afterwards
        assert len(s) == before + 1


def test_failure_in_the_middle_of_a_batched_add(tmp_path, srv):
    "The second of three requests fails: nothing of the first is written either."
    with new_store(tmp_path / "s", embedder(srv, batch_size=2, retries=0)) as s:
        before = len(s)
        srv.faults = [None] * len(srv.batches) + [None, "nan"]
        with pytest.raises(EmbeddingError, match="not finite"): s.add_many([{"text": f"item {i} of a batch", "kind": "fact"} for i in range(5)])
        assert len(s) == before


def test_wrong_dimension_later(tmp_path, srv):
    "The server switches to another vector length after the store was made: refused by name, nothing written."
    with new_store(tmp_path / "s", embedder(srv)) as s:
        srv.dims["stub-a"] = 8
        with pytest.raises(EmbeddingError, match="expected 16") as e: s.add("another one", kind="fact")
        assert e.value.kind == "dimension" and len(s) == 3


# ------------------------------------------------------------------------------------------- the manifest and reopening
def test_manifest_record_and_no_key(tmp_path, srv):
    with new_store(tmp_path / "s", embedder(srv, api_key="sk-secret")): pass
    text = (tmp_path / "s" / MANIFEST_NAME).read_text()
    m = json.loads(text)
    host = srv.url.split("/")[2]
    assert m["encoder"] == f"openai-compatible:{host}/stub-a" and m["dim"] == 16 and len(m["probe"]) == 16
    assert m["encoder_record"] == {"base_url": srv.url, "model": "stub-a", "dimensions": None}
    assert "sk-secret" not in text


def test_reopen_from_manifest_one_probe(tmp_path, srv):
    with new_store(tmp_path / "s", embedder(srv)): pass
    n = len(srv.requests)
    with MemoryStore(tmp_path / "s") as s:
        assert s.encoder.model_id.endswith("/stub-a")
        assert len(srv.requests) == n + 1                 # the fingerprint probe: one request per open
        assert s.search("Dana chose Postgres", k=1)[0].text == TEXTS[0]


def test_reopen_with_given_encoder_one_probe(tmp_path, srv):
    with new_store(tmp_path / "s", embedder(srv)): pass
    n = len(srv.requests)
    with MemoryStore(tmp_path / "s", encoder=embedder(srv)) as s:
        assert len(srv.requests) == n + 1
        s.search("deploy", k=1)
        assert len(srv.requests) == n + 2


def test_reopen_other_model_refused(tmp_path, srv):
    with new_store(tmp_path / "s", embedder(srv)): pass
    with pytest.raises(ValueError, match="was built with 'openai-compatible:.*/stub-a', got 'openai-compatible:.*/stub-b'"):
        MemoryStore(tmp_path / "s", encoder=embedder(srv, "stub-b"))


def test_reopen_other_weights_refused(tmp_path, srv):
    "Same name, other weights (the server now serves another model under that name): the probe names it."
    with new_store(tmp_path / "s", embedder(srv)): pass
    # the same model id but vectors of another model: emulate by a server that embeds "stub-a" requests as "stub-z"
    with StubEmbeddingsServer(dim=16) as liar:
        import earmem.ear.embeddings as E
        real = E.stub_vector
        E.stub_vector = lambda model, text, dim: real("stub-z", text, dim)
        try:
            enc = embedder(liar)
            enc.host = srv.url.split("/")[2]                 # claims the original host: only the probe can tell
            with pytest.raises(ValueError, match="embeds a probe text differently"): MemoryStore(tmp_path / "s", encoder=enc)
        finally: E.stub_vector = real


def test_reopen_via_env(tmp_path, srv, monkeypatch):
    "The manifest's URL moved (same host, another path): $EARMEM_EMBEDDINGS_URL wins; another host is refused by name."
    with new_store(tmp_path / "s", embedder(srv)): pass
    m = json.loads((tmp_path / "s" / MANIFEST_NAME).read_text())
    m["encoder_record"]["base_url"] = "http://127.0.0.1:9/gone/v1"
    (tmp_path / "s" / MANIFEST_NAME).write_text(json.dumps(m))
    monkeypatch.setenv(EMBEDDINGS_URL_ENV, srv.url)
    with MemoryStore(tmp_path / "s") as s: assert s.search("Caroline", k=1)[0].text == TEXTS[1]
    monkeypatch.setenv(EMBEDDINGS_URL_ENV, "http://10.1.2.3:8080/v1")
    with pytest.raises(ValueError, match="point it at 127.0.0.1"):
        with MemoryStore(tmp_path / "s") as s: s.encoder


def test_reopen_without_url_says_what_to_set(tmp_path, srv):
    with new_store(tmp_path / "s", embedder(srv)): pass
    m = json.loads((tmp_path / "s" / MANIFEST_NAME).read_text()); del m["encoder_record"]
    (tmp_path / "s" / MANIFEST_NAME).write_text(json.dumps(m))
    with MemoryStore(tmp_path / "s") as s:
        with pytest.raises(ValueError, match=f"set {EMBEDDINGS_URL_ENV}"): s.search("x")


def test_remote_encoder_checks():
    with pytest.raises(ValueError, match="expected an id"): remote_encoder("earmem/hashing-8-0")
    assert remote_encoder("openai-compatible:h:1/m", {"base_url": "http://h:1/v1", "dimensions": 64}).dimensions == 64


# ---------------------------------------------------------------------------------------------------- consolidation
def test_consolidation_refuses(tmp_path, srv):
    with new_store(tmp_path / "s", embedder(srv)) as s:
        hits = s.search("Dana chose Postgres", k=2)
        out = s.feedback(hits, cited=[hits[0].id])         # the adapter still learns
        assert out["labels"] == {hits[0].id: 1, hits[1].id: -1}
        with pytest.raises(TypeError, match="cannot be fine-tuned here"): s.consolidate(dry_run=True)
        with pytest.raises(TypeError, match="adapter still learns"): s.consolidate()


# ------------------------------------------------------------------------------------------------------ end to end
def test_pool_rebuilds_from_manifest(tmp_path, srv):
    from earmem.memory.service.users import StorePool
    with new_store(tmp_path / "s", embedder(srv)): pass
    with StorePool(tmp_path / "s") as pool:
        assert pool._shared_encoder().model_id.endswith("/stub-a")
        assert pool.store("default").search("deploy window", k=1)[0].text == TEXTS[2]


def test_cli_add_and_search(tmp_path, srv, monkeypatch, capsys):
    from earmem.cli import main
    monkeypatch.setenv(EMBEDDINGS_URL_ENV, srv.url)
    store = str(tmp_path / "cli")
    assert main(["memory", "add", "--store", store, "--encoder", "openai:stub-a", "Dana chose Postgres for orders"]) in (0, None)
    assert main(["memory", "search", "--store", store, "--json", "Postgres"]) in (0, None)
    out = capsys.readouterr().out
    assert "Dana chose Postgres" in out
    srv.faults = [None] * len(srv.batches) + [400]
    assert main(["memory", "add", "--store", store, "another memory"]) == 2
    assert "HTTP 400" in capsys.readouterr().err


def test_http_door(tmp_path, srv):
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient
    from earmem.serve.access import Limits, parse_keys, protect
    from earmem.serve.http import create_app
    key = "k" * 32
    s = new_store(tmp_path / "s", embedder(srv, retries=0))
    app = protect(create_app(s), s, keys=parse_keys(f"{key}\n"), limits=Limits(), environ={})
    c, auth = TestClient(app, base_url="http://127.0.0.1:8766", raise_server_exceptions=False), {"Authorization": f"Bearer {key}"}
    r = c.post("/memories", json={"text": "Mel painted a sunrise over the lake", "kind": "fact"}, headers=auth)
    assert r.status_code == 201, r.text
    r = c.post("/search", json={"query": "what did Mel paint at the lake", "k": 1}, headers=auth)
    assert r.status_code == 200 and "sunrise" in r.text, r.text
    n = len(s)
    srv.faults = [None] * len(srv.batches) + ["malformed"]
    r = c.post("/memories", json={"text": "this one is not embedded", "kind": "fact"}, headers=auth)
    assert r.status_code == 503 and "malformed" in r.json()["error"] and "Traceback" not in r.text, r.text
    assert len(s) == n
    s.close()


def test_migrate_keeps_the_record(tmp_path, srv):
    "A migrated store (another folder) rebuilds the same remote encoder from its own manifest."
    from earmem.memory.service.migrate import migrate_store
    with new_store(tmp_path / "a", embedder(srv)): pass
    out = migrate_store(tmp_path / "a", tmp_path / "b")
    assert out["memories"] == 3 and out["check"]
    m = json.loads((tmp_path / "b" / MANIFEST_NAME).read_text())
    assert m["encoder_record"]["base_url"] == srv.url
    with MemoryStore(tmp_path / "b") as s: assert s.search("Caroline studies", k=1)[0].text == TEXTS[1]


def test_inject_counts_tokens_without_the_server(tmp_path, srv):
    "Budgets need a token count: a remote encoder's is words and punctuation marks (no tokenizer download, no request)."
    with new_store(tmp_path / "s", embedder(srv)) as s:
        n = len(srv.requests)
        assert s.count_tokens("Dana chose Postgres, for orders.") == 7 and len(srv.requests) == n   # 5 words, 2 marks
        block = s.inject(s.search("which database did Dana choose?", k=3), budget_tokens=60)
        assert "Postgres" in str(block) and s.count_tokens(block.text if hasattr(block, "text") else str(block)) <= 60


def test_move_to_another_model_by_export_and_import(tmp_path, srv, monkeypatch):
    "The documented way to another server or model: export, then import into a store made with the new encoder (re-embedded)."
    from earmem.cli import main
    with new_store(tmp_path / "a", embedder(srv)) as a: a.export(tmp_path / "m.jsonl")
    monkeypatch.setenv(EMBEDDINGS_URL_ENV, srv.url)
    assert main(["memory", "import", "--store", str(tmp_path / "b"), "--encoder", "openai:stub-b", str(tmp_path / "m.jsonl")]) in (0, None)
    monkeypatch.delenv(EMBEDDINGS_URL_ENV)
    with MemoryStore(tmp_path / "b") as b:
        assert b.manifest["encoder"].endswith("/stub-b") and len(b) == 3
        assert b.search("deploy window Friday", k=1)[0].text == TEXTS[2]
