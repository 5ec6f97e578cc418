"""Tests of earmem.experiments.data and earmem.experiments.longmemeval that do not fit the notebooks: data-path
resolution, error messages, the LongMemEval fixture, download without a network, property-based evidence parsing, and
Table 1 on the real LoCoMo when it is available."""
import json
import os
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

import earmem.experiments.data as data
import earmem.cli.data as data_commands
from earmem.experiments.data import (Benchmark, clean_evidence, find_data_file, load_locomo, parse_dialogue_ids,
                         parse_locomo_datetime)
from earmem.experiments.longmemeval import load_longmemeval
from earmem.toys import tiny_locomo, tiny_longmemeval

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def locomo_dir(tmp_path):
    "A folder laid out like $EARMEM_DATA with the tiny LoCoMo in it."
    (tmp_path / "locomo").mkdir()
    (tmp_path / "locomo" / "locomo10.json").write_text(json.dumps(tiny_locomo()))
    return tmp_path


# ---- where the data comes from -----------------------------------------------------------------------------------
def test_explicit_path_file_and_folder(locomo_dir):
    assert load_locomo(locomo_dir).source == str(locomo_dir / "locomo" / "locomo10.json")
    assert load_locomo(locomo_dir / "locomo" / "locomo10.json").stats()["turns"] == 11
    assert load_locomo(locomo_dir / "locomo").stats()["turns"] == 11       # folder holding locomo10.json directly


def test_env_var_folder_and_file(locomo_dir, monkeypatch):
    monkeypatch.setenv("EARMEM_DATA", str(locomo_dir))
    assert load_locomo().stats()["conversations"] == 2
    monkeypatch.setenv("EARMEM_DATA", str(locomo_dir / "locomo" / "locomo10.json"))
    assert load_locomo().stats()["conversations"] == 2


def test_default_folder_is_the_cache(locomo_dir, monkeypatch, tmp_path_factory):
    monkeypatch.delenv("EARMEM_DATA", raising=False)
    cache = tmp_path_factory.mktemp("cache")
    monkeypatch.setenv("EARMEM_CACHE", str(cache))
    with pytest.raises(FileNotFoundError) as e:
        load_locomo()
    msg = str(e.value)
    assert str(cache / "data" / "locomo" / "locomo10.json") in msg and "snap-research/locomo" in msg
    assert "data/locomo10.json" in msg and "download=True" in msg
    (cache / "data" / "locomo").mkdir(parents=True)
    (cache / "data" / "locomo" / "locomo10.json").write_text(json.dumps(tiny_locomo()))
    assert load_locomo().stats()["queries"] == 9


def test_explicit_path_does_not_fall_back(locomo_dir, monkeypatch, tmp_path):
    monkeypatch.setenv("EARMEM_DATA", str(locomo_dir))
    with pytest.raises(FileNotFoundError, match="the path argument"):
        load_locomo(tmp_path / "elsewhere.json")


def test_path_type_error():
    with pytest.raises(TypeError, match="^path:"):
        load_locomo(42)


# ---- malformed files ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("content, expected", [
    ("{oops", "is not valid JSON"),
    ("", "is not valid JSON"),
    ('{"sample_id": "x"}', "the top level is dict"),
    ("[]", "empty list"),
    ('[{"sample_id": "x", "conversation": {}, "qa": []}]', "has no session_N dialogue list"),
    ('[{"sample_id": "x", "conversation": {"session_1": []}, "qa": [{"question": "?"}]}]', "no integer category"),
    ('[{"sample_id": "x", "conversation": {"session_1": [{"speaker": "A", "dia_id": "D1:1", "text": "a"},'
     ' {"speaker": "B", "dia_id": "D1:1", "text": "b"}]}, "qa": []}]', "dia_id 'D1:1' twice"),
])
def test_malformed_locomo(tmp_path, content, expected):
    f = tmp_path / "locomo10.json"
    f.write_text(content)
    with pytest.raises(ValueError) as e:
        load_locomo(f)
    assert str(e.value).startswith(f"path: {f}") and expected in str(e.value)


def test_not_utf8(tmp_path):
    f = tmp_path / "locomo10.json"
    f.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(ValueError, match="not UTF-8"):
        load_locomo(f)


# ---- download (no network here: conftest's http_folder serves the files on 127.0.0.1) ----------------------------


def _serve_tiny(folder) -> str:
    body = json.dumps(tiny_locomo()).encode()
    (folder / "locomo10.json").write_bytes(body)
    return data.hashlib.sha256(body).hexdigest()


def test_pinned_locomo_checksum_is_the_shared_file():
    shared = Path("/work/shared/data/locomo/locomo10.json")
    if not shared.is_file():
        pytest.skip("the shared LoCoMo file is not here")
    assert data.sha256_of(shared) == data.LOCOMO_SHA256 and shared.stat().st_size == 2_168_972


def test_download_when_missing(tmp_path, http_folder, monkeypatch):
    base, folder = http_folder
    pin = _serve_tiny(folder)
    monkeypatch.setattr(data, "LOCOMO_URL", f"{base}/locomo10.json")
    monkeypatch.setattr(data, "LOCOMO_SHA256", pin)
    monkeypatch.setattr(data, "download_locomo", lambda dest: data.fetch_file(f"{base}/locomo10.json", dest, pin, progress=False))
    bench = load_locomo(tmp_path / "d", download=True)
    assert bench.stats()["turns"] == 11 and (tmp_path / "d" / "locomo" / "locomo10.json").is_file()
    (folder / "locomo10.json").unlink()                      # present now: no second download
    assert load_locomo(tmp_path / "d", download=True).stats()["turns"] == 11


def test_download_data_verifies_and_is_atomic(tmp_path, http_folder):
    base, folder = http_folder
    pin = _serve_tiny(folder)
    got = data_commands.download_data("locomo", tmp_path / "d", url=f"{base}/locomo10.json", sha256=pin, progress=False)
    assert got == {"name": "locomo", "path": str(tmp_path / "d" / "locomo" / "locomo10.json"), "action": "downloaded",
                   "verified": True}
    assert data.sha256_of(got["path"]) == pin
    again = data_commands.download_data("locomo", tmp_path / "d", url=f"{base}/locomo10.json", sha256=pin, progress=False)
    assert again["action"] == "present" and again["verified"] is True
    with pytest.raises(ValueError, match="sha256: .* expected 0{64}"):
        data_commands.download_data("locomo", tmp_path / "e", url=f"{base}/locomo10.json", sha256="0" * 64, progress=False)
    assert not (tmp_path / "e").exists()                 # no partial or wrong file left behind, nor a folder made for it


def test_download_of_garbage_leaves_nothing(tmp_path, http_folder):
    base, folder = http_folder
    (folder / "page.html").write_text("<html>not found</html>")
    with pytest.raises(ValueError, match="did not return LoCoMo JSON"):
        data.download_locomo(tmp_path / "x.json", url=f"{base}/page.html", sha256=False)
    with pytest.raises(ValueError, match="sha256:"):                      # the pinned checksum catches it first
        data.download_locomo(tmp_path / "x.json", url=f"{base}/page.html")
    assert list(tmp_path.glob("*x.json*")) == []


def test_download_longmemeval_checks_the_structure(tmp_path, http_folder):
    base, folder = http_folder
    (folder / "longmemeval_s").write_text(json.dumps(tiny_longmemeval()))
    _serve_tiny(folder)
    got = data_commands.download_data("longmemeval", tmp_path, url=f"{base}/longmemeval_s", progress=False)
    assert got["verified"] is None and load_longmemeval(tmp_path).stats()["queries"] == 3
    with pytest.raises(ValueError, match="not in the LongMemEval format"):
        data_commands.download_data("longmemeval", tmp_path / "b", url=f"{base}/locomo10.json", progress=False)


def test_offline_is_one_sentence(tmp_path, http_folder):
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()                                                              # nothing listens there now
    with pytest.raises(data.DownloadError) as e:
        data_commands.download_data("locomo", tmp_path, url=f"http://127.0.0.1:{port}/locomo10.json", progress=False, timeout=5)
    msg = str(e.value)
    assert msg.startswith(f"url: cannot reach http://127.0.0.1:{port}/locomo10.json") and "offline" in msg and "\n" not in msg
    base, _ = http_folder
    with pytest.raises(data.DownloadError, match="HTTP 404"):
        data_commands.download_data("locomo", tmp_path, url=f"{base}/nothing.json", progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["srv"]


def test_official_sources():
    assert data_commands.DATA_SOURCES["locomo"].url == "https://raw.githubusercontent.com/snap-research/locomo/main/data/locomo10.json"
    assert data_commands.DATA_SOURCES["longmemeval"].url == \
        "https://huggingface.co/datasets/xiaowu0162/longmemeval/resolve/main/longmemeval_s"
    assert data_commands.DATA_SOURCES["locomo"].names[0] == "locomo/locomo10.json"
    with pytest.raises(ValueError, match="name: unknown benchmark 'mmlu'"):
        data_commands.download_data("mmlu")


def test_data_report(locomo_dir, monkeypatch, tmp_path):
    rep = data_commands.data_report(locomo_dir)
    assert rep["root"] == str(locomo_dir) and rep["origin"] == "the path argument"
    lo = rep["benchmarks"]["locomo"]
    assert lo["found"] == str(locomo_dir / "locomo" / "locomo10.json") and lo["verified"] is False and lo["bytes"] > 0
    assert rep["benchmarks"]["longmemeval"]["found"] is None
    assert rep["benchmarks"]["longmemeval"]["looked"][0] == str(locomo_dir / "longmemeval" / "longmemeval_s.json")
    monkeypatch.setenv("EARMEM_DATA", str(tmp_path))
    assert data_commands.data_report()["origin"] == "$EARMEM_DATA"
    monkeypatch.delenv("EARMEM_DATA")
    monkeypatch.setenv("EARMEM_CACHE", str(tmp_path / "cache"))
    rep = data_commands.data_report()
    assert rep["root"] == str(tmp_path / "cache" / "data") and rep["origin"].startswith("the default data folder")


# ---- typed fields and options (a string "false" is not a boolean) --------------------------------------------------
@pytest.mark.parametrize("mutate, expected", [
    (lambda d: d[0]["haystack_sessions"][0][0].__setitem__("has_answer", "false"), "turn 0 field has_answer is 'false'"),
    (lambda d: d[0]["haystack_sessions"][0][0].__setitem__("has_answer", 1), "field has_answer is 1"),
    (lambda d: d[1].__setitem__("question", 7), "field question is a int, expected str"),
    (lambda d: d[1].__setitem__("question_type", ["x"]), "field question_type is a list"),
    (lambda d: d[0].__setitem__("answer_session_ids", "s1"), "field answer_session_ids is a str"),
])
def test_longmemeval_field_types(tmp_path, mutate, expected):
    d = tiny_longmemeval()
    mutate(d)
    f = tmp_path / "longmemeval_s.json"
    f.write_text(json.dumps(d))
    with pytest.raises(ValueError) as e:
        load_longmemeval(f)
    assert str(e.value).startswith(f"path: {f} is not in the LongMemEval format") and expected in str(e.value)


def test_locomo_field_types(tmp_path):
    d = tiny_locomo()
    d[0]["conversation"]["session_1_date_time"] = 20230508
    f = tmp_path / "locomo10.json"
    f.write_text(json.dumps(d))
    with pytest.raises(ValueError, match="field session_1_date_time is not a string") as e:
        load_locomo(f)
    assert str(e.value).startswith(f"path: {f}")
    d = tiny_locomo()
    d[0]["qa"][0]["category"] = True
    f.write_text(json.dumps(d))
    with pytest.raises(ValueError, match=r"qa\[0\] has no integer category"):
        load_locomo(f)


@pytest.mark.parametrize("loader, kw, expected", [
    (load_locomo, {"include_adversarial": "false"}, "include_adversarial: expected True or False, got 'false'"),
    (load_locomo, {"with_observations": 0}, "with_observations: expected True or False, got 0"),
    (load_locomo, {"download": "yes"}, "download: expected True or False"),
    (load_locomo, {"turn_template": 3}, "turn_template: expected a template string"),
    (load_longmemeval, {"score_abstention": "true"}, "score_abstention: expected True or False"),
    (load_longmemeval, {"date_template": None}, "date_template: expected a template string"),
])
def test_loader_options_are_typed(locomo_dir, loader, kw, expected):
    with pytest.raises(TypeError) as e:
        loader(locomo_dir, **kw)
    assert str(e.value).startswith(expected)


# ---- evidence clean-up ------------------------------------------------------------------------------------------------
def test_tiny_evidence_report():
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "x.json"
        f.write_text(json.dumps(tiny_locomo()))
        bench = load_locomo(f)
    by_query = {}
    for r in bench.evidence_report:
        assert set(r) == {"query", "raw", "action"}
        by_query.setdefault(r["query"], []).append(r["action"])
    assert any("no such turn" in a for a in by_query["tiny-1:6"]) and any("unreadable" in a for a in by_query["tiny-1:6"])
    assert by_query["tiny-1:4"] == ["no usable evidence left: query kept but not scored"]
    assert bench.stats()["queries"] - bench.stats()["scorable"] == 1


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40))
def test_parse_never_raises_and_is_canonical(raw):
    ids, bad = parse_dialogue_ids(raw)
    for i in ids:
        assert parse_dialogue_ids(i) == ([i], [])           # canonical ids parse to themselves
    gold, report = clean_evidence([raw], set(ids), "q")
    assert gold == list(dict.fromkeys(ids))


@given(st.lists(st.tuples(st.integers(1, 40), st.integers(1, 60)), min_size=1, max_size=5),
       st.sampled_from(["; ", " ", ", ", ","]))
def test_joined_ids_are_split(pairs, sep):
    raw = sep.join(f"D{s}:{t}" for s, t in pairs)
    assert parse_dialogue_ids(raw) == ([f"D{s}:{t}" for s, t in pairs], [])


def test_datetime_all_real_formats():
    assert parse_locomo_datetime("8:56 pm on 20 July, 2023") == "2023-07-20T20:56:00"
    assert parse_locomo_datetime("10:37 am on 27 June, 2023") == "2023-06-27T10:37:00"


# ---- splits -----------------------------------------------------------------------------------------------------------
def test_split_is_a_partition_and_reproducible(locomo_dir):
    bench = load_locomo(locomo_dir)
    for seed in range(5):
        tr, te = bench.split(0.3, seed=seed, scorable_only=False)
        ids = [q.id for q in tr + te]
        assert sorted(ids) == sorted(q.id for q in bench.query_objects(scorable_only=False))
        assert len(te) == round(0.3 * 9)
        assert [q.id for q in te] == [q.id for q in bench.split(0.3, seed=seed, scorable_only=False)[1]]
        # dropping unscorable queries does not move any other query between the parts
        tr2, te2 = bench.split(0.3, seed=seed)
        assert [q.id for q in te2] == [q.id for q in te if q.gold]


# ---- LongMemEval fixture --------------------------------------------------------------------------------------------
def test_fixture_matches_builder():
    assert json.loads((FIXTURES / "longmemeval_s_tiny.json").read_text()) == tiny_longmemeval()


def test_longmemeval_fixture():
    bench = load_longmemeval(FIXTURES / "longmemeval_s_tiny.json")
    assert isinstance(bench, Benchmark) and bench.name == "longmemeval"
    assert bench.stats() == {"queries": 3, "conversations": 3, "sessions": 7, "turns": 15, "scorable": 2,
                             "observations": 0}
    assert bench.bank_ids == ["e47becba", "gpt4_2655b836", "e47becba_abs"]
    q = {q.id: q for q in bench.query_objects(scorable_only=False)}
    assert q["gpt4_2655b836"].gold == ("answer_4be1b6b4_2:0",)
    assert q["gpt4_2655b836"].category == "temporal-reasoning"
    assert q["e47becba_abs"].metadata["abstention"] and not q["e47becba_abs"].metadata["scorable"]
    assert q["e47becba"].metadata["question_timestamp"] == "2023-05-30T23:40:00"
    banks = bench.banks()
    assert [m.id for m in banks["gpt4_2655b836"]] == ["answer_4be1b6b4_2:0", "answer_4be1b6b4_2:1",
                                                       "answer_4be1b6b4_2:2", "sharegpt_c3_1:0", "sharegpt_c3_1:1"]
    assert banks["gpt4_2655b836"][1].text == "assistant: Try a software update or ask the dealer."


def test_longmemeval_env_folder(tmp_path, monkeypatch):
    (tmp_path / "longmemeval").mkdir()
    (tmp_path / "longmemeval" / "longmemeval_s.json").write_text((FIXTURES / "longmemeval_s_tiny.json").read_text())
    monkeypatch.setenv("EARMEM_DATA", str(tmp_path))
    assert load_longmemeval().stats()["queries"] == 3


def test_longmemeval_repeated_session_id(tmp_path):
    d = tiny_longmemeval()
    d[0]["haystack_session_ids"][2] = d[0]["haystack_session_ids"][0]
    f = tmp_path / "l.json"
    f.write_text(json.dumps(d))
    bench = load_longmemeval(f)
    ids = [m.id for m in bench.memory_objects("e47becba")]
    assert len(ids) == len(set(ids)) and "sharegpt_a1_0#2:0" in ids
    assert any("renamed" in r["action"] for r in bench.evidence_report)


@pytest.mark.parametrize("mutate, expected", [
    (lambda d: d[0].pop("haystack_sessions"), "has no haystack_sessions"),
    (lambda d: d[1].__setitem__("question_id", d[0]["question_id"]), "repeated question_id"),
    (lambda d: d[0]["haystack_dates"].pop(), "one date per session"),
    (lambda d: d[0]["haystack_sessions"][0].append({"role": "user"}), "lacks a role or content"),
])
def test_malformed_longmemeval(tmp_path, mutate, expected):
    d = tiny_longmemeval()
    mutate(d)
    f = tmp_path / "l.json"
    f.write_text(json.dumps(d))
    with pytest.raises(ValueError, match=expected):
        load_longmemeval(f)


# ---- the real LoCoMo (about one second, no encoding) ------------------------------------------------------------------
def _real_locomo():
    try:
        return find_data_file(None, ["locomo/locomo10.json", "locomo10.json"], "LoCoMo", "")
    except FileNotFoundError:
        pytest.skip("the official LoCoMo file is not available (set EARMEM_DATA)")


def test_real_locomo_table1():
    bench = load_locomo(_real_locomo())
    s = bench.stats()
    assert (s["queries"], s["conversations"], s["sessions"], s["turns"]) == (1540, 10, 272, 5882)
    assert s["scorable"] == 1536                              # four questions have no evidence in the file
    assert len(bench.split(0.2, seed=0, scorable_only=False)[0]) == 1232
    assert all(len(q.gold) > 0 for q in bench.query_objects())
    turn_ids = {b: {m.id for m in ms} for b, ms in bench.banks("episodic").items()}
    assert all(set(q.gold) <= turn_ids[q.bank] for q in bench.query_objects())   # every gold id names a real turn


def test_a_first_run_says_its_encoding_cost_before_it_starts(locomo_dir, tmp_path, capfd):
    "Issue 41: `prepare` (what `earmem reproduce` runs) says how many memories, then questions, it will encode before each starts; a second run says nothing."
    from earmem.core import Encoder
    from earmem.experiments.evaluation import prepare
    bench = load_locomo(locomo_dir)
    enc = Encoder(cache_dir=tmp_path / "cache", batch_size=2, progress=True)
    prep = prepare(bench, enc, K=2)
    err = capfd.readouterr().err
    memories = len({m.text for ms in bench.banks().values() for m in ms})         # distinct texts: each is encoded once
    questions = len({q.text for q in prep.train + prep.dev + prep.test})
    said = [l for l in err.splitlines() if l.startswith("earmem: encoding")]
    assert [l.split(" not encoded")[0] for l in said] == [f"earmem: encoding {memories} documents", f"earmem: encoding {questions} queries"], err
    assert err.index(said[0]) < err.index("encoding documents") and err.index(said[1]) < err.index("encoding queries"), err   # before the bars
    prepare(bench, Encoder(cache_dir=tmp_path / "cache", batch_size=2, progress=True), K=2)
    assert "earmem: encoding" not in capfd.readouterr().err                       # cached: nothing to say
