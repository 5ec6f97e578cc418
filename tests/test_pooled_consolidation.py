"""The pooled door from the command line (issue 39): `earmem memory consolidate --all-users [--exclude USER] [--dry-run] [--json]`
on a folder of three users (ana, bo, cy; the folder's root store 'default' is a user too, with no feedback), cy left out, on the
bundled MiniLM with a few rows each. The dry run changes nothing; the run trains one model on ana's and bo's rows only, switches
every store to it (cy's too: a pool serves one encoder; cy's lineage says its own rows were not used), records counts in each
lineage and never a name; a second run with the same logs trains nothing; a run stopped half-way is finished by the next; a store
of one user is refused with a clear error. The same door on a PostgreSQL URL (the `pg_url` server of conftest.py; skipped when none
can be started)."""
import json, os
import shutil
from pathlib import Path

import pytest

from earmem.cli import main
from earmem.core import Encoder
from earmem.memory.backends.boundary import MANIFEST_NAME, namespace_folder
from earmem.memory.rules.hygiene import StoreConfig
from earmem.memory.service.users import POOLED_DIR, StorePool

USERS = {"ana": ["Ana", "Abe"], "bo": ["Bo", "Bea"], "cy": ["Cy", "Cal", "Cem"]}   # cy gives 3 rows, the others 2 each


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    "A pool folder: each user's facts and one cited search per person (the critic cites the memory the question is about)."
    path = tmp_path_factory.mktemp("pool") / "team"
    with StorePool(path, encoder=Encoder(cache=False, progress=False), config=StoreConfig(min_relevance=-1)) as pool:
        for user, names in USERS.items():
            st = pool.store(user)
            st.add_many([f"{p} {v}" for p in names for v in ("keeps two grey cats", "plays the cello", "works as a nurse")], kind="fact")
            for p in names:
                hits = st.search(f"which pet does {p} have?", k=3)
                st.feedback(hits, cited=[h.id for h in hits if h.text == f"{p} keeps two grey cats"])
    return path


@pytest.fixture
def team(template, tmp_path):
    shutil.copytree(template, tmp_path / "team")
    return tmp_path / "team"


def _cli(capsys, *argv) -> tuple:
    "(exit code, stdout, stderr) of `earmem memory …`."
    code = main(["memory", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def _manifests(team: Path) -> dict:
    return {u: json.loads((namespace_folder(team, u) / MANIFEST_NAME).read_text()) for u in ("default", *USERS)}


def test_dry_run_counts_and_changes_nothing(team, capsys):
    before = {u: (namespace_folder(team, u) / MANIFEST_NAME).read_bytes() for u in ("default", *USERS)}
    code, out, err = _cli(capsys, "consolidate", "--all-users", "--exclude", "cy", "--dry-run", "-s", str(team), "--json")
    assert code == 0, err
    plan = json.loads(out)
    assert (plan["dry_run"], plan["users"], plan["excluded"]) == (True, ["default", "ana", "bo"], ["cy"])
    assert (plan["feedback_rows"], plan["users_with_feedback"], plan["memories"]) == (4, 2, 21)   # cy's 3 rows left out; every memory re-embedded
    assert plan["triples"] >= 2 and plan["estimated_minutes"]["total"] > 0
    assert {u: (namespace_folder(team, u) / MANIFEST_NAME).read_bytes() for u in ("default", *USERS)} == before
    assert not (team / POOLED_DIR).exists()


def test_pooled_consolidation_switches_every_user(team, capsys):
    code, out, err = _cli(capsys, "consolidate", "--all-users", "--exclude", "cy", "-s", str(team), "--json")
    assert code == 0, err
    res = json.loads(out)
    assert (res["dry_run"], res["switched"], res["reused"], res["feedback_rows"]) == (False, 4, False, 4)
    assert res["encoder"] == str((team / POOLED_DIR / res["key"]).resolve())
    m = _manifests(team)
    assert {u: x["encoder"] for u, x in m.items()} == dict.fromkeys(m, res["encoder"])   # one model, every store (cy's too)
    lin = {u: x["lineage"] for u, x in m.items()}
    counts = ("shared", "feedback_rows", "triples", "users", "users_with_feedback", "excluded_users")
    assert {k: lin["ana"][k] for k in counts} == {"shared": True, "feedback_rows": 4, "triples": res["triples"], "users": 3,
                                                  "users_with_feedback": 2, "excluded_users": 1}
    assert {u: lin[u]["own_feedback"] for u in lin} == {"default": True, "ana": True, "bo": True, "cy": False}
    assert all({k: lin[u][k] for k in counts} == {k: lin["ana"][k] for k in counts} for u in lin)
    text = json.dumps(list(lin.values()))
    assert not any(w in text for names in USERS.values() for w in names) and '"cy"' not in text and '"ana"' not in text   # counts, no names
    code, out, err = _cli(capsys, "search", "which pet does Cal have?", "-k", "1", "-s", str(team), "--user", "cy", "--json")
    assert code == 0, err
    assert json.loads(out)["hits"][0]["text"] == "Cal keeps two grey cats"          # the excluded user's store serves on the new model
    code, out, err = _cli(capsys, "consolidate", "--all-users", "--exclude", "cy", "-s", str(team), "--json")
    again = json.loads(out)
    assert (code, again["reused"], again["switched"], again["key"]) == (0, True, 0, res["key"])   # the same logs: nothing to do
    assert [p.name for p in (team / POOLED_DIR).iterdir()] == [res["key"]]
    # forgetting a user: clear says the pooled model learned from their log, and the next pooled model is trained without it
    code, out, err = _cli(capsys, "clear", "-s", str(team), "--user", "ana", "--yes", "--json")
    assert code == 0, err
    assert json.loads(out)["model"] == {"key": res["key"], "shared": True, "trained_on_erased_feedback": True,
                                        "retrain": "StorePool.consolidate_all / earmem memory consolidate --all-users: the pooled model every user's store uses learned from this log"}
    code, out, err = _cli(capsys, "clear", "-s", str(team), "--user", "cy", "--yes")
    assert (code, out.strip()) == (0, "erased 9 memories of user 'cy'"), err      # cy was left out: the model never saw cy's log
    code, out, err = _cli(capsys, "consolidate", "--all-users", "-s", str(team), "--json")
    after = json.loads(out)
    assert code == 0 and after["key"] != res["key"] and (after["feedback_rows"], after["users_with_feedback"]) == (2, 1)   # bo's rows only


def test_text_output_and_help(team, capsys):
    code, out, err = _cli(capsys, "consolidate", "--all-users", "--exclude", "cy", "--exclude", "bo", "--dry-run", "-s", str(team))
    assert code == 0, err
    assert "excluded: ['bo', 'cy']" in out and "users: ['default', 'ana']" in out and "feedback_rows: 2" in out
    assert main(["memory", "consolidate", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "--all-users" in text and "--exclude USER" in text and "--dry-run" in text and "--json" in text


def test_single_user_store_and_bad_arguments_are_refused(team, tmp_path, capsys):
    one = tmp_path / "one"
    assert main(["memory", "add", "Ann lives in Oslo", "--kind", "fact", "-s", str(one), "--encoder", "hashing"]) == 0
    capsys.readouterr()
    code, out, err = _cli(capsys, "consolidate", "--all-users", "-s", str(one))
    assert code == 2 and "holds one user 'default'" in err and "without --all-users" in err
    code, out, err = _cli(capsys, "consolidate", "--all-users", "--exclude", "cyy", "-s", str(team))
    assert code == 2 and "exclude: no user 'cyy'" in err                          # a misspelt opt-out never trains on that user
    code, out, err = _cli(capsys, "consolidate", "--exclude", "cy", "-s", str(team))
    assert code == 2 and "add --all-users" in err
    code, out, err = _cli(capsys, "consolidate", "--all-users", "--exclude", "default", "--exclude", "ana", "--exclude", "bo",
                          "--exclude", "cy", "-s", str(team))
    assert code == 2 and "every user of the pool is left out" in err
    assert {x["encoder"] for x in _manifests(team).values()} == {Encoder(cache=False, progress=False).model_id}   # nothing switched


def test_a_run_stopped_half_way_is_finished_by_running_it_again(team, capsys, monkeypatch):
    "A fault after the first two stores switched: each store is whole on one encoder, a server's pool serves every user, the re-run reuses the model."
    from earmem.memory import MemoryStore
    real, calls = MemoryStore.switch_encoder, []
    def flaky(self, *a, **k):
        calls.append(self.namespace)
        if len(calls) == 3: raise OSError("simulated crash before the third store's switch")
        return real(self, *a, **k)
    monkeypatch.setattr(MemoryStore, "switch_encoder", flaky)
    code, out, err = _cli(capsys, "consolidate", "--all-users", "--exclude", "cy", "-s", str(team), "--json")
    assert code == 2 and "simulated crash" in err
    pooled = str(next((team / POOLED_DIR).iterdir()).resolve())
    m = _manifests(team)
    assert sorted(u for u, x in m.items() if x["encoder"] == pooled) == sorted(calls[:2])        # two switched, whole; the rest untouched
    assert sum(x["encoder"] != pooled for x in m.values()) == 2
    with StorePool(team) as server:                                                         # mixed: every user still answers
        for user, names in USERS.items():
            assert server.store(user).search(f"which pet does {names[0]} have?", k=1)[0].text == f"{names[0]} keeps two grey cats"
    monkeypatch.setattr(MemoryStore, "switch_encoder", real)
    code, out, err = _cli(capsys, "consolidate", "--all-users", "--exclude", "cy", "-s", str(team), "--json")
    again = json.loads(out)
    assert (code, again["reused"], again["switched"], again["encoder"]) == (0, True, 2, pooled)   # no second training; the rest switched
    assert {x["encoder"] for x in _manifests(team).values()} == {pooled}


def test_postgres_pool(pg_url, capsys, tmp_path, monkeypatch):
    "The same door on a PostgreSQL URL: the users are namespaces of one database; the model is saved under the cache."
    import uuid
    monkeypatch.setenv("EARMEM_CACHE", str(tmp_path / "cache"))   # a URL pool's models go under the cache
    from urllib.parse import urlsplit, urlunsplit
    import psycopg
    db = "earmem_pool_" + uuid.uuid4().hex[:8]                 # a database of its own: its namespaces are exactly this pool's users
    with psycopg.connect(pg_url, autocommit=True) as c: c.execute(f"CREATE DATABASE {db}")
    url = urlunsplit(urlsplit(pg_url)._replace(path="/" + db))
    with StorePool(url, encoder=Encoder(cache=False, progress=False), config=StoreConfig(min_relevance=-1)) as pool:
        for user, names in USERS.items():
            st = pool.store(user)
            st.add_many([f"{p} {v}" for p in names for v in ("keeps two grey cats", "plays the cello")], kind="fact")
            for p in names:
                hits = st.search(f"which pet does {p} have?", k=3)
                st.feedback(hits, cited=[h.id for h in hits if h.text == f"{p} keeps two grey cats"])
    code, out, err = _cli(capsys, "consolidate", "--all-users", "--exclude", "cy", "-s", url, "--json")
    assert code == 0, err
    res = json.loads(out)
    assert (res["users"], res["excluded"], res["feedback_rows"], res["switched"]) == (["ana", "bo"], ["cy"], 4, 3)
    with StorePool(url) as pool:
        for user, names in USERS.items():
            st = pool.store(user, create=False)
            assert st.manifest["encoder"] == res["encoder"] and st.lineage["own_feedback"] == (user != "cy")
            assert st.search(f"which pet does {names[0]} have?", k=1)[0].text == f"{names[0]} keeps two grey cats"
    assert Path(res["encoder"]).parent.parent == tmp_path / "cache" / POOLED_DIR
    with psycopg.connect(pg_url, autocommit=True) as c: c.execute(f"DROP DATABASE {db} WITH (FORCE)")


POOLED = """
from earmem.memory.service.users import StorePool
with StorePool({path!r}) as pool: pool.consolidate_all(exclude="cy", progress=False)"""


@pytest.mark.slow
def test_sigkill_during_a_pooled_run(tmp_path, trials=int(os.environ.get("EARMEM_POOLED_CRASH_TRIALS", "5"))):
    """SIGKILL at a uniform moment of a pooled run (3 users + the root, 300 memories each, MiniLM): every user's store is whole on
    the old model or the new one, never half-switched; a second run finishes the switch without training again. The full count:
    EARMEM_POOLED_CRASH_TRIALS=50 pytest -q -s -m slow tests/test_pooled_consolidation.py -k sigkill."""
    import random, signal, subprocess, sys, time
    import numpy as np
    from earmem.memory import MemoryStore
    from test_consolidate import ENV, TRACE, _phases

    def whole(folder) -> str:
        "'old' or 'new' when the store checks out and 40 of its rows, evenly spread, hold their encoder's vectors; else the damage."
        with MemoryStore(folder) as st:
            st.check()
            ix = st._backend.index
            rows = sorted(ix.pos.values())[::max(1, len(ix.pos) // 40)]
            V = np.asarray(st.encoder.encode_documents([ix.texts[r] for r in rows]), np.float32)
            worst = float((V / np.linalg.norm(V, axis=1, keepdims=True) * ix.E[rows]).sum(1).min())
            if worst < 0.999: return f"half-switched: cosine {worst:.3f} under {st.manifest['encoder']}"
            return "old" if st.lineage is None else "new"
    template = tmp_path / "template"
    with StorePool(template, encoder=Encoder(cache=False, progress=False), config=StoreConfig(min_relevance=-1)) as pool:
        for user in ("default", *USERS):
            st = pool.store(user)
            st.add_many([f"memory number {i} about topic {i % 7} of {user}" for i in range(300)], kind="fact")
            for i in range(3):
                hits = st.search(f"memory number {i} about topic {i % 7} of {user}", k=5)
                st.feedback(hits, cited=[h.id for h in hits if h.text == f"memory number {i} about topic {i % 7} of {user}"])
    users = ("default", *USERS)
    t0 = time.time()
    shutil.copytree(template, tmp_path / "timed")
    subprocess.run([sys.executable, "-c", POOLED.format(path=str(tmp_path / "timed"))], env=ENV, check=True, timeout=1800)
    span = time.time() - t0
    rng, counts = random.Random(0), {}
    for t in range(trials):
        path, trace = tmp_path / f"t{t}", tmp_path / f"t{t}.trace"; shutil.copytree(template, path)
        p = subprocess.Popen([sys.executable, "-c", TRACE.format(trace=str(trace)) + POOLED.format(path=str(path))], env=ENV,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try: p.wait(timeout=rng.uniform(0.05, 1.05) * span); landed = "finished"
        except subprocess.TimeoutExpired:
            os.kill(p.pid, signal.SIGKILL); p.wait()
            landed = (_phases(trace) or [("launch", 0)])[-1][0]
        verdicts = [whole(namespace_folder(path, u)) for u in users]
        assert set(verdicts) <= {"old", "new"}, (t, landed, verdicts)   # never half-switched
        with StorePool(path) as pool: pool.consolidate_all(exclude="cy", progress=False)   # the next run finishes it
        assert [whole(namespace_folder(path, u)) for u in users] == ["new"] * len(users), t
        key = f"{landed}: {verdicts.count('new')} of {len(users)} switched"
        counts[key] = counts.get(key, 0) + 1
        print(f"[pooled SIGKILL] trial {t}: killed in {landed}, {verdicts}", flush=True)
        shutil.rmtree(path, ignore_errors=True); trace.unlink(missing_ok=True)
    print(f"\n[pooled SIGKILL] {trials} trials over a {span:.1f} s run: {json.dumps(counts, sort_keys=True)}")


def test_an_excluded_user_keeps_the_model_their_own_log_trained(team, capsys):
    "Left out of the pool, cy's feedback trains only cy's store: the model cy's own log trained stays cy's through a pooled run; the others switch."
    code, out, err = _cli(capsys, "consolidate", "-s", str(team), "--user", "cy", "--json")
    assert code == 0, err
    own = _manifests(team)["cy"]
    assert own["lineage"]["feedback_rows"] == 3 and not own["lineage"].get("shared")
    code, out, err = _cli(capsys, "consolidate", "--all-users", "--exclude", "cy", "-s", str(team), "--json")
    res = json.loads(out)
    assert code == 0, err
    assert (res["excluded"], res["kept_own"], res["switched"], res["feedback_rows"]) == (["cy"], ["cy"], 3, 4)
    m = _manifests(team)
    assert m["cy"] == own                                                               # cy's store untouched
    assert {u: m[u]["encoder"] for u in ("default", "ana", "bo")} == dict.fromkeys(("default", "ana", "bo"), res["encoder"])
    code, out, err = _cli(capsys, "search", "which pet does Cal have?", "-k", "1", "-s", str(team), "--user", "cy", "--json")
    assert code == 0 and json.loads(out)["hits"][0]["text"] == "Cal keeps two grey cats", err
    code, out, err = _cli(capsys, "consolidate", "--all-users", "-s", str(team), "--json")   # back in the pool: cy's rows train it, cy switches
    back = json.loads(out)
    assert code == 0 and (back["kept_own"], back["feedback_rows"], back["switched"]) == ([], 7, 4), err
