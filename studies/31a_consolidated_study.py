"""Issue 19's store study with the consolidated column (frozen / online / consolidated, dev and test, query and conversation splits).

    nice -n 10 python studies/31a_consolidated_study.py --seeds 3 [--levels query conversation] [--consolidation shared|own] [--json out.json]
    python studies/31a_consolidated_study.py --benchmark longmemeval --data FILE   (LongMemEval_S through its loader)
"""
import argparse, json, sys
from earmem.cli.store_study import STUDY_LEVELS, consolidated_study, study_benchmark

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("--seeds", type=int, default=1)
ap.add_argument("--levels", nargs="+", default=list(STUDY_LEVELS), choices=STUDY_LEVELS)
ap.add_argument("--consolidation", choices=("own", "shared"), default="shared",
                help="shared (the default, chosen on dev): one model fine-tuned on every taught store's log, switched into all; own: each store fine-tunes on its own log")
ap.add_argument("--json", help="write the report here")
ap.add_argument("--benchmark", choices=("locomo", "longmemeval"), default="locomo")
ap.add_argument("--data", help="the benchmark file or its folder (default: where `earmem data path` looks)")
a = ap.parse_args()
pooled = a.consolidation == "shared"
rep = consolidated_study(a.levels, a.seeds, bench=study_benchmark(a.benchmark, a.data), progress=False, log=lambda m: print(m, file=sys.stderr, flush=True), pooled=pooled)
print(rep["table"])
if a.json: open(a.json, "w").write(json.dumps(rep, indent=1))
