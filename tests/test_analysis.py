"""The analyses of chapter 10 through the `earmem` command line, on the tiny LoCoMo file (fast) and on LoCoMo (slow)."""
import contextlib, io, json, os
from pathlib import Path

import numpy as np
import pytest
import fastcore.test as fct

from earmem.experiments.analysis import ANALYSES, run_analyses
import earmem.experiments.latency  # noqa: F401  (files the latency analysis, before the two-store ones: NAMES' order)
import earmem.experiments.two_stores  # noqa: F401  (files the two-store analyses; the CLI imports it when it lists or runs them)
from earmem.cli import main
from earmem.core import Encoder
from earmem.toys import tiny_locomo
from earmem.experiments.evaluation import prepare_locomo, run_method

NAMES = ["sample-efficiency", "budget", "noise", "hyperparameters", "latency", "two-stores", "geometry"]


def _main(*argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    d = tmp_path_factory.mktemp("tiny")
    path = d / "locomo10.json"
    path.write_text(json.dumps(tiny_locomo()))
    old = os.environ.get("EARMEM_CACHE")
    os.environ["EARMEM_CACHE"] = str(d / "cache")       # keep the tiny texts out of the user's embedding cache
    yield d, path
    if old is None: del os.environ["EARMEM_CACHE"]
    else: os.environ["EARMEM_CACHE"] = old


def test_every_analysis_is_registered():
    fct.test_eq(list(ANALYSES), NAMES)
    for n in NAMES: assert ANALYSES[n].help and ANALYSES[n].registered_name == n


def _in_percent(x): return 0.0 <= x <= 100.0


def test_all_analyses_on_tiny_locomo(tiny):
    d, path = tiny
    out = d / "out"
    code, stdout, err = _main("reproduce", "locomo", "--data", str(path), "--K", "4", "--k", "2", "--seed", "1",
                              "--test-size", "0.4", "--seeds", "2", "--jobs", "2", "analysis", "all",
                              "--out", str(out), "--quiet")
    fct.test_eq((code, err), (0, ""))
    for title in ("Fig. 3 analogue", "Fig. 4 analogue", "Fig. 5 analogue", "Table 6", "Table 7", "Table 8 analogue",
                  "Table 5 analogue", "Table 4 analogue", "Table 12 analogue"):
        assert title in stdout, title
    rep = json.loads((out / f"locomo-analysis-{'-'.join(NAMES)}.json").read_text())
    fct.test_eq(list(rep), NAMES)
    for n in ("sample-efficiency", "budget", "noise", "two-stores", "geometry"):
        png = out / f"locomo-{n}.png"
        fct.test_eq(png.read_bytes()[:4], b"\x89PNG")
        fct.test_eq(rep[n]["figure"], str(png))
    # the analyses share their runs: Fig. 3's EAR curve is the one of Fig. 4 and of Fig. 5 at the default critic
    fct.test_eq(rep["budget"]["curves"]["ear"], rep["sample-efficiency"]["curves"]["ear"])
    fct.test_eq(rep["noise"]["curves"]["ear@0.88/0.86"], rep["sample-efficiency"]["curves"]["ear"])
    fct.test_eq(rep["latency"]["methods"]["ear"]["critic_calls_per_query"], 4.0)
    # the numbers, against a direct computation: the same split and candidates, Only Retriever scored by `evaluate`
    prep = prepare_locomo(Encoder(progress=False), path, K=4, test_size=0.4, seed=1,
                          progress=False)
    retriever = 100 * run_method(prep, "retriever", k=2)["results"]["overall"]["recall@2"]
    for n in ("sample-efficiency", "budget", "noise", "hyperparameters"):
        fct.test_close(rep[n]["retriever"], retriever, eps=1e-9)
    fct.test_close(rep["latency"]["methods"]["retriever"]["recall"], [retriever, 0.0], eps=1e-9)
    n_train = len(prep.train)
    for name, c in rep["sample-efficiency"]["curves"].items():
        assert len(c["steps"]) == len(c["mean"]) == len(c["calls"]) and all(map(_in_percent, c["mean"])), name
        fct.test_close(c["mean"][0], retriever, eps=1e-9)           # step 0: the untrained adapter is the retriever
        fct.test_eq(c["steps"][-1], n_train)                          # one pass over the training queries
        fct.test_close(c["final"][0], c["mean"][-1], eps=1e-9)        # the last point is the final adapter
        fct.test_close(c["final"][0], np.mean([s[-1] for s in c["per_seed"]]), eps=1e-9)
    ear = rep["budget"]["curves"]["ear"]
    fct.test_close(ear["calls"][-1], 4 * n_train, eps=1e-9)        # T = 4 critic calls per training query
    fct.test_close(rep["budget"]["curves"]["rl-epochs"]["calls"][-1], 4 * n_train, eps=1e-9)   # the same budget
    # the latency analysis re-scores the trained EAR adapters: its Recall@2 is Fig. 3's final EAR value
    fct.test_close(rep["latency"]["methods"]["ear-adapter"]["recall"][0], rep["sample-efficiency"]["curves"]["ear"]["final"][0],
                   eps=1e-9)
    both = rep["two-stores"]["summary"]["both"]
    for meth in ("retriever", "ear"):
        obs = both[meth]["observations"]["overall"]["mean"]
        assert 0 <= obs <= 2                                           # observations among the 2 slate places
        assert _in_percent(both[meth]["dialogue_recall"]["overall"]["mean"])
    for pool in rep["geometry"]["table"].values():
        for st in ("episodic", "semantic"):
            r = pool[st]
            if r["n"]: assert 0 <= r["moved_toward"][0] <= 1 and -2 <= r["delta_before"] <= 2


def test_one_analysis_alone_and_errors(tiny):
    d, path = tiny
    code, stdout, err = _main("reproduce", "locomo", "--data", str(path), "--K", "4", "--k", "2", "--seed", "1",
                              "--test-size", "0.4", "--seeds", "1", "--jobs", "1", "--analysis", "geometry",
                              "--out", str(d / "g"), "--quiet")           # the older spelling of `analysis geometry`
    fct.test_eq((code, err), (0, ""))
    assert "Table 12 analogue" in stdout and "Fig. 3" not in stdout
    code, _, err = _main("reproduce", "locomo", "--data", str(path), "--K", "4", "--k", "2", "--analysis", "nope",
                         "--quiet")
    fct.test_eq(code, 2)
    assert "analysis: unknown analysis 'nope'" in err
    with pytest.raises(ValueError, match="seeds: expected a positive integer"):
        run_analyses("locomo", ["geometry"], seeds=0, data=path)


@pytest.mark.slow
def test_sample_efficiency_on_locomo(tmp_path):
    if not (Path(os.environ.get("EARMEM_DATA", "")) / "locomo" / "locomo10.json").exists():
        pytest.skip("LoCoMo not available (set EARMEM_DATA)")
    code, stdout, err = _main("reproduce", "locomo", "analysis", "sample-efficiency", "--seeds", "1",
                              "--out", str(tmp_path), "--quiet")
    fct.test_eq(code, 0)
    rep = json.loads((tmp_path / "locomo-analysis-sample-efficiency.json").read_text())["sample-efficiency"]
    # on LoCoMo EAR ends above the static retriever
    assert rep["curves"]["ear"]["final"][0] > rep["retriever"]
