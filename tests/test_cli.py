"""Tests of the `earmem` command line (earmem.cli.main): help on every command, one-line errors with exit code 2,
a full run on a tiny LoCoMo-format file in the mode spellings and their older flag spellings, and the `earmem memory`
commands. In-process through `main([...])`, plus a few subprocess runs of `python -m earmem.cli` and of the installed
console script."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from earmem.cli import main, memory_cli
from earmem.toys import tiny_locomo
from earmem.experiments.evaluation import METHODS

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    "A data folder with the tiny LoCoMo, and a private embedding cache shared by this module's tests (so the model loads once)."
    root = tmp_path_factory.mktemp("cli")
    (root / "locomo").mkdir()
    (root / "locomo" / "locomo10.json").write_text(json.dumps(tiny_locomo()))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("EARMEM_CACHE", str(root / "cache"))
        mp.setenv("EARMEM_DATA", str(root))
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.delenv("EARMEM_DEBUG", raising=False)
        yield root


def run(capsys, *argv):
    "main(argv) → (exit code, stdout, stderr)."
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def one_line_error(err: str, contains: str):
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("earmem: error: ") and contains in lines[0], err
    assert "Traceback" not in err


# ---- help -------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("argv", [["--help"], ["reproduce", "--help"], ["reproduce", "locomo", "--help"],
                                  ["reproduce", "longmemeval", "--help"], ["reproduce", "locomo", "tables", "--help"],
                                  ["reproduce", "locomo", "method", "--help"], ["reproduce", "locomo", "analysis", "--help"],
                                  ["reproduce", "longmemeval", "earm", "--help"], ["memory", "--help"],
                                  ["data", "--help"], ["data", "download", "--help"], ["data", "path", "--help"],
                                  ["serve", "--help"], ["serve", "mcp", "--help"], ["serve", "http", "--help"]])
def test_help(capsys, argv):
    code, out, _ = run(capsys, *argv)
    assert code == 0 and out.startswith("usage: earmem")


def test_help_lists_options_and_methods(capsys):
    _, out, _ = run(capsys, "reproduce", "locomo", "--help")
    for opt in ("--method", "--split", "--encoder", "--k", "--K", "--seed", "--json", "--data", "--quiet"):
        assert opt in out
    assert all(m in out for m in METHODS)
    _, out, _ = run(capsys, "reproduce", "locomo", "method", "--help")
    assert all(m in out for m in METHODS) and "--split" in out and "--seeds" not in out


def test_help_says_what_k_and_K_are(capsys):
    "--k is the Recall@k / Hit@k cut-off and slate size s; --K is EAR's candidate count."
    _, out, _ = run(capsys, "reproduce", "locomo", "--help")
    text = " ".join(out.split())
    assert "k, the cut-off of Recall@k and Hit@k, which is also the slate size s" in text
    assert "K, EAR's candidate count" in text


def test_version(capsys):
    code, out, _ = run(capsys, "--version")
    assert code == 0 and out.startswith("earmem ")


# ---- usage errors -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("argv, contains", [
    ([], "required"),
    (["reproduce"], "required"),
    (["reproduce", "nosuchbench"], "invalid choice"),
    (["reproduce", "locomo", "--split", "train"], "invalid choice: 'train'"),
    (["reproduce", "locomo", "--method", "oracle"], "invalid choice: 'oracle'"),
    (["reproduce", "locomo", "method", "oracle"], "invalid choice: 'oracle'"),
    (["reproduce", "locomo", "method"], "required"),
    (["reproduce", "locomo", "earm", "--methods", "all"], "unrecognized arguments"),
    (["memory"], "required"),
    (["memory", "add"], "required: text"),
    (["reproduce", "locomo", "--k", "five"], "invalid int value"),
    (["reproduce", "locomo", "--bogus"], "unrecognized arguments"),
])
def test_usage_errors(capsys, argv, contains):
    code, _, err = run(capsys, *argv)
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and contains in err and "Traceback" not in err


# ---- data and configuration errors --------------------------------------------------------------------------------------
def test_missing_data(env, capsys, tmp_path):
    code, _, err = run(capsys, "reproduce", "locomo", "--data", str(tmp_path / "none"), "--quiet")
    assert code == 2
    one_line_error(err, "LoCoMo data not found")
    assert "snap-research/locomo" in err and str(tmp_path / "none") in err


def test_missing_data_env(env, capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("EARMEM_DATA", str(tmp_path))
    code, _, err = run(capsys, "reproduce", "locomo", "--quiet")
    assert code == 2
    one_line_error(err, str(tmp_path / "locomo" / "locomo10.json"))


def test_malformed_json(env, capsys, tmp_path):
    f = tmp_path / "locomo10.json"
    f.write_text('[{"sample_id": ')
    code, _, err = run(capsys, "reproduce", "locomo", "--data", str(f), "--quiet")
    assert code == 2
    one_line_error(err, "is not valid JSON")


def test_wrong_structure(env, capsys, tmp_path):
    f = tmp_path / "locomo10.json"
    f.write_text(json.dumps({"conversations": []}))
    code, _, err = run(capsys, "reproduce", "locomo", "--data", str(f), "--quiet")
    assert code == 2
    one_line_error(err, "is not in the LoCoMo format")


def test_unknown_encoder_name(env, capsys):
    code, _, err = run(capsys, "reproduce", "locomo", "--encoder", "nobody/no-such-encoder-xyz", "--quiet")
    assert code == 2
    one_line_error(err, "model: unknown encoder 'nobody/no-such-encoder-xyz'")


def test_unknown_encoder_path(env, capsys, tmp_path):
    code, _, err = run(capsys, "reproduce", "locomo", "--encoder", str(tmp_path / "no-model"), "--quiet")
    assert code == 2
    one_line_error(err, "model: no sentence-transformers model folder")


def test_encoder_path_is_a_file(env, capsys, tmp_path):
    f = tmp_path / "model.bin"
    f.write_bytes(b"\0")
    code, _, err = run(capsys, "reproduce", "locomo", "--encoder", str(f), "--quiet")
    assert code == 2
    one_line_error(err, "is a file")


@pytest.mark.parametrize("argv, contains", [
    (["--k", "6", "--K", "4"], "k: the slate size k=6 is larger than the candidate set K=4"),
    (["--k", "0"], "k: expected a positive integer"),
    (["--K", "0"], "K: expected a positive integer"),
    (["--test-size", "1.5"], "test_size: expected a fraction"),
])
def test_bad_numbers(env, capsys, argv, contains):
    code, _, err = run(capsys, "reproduce", "locomo", *argv, "--quiet")
    assert code == 2
    one_line_error(err, contains)


def test_K_larger_than_a_bank(env, capsys):
    code, _, err = run(capsys, "reproduce", "locomo", "--method", "retriever", "--split", "all", "--quiet")   # K=20 > 5 turns
    assert code == 2
    one_line_error(err, "K: asked for the top 20 candidates, but memory bank 'tiny-2' has only 5 memories")


def test_unwritable_json(env, capsys, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    code, _, err = run(capsys, "reproduce", "locomo", "--method", "retriever", "--split", "all", "--K", "4", "--k", "2",
                       "--json", str(blocker / "r.json"), "--quiet")
    assert code == 2 and err.startswith("earmem: error:") and len(err.strip().splitlines()) == 1


def test_debug_shows_traceback(env, capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("EARMEM_DEBUG", "1")
    with pytest.raises(FileNotFoundError):
        main(["reproduce", "locomo", "--data", str(tmp_path / "none"), "--quiet"])


# ---- successful runs --------------------------------------------------------------------------------------------------
def test_reproduce_tiny(env, capsys, tmp_path):
    out_json = tmp_path / "out" / "r.json"
    code, out, err = run(capsys, "reproduce", "locomo", "--method", "retriever", "--split", "all", "--K", "4",
                         "--k", "2", "--json", str(out_json), "--quiet")
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[0].startswith("LoCoMo · method retriever · encoder sentence-transformers/all-MiniLM-L6-v2")
    assert "Recall@2" in lines[1] and "Hit@2" in lines[1]
    assert any(l.startswith("overall") and l.split()[-1] == "8" for l in lines)
    rep = json.loads(out_json.read_text())
    assert rep["config"] == {"split": "all", "k": 2, "K": 4, "seed": 0, "test_size": None,
                             "encoder": "sentence-transformers/all-MiniLM-L6-v2",
                             "data": str(env / "locomo" / "locomo10.json")}
    assert rep["encoder"]["dim"] == 384 and rep["queries"]["unscored"] == ["tiny-1:4"]
    assert set(rep["timings"]) >= {"load", "encode_memories", "encode_queries", "retrieve", "method", "total"}
    overall = rep["table"][-1]
    assert overall["category"] == "overall" and overall["n"] == 8
    assert overall["recall@2"] == round(100 * rep["results"]["overall"]["recall@2"], 1)
    assert f"{overall['recall@2']:.1f}" in [l for l in lines if l.startswith("overall")][0]


def test_reproduce_tiny_test_split_and_status_lines(env, capsys, tmp_path):
    out_json = tmp_path / "r.json"
    code, out, err = run(capsys, "reproduce", "locomo", "--method", "retriever", "--K", "4", "--k", "2", "--test-size", "0.5",
                         "--seed", "3", "--json", str(out_json))
    assert code == 0
    assert "earmem: preparing LoCoMo" in err and f"report written to {out_json}" in err
    rep = json.loads(out_json.read_text())
    assert rep["queries"]["test"] + rep["queries"]["train"] + ("tiny-1:4" in str(rep["queries"]["unscored"])) <= 9
    assert rep["config"]["seed"] == 3 and rep["config"]["test_size"] == 0.5
    assert "test 50% (seed 3)" in out


def test_default_json_path(env, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, _ = run(capsys, "reproduce", "locomo", "--method", "retriever", "--split", "all", "--K", "4", "--k", "2", "--quiet")
    assert code == 0 and (tmp_path / "results" / "locomo-retriever-all-seed0.json").is_file()


def test_reproduce_longmemeval_fixture(env, capsys, tmp_path):
    code, out, err = run(capsys, "reproduce", "longmemeval", "--data", str(FIXTURES / "longmemeval_s_tiny.json"),
                         "--method", "retriever", "--split", "all", "--K", "4", "--k", "2", "--json", str(tmp_path / "l.json"), "--quiet")
    assert code == 0, err
    rep = json.loads((tmp_path / "l.json").read_text())
    assert rep["benchmark"] == "longmemeval" and rep["table"][-1]["n"] == 2
    assert out.startswith("LongMemEval_S · method retriever")


# ---- the installed console script ---------------------------------------------------------------------------------------
def _script():
    exe = shutil.which("earmem") or str(Path(sys.executable).parent / "earmem")
    if not Path(exe).exists():
        pytest.skip("the earmem console script is not installed (pip install -e .)")
    if "earmem.cli" not in Path(exe).read_text(errors="replace"):
        pytest.skip("the installed earmem console script predates earmem.cli (pip install -e . again)")
    return exe


def test_console_script_help():
    r = subprocess.run([_script(), "reproduce", "locomo", "--help"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "usage: earmem reproduce locomo" in r.stdout


def test_console_script_error_exit_code(tmp_path):
    r = subprocess.run([_script(), "reproduce", "locomo", "--data", str(tmp_path / "nothing.json"), "--quiet"],
                       capture_output=True, text=True, timeout=120,
                       env={**os.environ, "HF_HUB_OFFLINE": "1", "EARMEM_DEBUG": ""})
    assert r.returncode == 2 and r.stdout == ""
    assert len(r.stderr.strip().splitlines()) == 1 and "LoCoMo data not found" in r.stderr


# ---- the real benchmark (slow) ----------------------------------------------------------------------------------------
@pytest.mark.slow
def test_real_locomo_retriever(tmp_path):
    "Only Retriever on all 1,540 LoCoMo queries with the default encoder (uses the shared embedding cache)."
    if not os.environ.get("EARMEM_DATA"):
        pytest.skip("set EARMEM_DATA to the folder holding locomo/locomo10.json")
    r = subprocess.run([_script(), "reproduce", "locomo", "--method", "retriever", "--split", "all", "--quiet",
                        "--json", str(tmp_path / "r.json")],
                       capture_output=True, text=True, timeout=1800, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert r.returncode == 0, r.stderr
    rep = json.loads((tmp_path / "r.json").read_text())
    assert rep["data"]["stats"]["queries"] == 1540 and rep["table"][-1]["n"] == 1536
    assert abs(rep["table"][-1]["recall@5"] - 32.7) <= 1.0 and abs(rep["table"][-1]["hit@5"] - 42.3) <= 1.0


def test_tables_mode_tiny(env, capsys, tmp_path):
    "Without --method the command runs the paper's tables: every requested method, mean ± std over seeds."
    out_json = tmp_path / "t.json"
    code, out, err = run(capsys, "reproduce", "locomo", "--K", "4", "--k", "2", "--test-size", "0.5",
                         "--methods", "table2", "--seeds", "2", "--jobs", "2", "--json", str(out_json), "--quiet")
    assert code == 0, err
    assert "Table 2 analogue" in out and "EAR w/o Explorer at test time" in out
    rep = json.loads(out_json.read_text())
    assert rep["methods"] == ["retriever", "rl", "ear-adapter", "ear"] and rep["config"]["seeds"] == 2
    assert len(rep["paper"]["methods"]["ear"]["per_seed_recall"]) == 2
    assert out_json.with_suffix(".png").read_bytes()[:4] == b"\x89PNG"      # the tables drawn beside the report


@pytest.mark.parametrize("argv,contains", [
    (["--methods", "ear,wizard"], "methods: unknown method 'wizard'"),
    (["--set", "lr"], "set: expected KEY=VALUE"),
    (["--set", "warp=9"], "set: unknown EAR setting 'warp'"),
    (["--precision", "1.5"], "precision"),
    (["--split", "all"], "split: the learning methods need the 80/20 protocol"),
    (["--seeds", "0"], "seeds: expected a positive integer"),
    (["--jobs", "0"], "jobs: expected a positive integer"),
])
def test_tables_mode_errors(env, capsys, argv, contains):
    code, _, err = run(capsys, "reproduce", "locomo", *argv, "--quiet")
    assert code == 2
    one_line_error(err, contains)


@pytest.mark.parametrize("spelling", [["earm"], ["--earm"]])
def test_earm_tiny(env, capsys, tmp_path, spelling):
    "`earm` (or `--earm`) runs the EARM experiment and writes its report and figure."
    code, out, err = run(capsys, "reproduce", "locomo", *spelling, "--N", "4", "--seeds", "1", "--out", str(tmp_path), "--quiet")
    assert code == 0, err
    assert "recall@10" in out and "scorer calls" in out
    assert (tmp_path / "locomo-earm.png").stat().st_size > 0
    rep = json.loads((tmp_path / "locomo-earm.json").read_text())
    assert rep["config"]["n_candidates"] == 4


def test_earm_alone(env, capsys):
    code, _, err = run(capsys, "reproduce", "locomo", "--earm", "--method", "retriever", "--quiet")
    assert code == 2
    one_line_error(err, "earm: --earm runs alone")
    code, _, err = run(capsys, "reproduce", "locomo", "--method", "retriever", "tables", "--quiet")
    assert code == 2
    one_line_error(err, "method: --method runs alone, without tables")
    code, _, err = run(capsys, "reproduce", "locomo", "tables", "--method", "retriever", "--quiet")
    assert code == 2 and "unrecognized arguments: --method" in err       # the older spellings come before the mode


# ---- the mode spellings and their older flag spellings ---------------------------------------------------------------
def test_mode_and_flag_spellings_agree(env, capsys, tmp_path):
    "`method NAME` = `--method NAME`, `tables LIST` = `--methods LIST`: the same reports, whatever the option order."
    common = ["--K", "4", "--k", "2", "--quiet"]
    reports = {}
    for name, argv in {"mode": ["method", "retriever", "--split", "all"],
                       "flag": ["--method", "retriever", "--split", "all"],
                       "mixed": ["--split", "all", "method", "retriever"]}.items():
        code, out, err = run(capsys, "reproduce", "locomo", *argv, *common, "--json", str(tmp_path / f"{name}.json"))
        assert (code, err) == (0, ""), err
        reports[name] = json.loads((tmp_path / f"{name}.json").read_text())
    assert reports["mode"]["results"] == reports["flag"]["results"] == reports["mixed"]["results"]
    assert reports["mode"]["config"] == reports["flag"]["config"]
    for name, argv in {"mode": ["tables", "retriever,rl"], "flag": ["--methods", "retriever,rl"]}.items():
        code, out, err = run(capsys, "reproduce", "locomo", *argv, "--seeds", "1", "--jobs", "1", "--test-size", "0.5",
                             *common, "--json", str(tmp_path / f"t-{name}.json"))
        assert (code, err) == (0, ""), err
        reports[name] = json.loads((tmp_path / f"t-{name}.json").read_text())
    ms = [{m: v["per_seed_recall"] for m, v in reports[n]["paper"]["methods"].items()} for n in ("mode", "flag")]
    assert ms[0] == ms[1] and set(ms[0]) == {"retriever", "rl"}


def test_python_dash_m(env, tmp_path):
    "`python -m earmem.cli` is the same command."
    r = subprocess.run([sys.executable, "-m", "earmem.cli", "reproduce", "locomo", "method", "retriever", "--split", "all",
                        "--K", "4", "--k", "2", "--json", str(tmp_path / "r.json"), "--quiet"],
                       capture_output=True, text=True, timeout=300, env={**os.environ})
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert r.stdout.startswith("LoCoMo · method retriever") and json.loads((tmp_path / "r.json").read_text())["table"][-1]["n"] == 8
    r = subprocess.run([sys.executable, "-m", "earmem.cli", "reproduce", "locomo", "--k", "x"], capture_output=True, text=True)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1


# ---- earmem memory (moved from tests/test_memory.py) -----------------------------------------------------------------
@pytest.mark.parametrize("cmd", [[], ["add"], ["search"], ["inject"], ["stats"], ["export"], ["bench"], ["import"], ["feedback"]])
def test_memory_cli_help(cmd, capsys):
    code = memory_cli([*cmd, "--help"])
    out = capsys.readouterr().out
    assert code == 0 and out.startswith("usage: earmem memory") and "--help" in out
    if cmd: assert "--json" in out


def test_memory_cli_round_trip(tmp_path, capsys):
    store = str(tmp_path / "cli")
    def run(*argv):
        code = memory_cli([*argv, "--store", store] if argv[0] not in ("bench",) else list(argv))
        out, err = capsys.readouterr()
        return code, out, err
    assert run("add", "Dana chose Postgres for orders", "--kind", "decision", "--entity", "Dana", "--encoder", "hashing-32") \
        == (0, "inserted m1\n", "")
    code, out, _ = run("add", "Dana chose Postgres for orders.", "--kind", "decision", "--entity", "Dana", "--json")
    assert (code, json.loads(out)["action"]) == (0, "merged")
    run("add", "CI failed: the runner ran out of disk", "--kind", "failure", "--timestamp", "2026-02-01")
    code, out, _ = run("search", "Postgres orders Dana", "-k", "2")
    assert code == 0 and out.startswith("1. [m1]")
    code, out, _ = run("search", "Postgres orders Dana", "--explain", "--kind", "decision")
    assert "relevance" in out and "recency" in out
    code, out, _ = run("search", "orchestral music", "--json")
    assert json.loads(out)["hits"] == []
    code, out, _ = run("inject", "Postgres orders Dana", "--budget", "40")
    assert code == 0 and "From memory (" in out
    code, out, _ = run("inject", "Postgres orders Dana", "--budget", "40", "--json")
    block = json.loads(out)
    assert code == 0 and block["ids"][0] == "m1" and 0 < block["tokens"] <= 40 and "From memory (" in block["text"]
    code, out, _ = run("stats", "--json")
    assert (json.loads(out)["memories"], json.loads(out)["by_kind"]) == (2, {"decision": 1, "failure": 1})
    code, out, _ = run("export", str(tmp_path / "out.jsonl"), "--json")
    assert json.loads(out)["exported"] == 2 and len((tmp_path / "out.jsonl").read_text().splitlines()) == 2
    code, out, err = run("inject", "x", "--budget", "0")
    assert code == 2 and err.startswith("earmem: error: budget_tokens: expected a positive integer")
    code, out, err = run("add", "x", "--kind", "fact", "--encoder", "hashing-16")
    assert code == 2 and "encoder: the store" in err and len(err.strip().splitlines()) == 1


def test_memory_cli_registers_in_a_parent_parser():
    import argparse
    from earmem.cli.memory import add_memory_parser, run_memory_command
    parser = argparse.ArgumentParser(prog="earmem")
    add_memory_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["memory", "stats", "--store", "nowhere-xyz"])
    assert args.command == "memory"
    assert run_memory_command(args) == 2                 # missing store: a one-line error, exit 2


def test_memory_cli_search_does_not_create_a_store(tmp_path, capsys):
    missing = tmp_path / "nothing-here"
    assert memory_cli(["search", "anything", "--store", str(missing)]) == 2
    assert "no memory store" in capsys.readouterr().err and not missing.exists()


def test_memory_cli_bench_json(capsys):
    code = main(["memory", "bench", "--sizes", "300", "--dim", "16", "--queries", "5", "--quiet", "--json"])
    rows = json.loads(capsys.readouterr().out)
    assert code == 0 and rows[0]["memories"] == 300 and rows[0]["dim"] == 16 and rows[0]["add_per_s"] > 0


# ---- the complete memory command line ----------------------------------------------------------------------------
@pytest.mark.parametrize("cmd", [["update"], ["retract"], ["delete"], ["history"], ["feedback"], ["import"], ["repair"]])
def test_memory_cli_help_new_commands(cmd, capsys):
    code = memory_cli([*cmd, "--help"])
    out = capsys.readouterr().out
    assert code == 0 and out.startswith(f"usage: earmem memory {cmd[0]}") and "--json" in out and "--store" in out


@pytest.fixture
def mem(tmp_path, capsys):
    "A hashing-encoder store with three memories; `mem(*argv)` runs `earmem memory …` on it → (code, out, err)."
    store = str(tmp_path / "store")
    def run(*argv, store=store):
        code = memory_cli([*argv, "--store", store])
        out, err = capsys.readouterr()
        return code, out, err
    assert run("add", "The standup moved to 4pm", "--kind", "decision", "--entity", "team", "--encoder", "hashing-64")[0] == 0
    run("add", "Dana chose Postgres for the orders service", "--kind", "decision", "--entity", "Dana")
    run("add", "CI failed: the runner ran out of disk", "--kind", "failure", "--timestamp", "2026-02-01")
    run.store, run.tmp = store, tmp_path
    return run


def test_memory_update_history(mem):
    code, out, err = mem("update", "m1", "--text", "The standup moved to 3pm", "--reason", "moved again")
    assert (code, out, err) == (0, "updated m1: The standup moved to 3pm\n", "")
    code, out, _ = mem("update", "m1", "--importance", "0.95", "--entity", "team", "--entity", "Ana", "--json")
    rec = json.loads(out)
    assert code == 0 and rec["importance"] == 0.95 and rec["entities"] == ["team", "Ana"] and rec["text"].endswith("3pm")
    code, out, _ = mem("history", "m1", "--json")
    rows = json.loads(out)
    assert [r["action"] for r in rows] == ["insert", "update", "update"]
    assert rows[1]["detail"]["changes"]["text"] == ["The standup moved to 4pm", "The standup moved to 3pm"]
    assert rows[1]["detail"]["reason"] == "moved again"
    code, out, _ = mem("history", "m1")
    assert code == 0 and len(out.splitlines()) == 3 and "update" in out.splitlines()[1]
    code, _, err = mem("update", "m1")
    assert code == 2 and err.startswith("earmem: error: changes: nothing to update")
    code, _, err = mem("update", "m9", "--text", "x")
    assert code == 2 and err == f"earmem: error: id: no memory 'm9' in {mem.store}\n"
    code, _, err = mem("update", "m1", "--importance", "2")
    assert code == 2 and "importance" in err and len(err.splitlines()) == 1


def test_memory_retract_delete(mem):
    code, out, _ = mem("retract", "m3", "--reason", "wrong runner", "--correction", "CI failed: the runner lost its network")
    assert (code, out) == (0, "retracted m3; correction inserted as m4\n")
    code, out, _ = mem("search", "CI failed: the runner lost its network", "--json")
    ids = [h["id"] for h in json.loads(out)["hits"]]
    assert "m4" in ids and "m3" not in ids
    code, _, err = mem("retract", "m3", "--reason", "again")
    assert code == 2 and "already retracted" in err
    code, _, err = mem("retract", "m2")
    assert code == 2 and "--reason" in err and len(err.strip().splitlines()) == 1
    code, out, _ = mem("delete", "m2", "--json")
    assert (code, json.loads(out)) == (0, {"deleted": "m2"})
    code, out, _ = mem("history", "m2", "--json")
    assert [r["action"] for r in json.loads(out)] == ["insert", "delete"]
    code, _, err = mem("delete", "m2")
    assert code == 2 and err.startswith("earmem: error: id: no memory 'm2'")
    code, _, err = mem("history", "nothing")
    assert code == 2 and err.startswith("earmem: error: id: no memory 'nothing'")


def test_memory_feedback_query_and_file(mem):
    code, out, _ = mem("feedback", "--query", "Postgres orders Dana", "--cited", "m2", "--json")
    fb = json.loads(out)
    assert code == 0 and fb["hits"][0] == "m2" and fb["labels"]["m2"] == 1 and fb["cited"] == ["m2"]
    code, out, _ = mem("stats", "--json")
    assert json.loads(out)["feedback"] == 1
    f = mem.tmp / "hits.json"
    code, out, _ = mem("search", "Postgres orders Dana", "-k", "2", "--json")
    saved = json.loads(out)
    assert saved["query"] == "Postgres orders Dana" and saved["k"] == 2
    f.write_text(json.dumps({**saved, "cited": ["m2"]}))
    code, out, err = mem("feedback", "--hits", str(f))
    assert code == 0, err
    assert out.startswith(f"feedback on {len(saved['hits'])} hits: cited m2")
    code, out, _ = mem("feedback", "--hits", str(f), "--cited", "--json")            # --cited alone: none was useful
    assert code == 0 and set(json.loads(out)["labels"].values()) == {-1}
    mem("add", "Dana moved the orders service to Postgres 16", "--kind", "decision", "--entity", "Dana")
    code, _, err = mem("feedback", "--hits", str(f))
    if code == 2:                                                                    # the search now differs
        assert "the store changed since" in err and len(err.strip().splitlines()) == 1
    assert mem("stats", "--json")[1] and json.loads(mem("stats", "--json")[1])["feedback"] >= 3


@pytest.mark.parametrize("argv, contains", [
    (["feedback", "--cited", "m1"], "query: give either --query TEXT or --hits FILE"),
    (["feedback", "--query", "x", "--hits", "f.json", "--cited"], "query: give either"),
    (["feedback", "--query", "standup"], "cited: name the hits the answer used"),
    (["feedback", "--query", "The standup moved to 4pm", "--cited", "m3"], "cited: ['m3'] are not among the hits"),
    (["feedback", "--hits", "HITS", "-k", "3", "--cited"], "k: the search options come from the --hits file"),
    (["feedback", "--hits", "MISSING", "--cited"], "MISSING"),
    (["feedback", "--hits", "BAD", "--cited"], "has no query string and hits list"),
    (["search", "standup", "--explain", "--json"], "explain: --explain and --json"),
    (["import", "MISSING"], "MISSING"),
])
def test_memory_errors_are_one_line(mem, argv, contains):
    (mem.tmp / "HITS").write_text(json.dumps({"query": "standup", "hits": [{"id": "m1"}]}))
    (mem.tmp / "BAD").write_text(json.dumps({"hits": []}))
    argv = [str(mem.tmp / a) if a in ("HITS", "MISSING", "BAD") else a for a in argv]
    code, out, err = mem(*argv)
    assert code == 2 and out == ""
    one_line_error(err, contains)


def _records(path):
    "Exported records by id, without what a store derives itself (count, last_access)."
    rs = [json.loads(l) for l in Path(path).read_text().splitlines()]
    return {r["id"]: {k: v for k, v in r.items() if k not in ("count", "last_access")} for r in rs}


def test_memory_export_import_round_trip(mem, capsys):
    mem("update", "m1", "--text", "The standup moved to 3pm")
    mem("retract", "m3", "--reason", "wrong", "--correction", "CI failed: the runner lost its network")
    a, b = mem.tmp / "a.jsonl", mem.tmp / "b.jsonl"
    assert mem("export", str(a))[0] == 0
    other = str(mem.tmp / "other")
    code, out, err = mem("import", str(a), "--encoder", "hashing-64", "--json", store=other)
    assert code == 0, err
    assert json.loads(out) | {"path": None} == {"path": None, "inserted": 3, "merged": 0, "withdrawn": 1, "skipped": 0,
                                                "not_carried": ["count", "last_access", "audit trail"]}
    assert mem("export", str(b), store=other)[0] == 0
    assert _records(a) == _records(b) and len(_records(a)) == 4
    assert _records(b)["m3"]["status"] == "retracted"
    f = mem.tmp / "no-ids.jsonl"                                            # without ids: new ids, statuses kept
    f.write_text('{"text": "Ana prefers green tea", "kind": "preference"}\n'
                 '{"text": "Ben said the demo is on Friday", "kind": "fact", "status": "retracted"}\n')
    code, out, _ = mem("import", str(f), "--json", store=other)
    assert code == 0 and (json.loads(out)["inserted"], json.loads(out)["withdrawn"]) == (1, 1)
    mem("export", str(b), store=other)
    assert sorted(r["status"] for r in _records(b).values() if r["text"].startswith(("Ana", "Ben"))) == ["active", "retracted"]
    code, out, _ = mem("import", str(a), store=other)                      # again: every id is there already
    assert code == 0 and out.endswith("0 inserted, 0 merged into others, 0 withdrawn, 4 already present\n")
    code, out, _ = mem("search", "CI runner", "--json", store=other)
    assert "m3" not in [h["id"] for h in json.loads(out)["hits"]]


@pytest.mark.parametrize("lines, contains", [
    (['{"id": "x1", "text": "ok", "kind": "fact"}', "{oops"], "line 2 is not JSON"),
    (['{"id": "x1", "text": "ok", "kind": "fact"}', '', '{"id": "x2", "text": "ok too", "kind": "wizardry"}'], "line 3: kind"),
    (['{"id": "x1", "text": "", "kind": "fact"}'], "line 1: text: is empty"),
    (['[1, 2]'], "line 1: expected a memory object"),
    (['{"id": "x1", "text": "ok", "kind": "fact", "importance": "high"}'], "line 1: importance"),
    (['{"id": "x1", "text": "ok", "kind": "fact"}', '{"id": "x1", "text": "other", "kind": "fact"}'], "line 2: id 'x1' repeats line 1"),
    (['{"text": "a", "kind": "fact", "status": "retracted"}', '{"text": "b", "kind": "fact", "timestamp": "yesterday"}'],
     "line 2: timestamp"),
])
def test_memory_import_errors_name_file_and_line(mem, lines, contains):
    f = mem.tmp / "in.jsonl"
    f.write_text("\n".join(lines) + "\n")
    before = mem("export", str(mem.tmp / "before.jsonl"))
    code, _, err = mem("import", str(f))
    assert code == 2
    one_line_error(err, f"path: {f} {contains}" if "is not JSON" in contains else contains)
    assert str(f) in err
    mem("export", str(mem.tmp / "after.jsonl"))                             # every line is checked before any write
    assert (mem.tmp / "after.jsonl").read_text() == (mem.tmp / "before.jsonl").read_text()


def test_memory_import_not_utf8(mem):
    f = mem.tmp / "in.jsonl"
    f.write_bytes(b"\xff\xfe\x00")
    code, _, err = mem("import", str(f))
    assert code == 2 and "is not UTF-8 text" in err


def test_memory_repair(mem, monkeypatch):
    from earmem.memory.store import MemoryStore
    if not hasattr(MemoryStore, "repair"):
        code, _, err = mem("repair")
        assert code == 2
        one_line_error(err, "repair: this earmem's MemoryStore has no repair() yet")
    monkeypatch.setattr(MemoryStore, "repair", lambda self: {"replayed": 2, "learner": "v3"}, raising=False)
    code, out, _ = mem("repair", "--json")
    assert (code, json.loads(out)) == (0, {"replayed": 2, "learner": "v3"})
    assert mem("repair")[1] == "replayed: 2\nlearner: v3\n"


# ---- earmem serve --------------------------------------------------------------------------------------------------
@pytest.fixture
def fake_servers(monkeypatch):
    "Stand-in server modules recording their calls (the real ones are chapters of the server helpers)."
    import types
    calls = []
    for module, func in (("earmem.serve.mcp", "serve_mcp"), ("earmem.serve.http", "serve_http")):
        m = types.ModuleType(module)
        setattr(m, func, lambda store, _f=func, **kw: calls.append((_f, store, kw)))
        monkeypatch.setitem(sys.modules, module, m)
    return calls


def test_serve_calls_the_servers(fake_servers, capsys):
    assert main(["serve", "mcp", "--store", "s1"]) == 0
    assert main(["serve", "mcp", "-s", "s2", "--transport", "http", "--port", "9000"]) == 0
    assert main(["serve", "http", "-s", "postgresql://u@h/db", "--namespace", "dana", "--host", "0.0.0.0"]) == 0
    assert fake_servers == [("serve_mcp", "s1", {"transport": "stdio", "host": "127.0.0.1", "port": 8765, "namespace": None}),  # every user
                            ("serve_mcp", "s2", {"transport": "http", "host": "127.0.0.1", "port": 9000, "namespace": None}),
                            ("serve_http", "postgresql://u@h/db", {"host": "0.0.0.0", "port": 8766, "namespace": "dana"})]
    assert capsys.readouterr().out == ""                                  # stdout stays the MCP channel


def test_serve_errors(fake_servers, capsys, monkeypatch):
    assert main(["serve", "mcp", "--port", "9000"]) == 2
    one_line_error(capsys.readouterr().err, "port: --host and --port apply to --transport http only")
    assert main(["serve", "http", "--transport", "stdio"]) == 2
    assert "unrecognized arguments: --transport" in capsys.readouterr().err
    assert main(["serve", "http", "--encoder", "hashing"]) == 2              # the server would not use it: refused
    assert "unrecognized arguments: --encoder" in capsys.readouterr().err
    def needs_mcp(store, **kw): raise ModuleNotFoundError("No module named 'mcp'", name="mcp")
    monkeypatch.setattr(sys.modules["earmem.serve.mcp"], "serve_mcp", needs_mcp)
    assert main(["serve", "mcp"]) == 2
    one_line_error(capsys.readouterr().err, 'serve mcp: needs the optional package \'mcp\': pip install "earmem[mcp]"')
    def needs_fastapi(store, **kw): raise ModuleNotFoundError("No module named 'fastapi'", name="fastapi")
    monkeypatch.setattr(sys.modules["earmem.serve.http"], "serve_http", needs_fastapi)
    assert main(["serve", "http"]) == 2
    one_line_error(capsys.readouterr().err, 'pip install "earmem[server]"')


def test_serve_without_the_module(monkeypatch, capsys):
    import importlib
    real = importlib.import_module
    def fake(name, *a):
        if name == "earmem.serve.http": raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return real(name, *a)
    monkeypatch.setattr(importlib, "import_module", fake)
    assert main(["serve", "http"]) == 2
    one_line_error(capsys.readouterr().err, "serve: this earmem has no earmem.serve.http module")


# ---- earmem data ---------------------------------------------------------------------------------------------------


def test_data_download_and_path(http_folder, tmp_path, capsys, monkeypatch):
    import hashlib
    base, folder = http_folder
    body = json.dumps(tiny_locomo()).encode()
    (folder / "locomo10.json").write_bytes(body)
    pin = hashlib.sha256(body).hexdigest()
    code, out, err = run(capsys, "data", "download", "locomo", "--dir", str(tmp_path / "d"), "--url", f"{base}/locomo10.json",
                         "--sha256", pin)
    dest = tmp_path / "d" / "locomo" / "locomo10.json"
    assert code == 0 and out == f"LoCoMo downloaded to {dest} (SHA-256 verified)\n"
    assert dest.read_bytes() == body
    code, out, _ = run(capsys, "data", "download", "locomo", "--dir", str(tmp_path / "d"), "--json", "--quiet")
    assert code == 0 and json.loads(out) == {"name": "locomo", "path": str(dest), "action": "present", "verified": False}
    code, out, _ = run(capsys, "data", "path", "--dir", str(tmp_path / "d"))
    lines = out.splitlines()
    assert code == 0 and lines[0] == f"data folder: {tmp_path / 'd'} (from the path argument)"
    assert lines[1].startswith(f"locomo: {dest} ({len(body):,} bytes, SHA-256 differs")
    assert lines[2].startswith("longmemeval: not found (looked at") and "earmem data download longmemeval" in lines[2]
    monkeypatch.setenv("EARMEM_DATA", str(tmp_path / "d"))
    code, out, _ = run(capsys, "data", "path", "--json")
    rep = json.loads(out)
    assert code == 0 and rep["origin"] == "$EARMEM_DATA" and rep["benchmarks"]["locomo"]["found"] == str(dest)
    code, out, err = run(capsys, "reproduce", "locomo", "method", "retriever", "--split", "all", "--K", "4", "--k", "2",
                         "--json", str(tmp_path / "r.json"), "--quiet")
    assert code == 0, err                                          # the downloaded file is where `reproduce` looks


@pytest.mark.parametrize("argv, contains", [
    (["--url", "http://127.0.0.1:9/locomo10.json"], "url: cannot reach http://127.0.0.1:9/locomo10.json"),
    (["--url", "BASE/missing.json"], "answered HTTP 404"),
    (["--url", "BASE/locomo10.json"], "sha256: "),
    (["--url", "BASE/locomo10.json", "--sha256", "ab", "--no-checksum"], "sha256: --sha256 and --no-checksum"),
    (["--url", "BASE/page.html", "--no-checksum"], "did not return LoCoMo JSON"),
])
def test_data_download_errors(http_folder, tmp_path, capsys, argv, contains):
    base, folder = http_folder
    (folder / "locomo10.json").write_text(json.dumps(tiny_locomo()))
    (folder / "page.html").write_text("<html/>")
    argv = [a.replace("BASE", base) for a in argv]
    code, out, err = run(capsys, "data", "download", "locomo", "--dir", str(tmp_path / "d"), "--timeout", "5", "--quiet", *argv)
    assert code == 2 and out == ""
    one_line_error(err, contains)
    assert not (tmp_path / "d").exists()


def test_data_usage_errors(capsys):
    code, _, err = run(capsys, "data", "download", "mmlu")
    assert code == 2 and "invalid choice: 'mmlu'" in err and len(err.strip().splitlines()) == 1
    code, out, _ = run(capsys, "data", "download", "--help")
    assert code == 0 and "--dir" in out and "--json" in out and "snap-research/locomo" in out
    f = FIXTURES / "longmemeval_s_tiny.json"
    code, _, err = run(capsys, "data", "path", "--dir", str(f))
    assert code == 2
    one_line_error(err, f"path: {f} is a file; expected a data folder")


# ---- validated doors: typed --set, options that do not apply, learning flags -------------------------------------
def test_set_values_are_typed():
    from earmem.cli.reproduce import _overrides
    assert _overrides(["lr=1e-3", "K=30", "replay=none", "rank=8", "unobserved=mask", "grad_clip=None"]) == \
        {"lr": 1e-3, "K": 30, "replay": None, "rank": 8, "unobserved": "mask", "grad_clip": None}
    for pair, msg in [("lr=abc", "set: lr expects a number, got 'abc'"), ("K=2.5", "set: K expects an integer, got '2.5'"),
                      ("rank=big", "set: rank expects an integer or None, got 'big'"), ("lr=nan", "set: lr expects a number"),
                      ("lambda_rel=x", "set: lambda_rel expects a number"), ("warp=9", "set: unknown EAR setting 'warp'"),
                      ("lr", "set: expected KEY=VALUE"), ("lr=-1", "lr: expected a positive")]:
        with pytest.raises(ValueError) as e:
            _overrides([pair])
        assert str(e.value).startswith(msg), (pair, str(e.value))


@pytest.mark.parametrize("argv, contains", [
    (["--set", "lr=abc"], "set: lr expects a number, got 'abc'"),
    (["--set", "T=four"], "set: T expects an integer"),
    (["method", "retriever", "--seeds", "2"], "unrecognized arguments: --seeds 2"),   # after the mode: argparse refuses
    (["--seeds", "2", "--method", "retriever"], "seeds: --seeds does not apply to mode 'method' (only to tables, analysis, earm, store)"),
    (["--method", "retriever", "--jobs", "2"], "jobs: --jobs does not apply to mode 'method'"),
    (["--method", "retriever", "--set", "lr=1e-3"], "set: --set does not apply to mode 'method'"),
    (["--method", "retriever", "--N", "10"], "N: --N does not apply to mode 'method' (only to earm)"),
    (["--method", "retriever", "--out", "x"], "out: --out does not apply to mode 'method'"),
    (["earm", "--k", "3"], "k: --k does not apply to mode 'earm'"),
    (["--earm", "--split", "all"], "split: --split does not apply to mode 'earm'"),
    (["analysis", "all", "--retriever", "bm25"], "unrecognized arguments: --retriever bm25"),
    (["--retriever", "bm25", "--analysis", "all"], "retriever: --retriever does not apply to mode 'analysis'"),
    (["--precision", "0.9", "--method", "retriever"], "precision: --precision does not apply"),
    (["--retriever", "nope"], "invalid choice: 'nope'"),
    (["--preset", "fast"], "invalid choice: 'fast'"),
])
def test_options_that_do_not_apply_are_refused(env, capsys, argv, contains):
    code, out, err = run(capsys, "reproduce", "locomo", *argv, "--quiet")
    assert code == 2 and out == "" and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and contains in err, err


@pytest.mark.parametrize("argv", [
    ["--k", "-3"], ["--K", "-1"], ["--test-size", "nan"], ["--test-size", "0"], ["--seed", "-1", "--method", "retriever"],
    ["--precision", "nan"], ["--recall", "-0.5"], ["--seeds", "-2"], ["--jobs", "-1"], ["earm", "--N", "0"],
    ["earm", "--seeds", "0"], ["--encoder", ""], ["--data", ""], ["--methods", ""], ["--methods", ",,"],
    ["analysis", "nosuch"], ["--json", "/dev/null/x.json", "--method", "retriever", "--split", "all", "--K", "4"],
    ["--set", "="], ["--set", "K="], ["--set", "final=sideways"], ["--set", "s=50"],
])
def test_no_option_ends_in_a_traceback(env, capsys, argv):
    code, out, err = run(capsys, "reproduce", "locomo", *argv, "--quiet")
    assert code == 2, (argv, out, err)
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err


def test_learning_flags_are_passed_on(env, capsys, monkeypatch):
    "--retriever/--preset reach chapter 11's functions as keywords, only when not the default (None = the preset's)."
    import earmem.cli.reproduce as cli
    seen = []
    def fake_reproduce(benchmark, method, split, encoder, k, K, seed, test_size, data, progress=True, log=None,
                       retriever=None, preset="paper"):
        seen.append({"retriever": retriever, "preset": preset}); raise ValueError("stop: seen")
    monkeypatch.setattr(cli, "reproduce", fake_reproduce)
    assert run(capsys, "reproduce", "locomo", "method", "retriever", "--retriever", "bm25", "--preset", "tuned", "--quiet")[0] == 2
    assert run(capsys, "reproduce", "locomo", "--method", "retriever", "--quiet")[0] == 2
    assert seen == [{"retriever": "bm25", "preset": "tuned"}, {"retriever": None, "preset": "paper"}]
    def old_reproduce(benchmark, method, split, encoder, k, K, seed, test_size, data, progress=True, log=None):
        raise ValueError("stop: old")
    monkeypatch.setattr(cli, "reproduce", old_reproduce)
    code, _, err = run(capsys, "reproduce", "locomo", "method", "retriever", "--quiet")
    assert code == 2 and "stop: old" in err                         # defaults: nothing new is passed
    code, _, err = run(capsys, "reproduce", "locomo", "method", "retriever", "--retriever", "hybrid", "--quiet")
    one_line_error(err, "retriever: this earmem's old_reproduce() does not take retriever= yet")
    seen.clear()
    def fake_tables(*a, retriever=None, preset="paper", **kw):
        seen.append((retriever, preset)); raise ValueError("stop: tables")
    monkeypatch.setattr(cli, "reproduce_tables", fake_tables)
    assert run(capsys, "reproduce", "locomo", "tables", "--preset", "tuned", "--quiet")[0] == 2
    assert seen == [(None, "tuned")]
