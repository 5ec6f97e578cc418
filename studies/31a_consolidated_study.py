"""Issue 19's store study with the consolidated column (frozen / online / consolidated, dev and test, query and conversation splits),
measured through the doors (issue 39): the ten conversations are users of one StorePool, taught by search + feedback, consolidated by
`pool.consolidate_all()` (--consolidation pool, the default), by the old `consolidate_shared` call (shared), or each user alone (own).

    OMP_NUM_THREADS=2 nice -n 10 PYTHONPATH=$PWD python studies/31a_consolidated_study.py --data /work/shared/data/locomo/locomo10.json \
        [--levels query conversation] [--first-seed 0] [--seeds 1] [--consolidation pool|shared|own] [--json out.json]
    python studies/31a_consolidated_study.py --benchmark longmemeval --data FILE   (LongMemEval_S through its loader)
"""
import argparse, json, sys
import numpy as np
from earmem.cli.store_study import POOL_HOWS, STUDY_LEVELS, pooled_study, study_benchmark

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("--seeds", type=int, default=1, help="how many seeds, from --first-seed")
ap.add_argument("--first-seed", type=int, default=0)
ap.add_argument("--levels", nargs="+", default=list(STUDY_LEVELS), choices=STUDY_LEVELS)
ap.add_argument("--consolidation", choices=POOL_HOWS, default="pool",
                help="pool (the default): StorePool.consolidate_all, the door; shared: consolidate_shared on the taught users (the old path); own: each user on its own log")
ap.add_argument("--json", help="write the report here")
ap.add_argument("--benchmark", choices=("locomo", "longmemeval"), default="locomo")
ap.add_argument("--data", help="the benchmark file or its folder (default: where `earmem data path` looks)")
a = ap.parse_args()
rep = pooled_study(a.levels, a.seeds, a.first_seed, bench=study_benchmark(a.benchmark, a.data), progress=False,
                   log=lambda m: print(m, file=sys.stderr, flush=True), how=a.consolidation)
print(rep["table"])
for level, r in rep["levels"].items():       # per conversation: consolidated − frozen Recall@5, mean over the seeds
    for part in ("dev", "test"):
        banks = sorted(r["runs"][0]["by_bank"]["frozen"][part])
        d = {b: np.mean([x["by_bank"]["consolidated"][part][b]["recall"] - x["by_bank"]["frozen"][part][b]["recall"] for x in r["runs"]]) for b in banks}
        if d: print(f"per conversation ({level}, {part}) consolidated − frozen R@5: " + ", ".join(f"{b} {v:+.1f}" for b, v in d.items())
                    + f"; mean {np.mean(list(d.values())):+.1f}, min {min(d.values()):+.1f}")
if a.json: open(a.json, "w").write(json.dumps(rep, indent=1))
