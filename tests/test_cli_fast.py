"""The command line answers at once: importing `earmem.cli` and running the memory commands that need no encoding
do not import torch, sentence-transformers, transformers or datasets (checked by value in fresh processes, not timed);
report names follow what ran; `serve http` says where it listens and logs each request."""
import json
import subprocess
import sys

import pytest

HEAVY = ("torch", "sentence_transformers", "transformers", "datasets")


def heavy_after(code: str) -> list:
    "The heavy modules loaded after running `code` in a fresh interpreter."
    probe = f"{code}\nimport sys; print(sorted(m for m in {HEAVY!r} if m in sys.modules))"
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return json.loads(r.stdout.strip().splitlines()[-1].replace("'", '"'))


def test_import_cli_is_light():
    assert heavy_after("import earmem.cli") == []


def test_help_is_light():
    assert heavy_after("from earmem.cli import main\ntry: main(['--help'])\nexcept SystemExit: pass") == []
    assert heavy_after("from earmem.cli import main\nmain(['memory', '--help'])") == []


def test_memory_commands_without_encoding_are_light(tmp_path):
    store = tmp_path / "mem"
    from earmem.cli import main
    assert main(["memory", "add", "Dana chose Postgres", "--kind", "decision", "-s", str(store), "--encoder", "hashing"]) == 0
    for cmd in (["stats"], ["history", "m1"], ["delete", "m1"]):
        code = f"from earmem.cli import main\nassert main(['memory', *{cmd!r}, '-s', {str(store)!r}]) == 0"
        assert heavy_after(code) == [], cmd


def test_reproduce_help_still_lists_methods(capsys):
    from earmem.cli import main
    from earmem.experiments.evaluation import METHODS
    assert main(["reproduce", "locomo", "method", "--help"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in METHODS)


def test_report_names_differ_by_what_ran(tmp_path):
    from earmem.experiments.tables import report_stem, unused_path
    names = {report_stem("locomo"), report_stem("locomo", preset="tuned"), report_stem("locomo", overrides={"lr": 0.001}),
             report_stem("locomo", methods="table2"), report_stem("locomo", preset="tuned", overrides={"lr": 0.001})}
    assert len(names) == 5 and report_stem("locomo") == "locomo-tables-seed0"
    (tmp_path / "r.json").write_text("{}")
    assert unused_path(tmp_path / "r.json") == tmp_path / "r-2.json"
    assert unused_path(tmp_path / "r.json", force=True) == tmp_path / "r.json"


def test_search_leaves_access_times_alone_unless_asked(tmp_path, capsys):
    "`earmem memory search` reads, as `MemoryStore.search` does by default; `--touch` refreshes the hits' last access."
    from earmem.cli import main
    from earmem.memory.store import MemoryStore
    store = str(tmp_path / "mem")
    assert main(["memory", "add", "Dana chose Postgres", "--kind", "decision", "-s", store, "--encoder", "hashing",
                 "--timestamp", "2024-01-02"]) == 0
    accessed = lambda: MemoryStore(store, readonly=True).get("m1").last_access
    before = accessed()
    for flags in ([], ["--no-touch"]):
        assert main(["memory", "search", "what did Dana choose", "-s", store, *flags]) == 0
        assert accessed() == before, flags
    assert main(["memory", "search", "what did Dana choose", "-s", store, "--touch"]) == 0
    assert accessed() > before
