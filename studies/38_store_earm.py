"""Issue 38: EARM through the store — Semantic, Full and EARM (`search(..., rerank=...)`) on LoCoMo, Recall@10 and scorer calls.

One fresh store per LoCoMo conversation (bundled MiniLM, the turns added with the harness's cached embeddings, each turn's
dialogue id as its `source`), its questions asked in order; the simulated graded scorer of chapter 15 (chapter 05's
RelevanceSimulator, seeded) through `SimulatedScorer`. Store settings that keep the pool the harness's: dense retrieval,
no balancing, no floor, no recency/importance lift, no dedupe or conflict reordering, N = 200 candidates.
  Semantic  plain `search(q, k=10)`;
  Full      `rerank=Rerank(scorer, n_candidates=200, budgets=(200,))`: every candidate scored;
  EARM      `rerank=Rerank(scorer, n_candidates=200, block_size=ceil(n/14))`: the paper's 200/80/50/40/35 schedule cut as
            chapter 15 cuts each conversation's stream (14 blocks, B5+ = the 17.5 % stage), completion rank 8.
Recall@10 per stage (B1 … B5+) and over the stream, scorer calls per query; mean ± std over seeds.
`--harness` also runs chapter 15's `run_earm` (ranks (8,), no extras) on the same questions for its Mixed.

    EARMEM_DATA=../shared/data python studies/38_store_earm.py --seeds 0 1 2 --json out.json --progress
    EARMEM_DATA=../shared/data python studies/38_store_earm.py --latency      # completion + mixing ms at 10,000 memories, 1,000 past queries
"""
from __future__ import annotations
import argparse, json, math, sys, tempfile, time
from pathlib import Path
import numpy as np

STAGES = ("B1", "B2", "B3", "B4", "B5+")


def store_config():
    from earmem.memory import StoreConfig
    return StoreConfig(retriever="dense", balanced=False, min_relevance=-1.0, recency_weight=0.0, importance_weight=0.0,
                       dedupe_threshold=1.0, conflict_similarity=1.0, same_fact_similarity=1.0, candidates=200)


def memo_queries(enc, texts, vectors):
    "Let the encoder answer the study's questions from the precomputed vectors (the store encodes each search's text)."
    cache, orig = {t: v for t, v in zip(texts, vectors)}, enc.encode_queries
    enc.encode_queries = lambda ts, progress=None: np.stack([cache[t] if t in cache else orig([t])[0] for t in ts])


def run_stream(path, enc, bank, qs, plan, k=10):
    "One store over one conversation: (per query: stage, recall@k, scorer calls) for `plan` (None = semantic)."
    from earmem.core import recall_at_k
    from earmem.memory import MemoryStore
    out = []
    with MemoryStore(path, encoder=enc, config=store_config()) as st:
        items = [{"text": m.text, "kind": "episode", "source": m.id, "timestamp": m.timestamp} for m in bank.memories]
        res = st.add_many(items, embeddings=bank.embeddings)
        src = {r.id: m.id for r, m in zip(res, bank.memories)}
        for t, q in enumerate(qs):
            hits = st.search(q.text, k=k, rerank=plan)
            ids = list(dict.fromkeys(src.get(h.id, h.metadata.get("source")) for h in hits))
            stage = min(t // plan.block_size, 4) if plan is not None else None
            out.append({"t": t, "stage": stage, "recall": recall_at_k(ids, q.gold, k),
                        "calls": hits.rerank["scorer_calls"] if hits.rerank else 0,
                        "completion_ms": hits.rerank["completion_ms"] if hits.rerank else 0.0})
    return out


def summarise(rows_by_seed, block_stage=True):
    "{'all': {recall, calls}, 'B1'…: …} as mean ± std over seeds (each seed: the mean over its queries)."
    out = {}
    for label in ("all",) + STAGES:
        rec, calls = [], []
        for rows in rows_by_seed:
            sel = [r for r in rows if label == "all" or r["stage"] == STAGES.index(label)]
            if sel: rec.append(100 * np.mean([r["recall"] for r in sel])); calls.append(np.mean([r["calls"] for r in sel]))
        if rec: out[label] = {"recall@10": [float(np.mean(rec)), float(np.std(rec, ddof=1)) if len(rec) > 1 else 0.0],
                              "calls": [float(np.mean(calls)), float(np.std(calls, ddof=1)) if len(calls) > 1 else 0.0]}
    return out


def with_stages(sem_rows, plan_rows):
    "Semantic rows labelled with the EARM stream's stages (the same questions in the same order)."
    return [{**s, "stage": p["stage"]} for s, p in zip(sem_rows, plan_rows)]


def study(seeds, banks=None, max_queries=None, progress=False, rank=8, part="all", policies=("semantic", "full", "earm")) -> dict:
    from earmem.core import Encoder
    from earmem.experiments.data import load_locomo
    from earmem.memory.store import Rerank, SimulatedScorer
    bench, enc = load_locomo(), Encoder()
    if part != "all":   # whole conversations held out (chapter 31a's conversation split): only these stores
        from earmem.cli.store_study import conversation_split
        banks = sorted({q.bank for q in conversation_split(bench)[part]})
    mbanks = bench.memory_banks(enc, stores=("episodic",), progress=progress)
    streams = []
    for b, mb in mbanks.items():
        if banks and b not in banks: continue
        qs = [q for q in bench.query_objects(bank=b) if q.gold][:max_queries]
        if qs: streams.append((b, mb, qs))
    texts = [q.text for _, _, qs in streams for q in qs]
    memo_queries(enc, texts, enc.encode_queries(texts, progress=progress))
    gold = {q.text: q.gold for _, _, qs in streams for q in qs}   # a repeated question text keeps its last gold
    per = {"semantic": [], "full": [], "earm": []}
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="study38-") as d:
        for s in seeds:
            rows = {"semantic": [], "full": [], "earm": []}
            for n, (b, mb, qs) in enumerate(streams):
                block = max(1, math.ceil(len(qs) / 14))
                earm = Rerank(SimulatedScorer(gold, seed=s), n_candidates=200, block_size=block, rank=rank, seed=s)
                full = Rerank(SimulatedScorer(gold, seed=s), n_candidates=200, budgets=(200,), block_size=block, rank=2, seed=s)
                e = run_stream(Path(d) / f"e{s}-{b}", enc, mb, qs, earm)
                rows["earm"] += e
                if "full" in policies: rows["full"] += run_stream(Path(d) / f"f{s}-{b}", enc, mb, qs, full)
                if s == seeds[0] and "semantic" in policies: rows["semantic"] += with_stages(run_stream(Path(d) / f"s-{b}", enc, mb, qs, None), e)
                if progress: print(f"  seed {s}: {n + 1}/{len(streams)} conversations, {time.time() - t0:.0f} s", file=sys.stderr)
            for p in per:
                if rows[p] or per[p]: per[p].append(rows[p] if rows[p] else per[p][0])
    out = {p: summarise(v) for p, v in per.items() if v}
    full_calls = sum(r["calls"] for r in per["full"][0]) if per["full"] else None   # Full not run: no share
    out["earm_share_of_full_calls"] = float(np.mean([sum(r["calls"] for r in rows) / full_calls for rows in per["earm"]])) if full_calls else None
    out["completion_ms_median"] = float(np.median([r["completion_ms"] for rows in per["earm"] for r in rows]))
    out["questions"], out["seeds"], out["seconds"] = len(per["earm"][0]), list(seeds), round(time.time() - t0)
    out["rank"], out["part"], out["banks"] = rank, part, [b for b, _, _ in streams]
    T = max(r["t"] for r in per["earm"][0]) + 1
    out["calls_by_position"] = {p: [float(np.mean([r["calls"] for rows in per[p] for r in rows if r["t"] == t])) for t in range(T)]
                                for p in ("full", "earm") if per[p]}
    return out


def figure(out, path):
    "Scorer calls per search by its position in a conversation's stream (mean over conversations and seeds), EARM against Full."
    import matplotlib; matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6, 3.2))
    for p, style in (("full", "--"), ("earm", "-")):
        ax.plot(out["calls_by_position"][p], style, label={"full": "Full (every candidate)", "earm": "EARM through the store"}[p])
    ax.set_xlabel("question in the conversation's stream"); ax.set_ylabel("scorer calls per search"); ax.legend(); ax.set_ylim(0, 210)
    ax.set_title("LoCoMo: reranking gets cheaper as the store's experience grows", fontsize=9)
    fig.tight_layout(); fig.savefig(path, dpi=120); plt.close(fig)


def harness(seeds, banks=None, max_queries=None, progress=False, rank=8) -> dict:
    "Chapter 15's Mixed (at `rank`) and Semantic on the same questions: Recall@10 per stage."
    from earmem.core import Encoder
    from earmem.experiments.data import load_locomo
    from earmem.experiments.earm import run_earm
    r = run_earm(load_locomo(), Encoder(), seeds=tuple(seeds), ranks=(rank,), beyond=False, baselines=False,
                 banks=tuple(banks) if banks else None, max_queries=max_queries, progress=progress)
    return {p: {g: v.get("recall@10") for g, v in r["metrics"][p].items()} for p in ("semantic", "full", f"mixed-r{rank}")}


def latency(n_memories=10_000, n_queries=1_000, N=200, budget=35, timed=100, seed=0) -> dict:
    "Milliseconds that reuse look-up + completion + mixing add to one reranked search with `n_queries` past queries over `n_memories` memories."
    from threadpoolctl import threadpool_limits
    from earmem.memory.store.rerank import _Experience, Rerank, SimulatedScorer
    rng, ms = np.random.default_rng(seed), []
    plan = Rerank(SimulatedScorer({}), n_candidates=N, rank=8)
    ex = _Experience(plan, 384)
    ids = [f"m{i}" for i in range(n_memories)]
    truth = rng.normal(size=(n_memories, 4)) @ rng.normal(size=(4, n_queries + timed))
    score = lambda rows, t: 1 / (1 + np.exp(-truth[rows, t]))
    with threadpool_limits(1):
        for t in range(n_queries + timed):
            cand = rng.choice(n_memories, N, replace=False)
            got = {i: float(s) for i, s in zip(range(budget), score(cand[:budget], t))}
            q = rng.normal(size=384).astype(np.float32); q /= np.linalg.norm(q)
            t0 = time.perf_counter()
            ex.reused(q, plan.reuse_similarity)                     # the reuse look-up over past query vectors
            _complete_and_mix(ex, [ids[c] for c in cand], got)     # complete (§IV-D), mix (§IV-E), absorb
            ex.vectors = np.vstack([ex.vectors, q[None]])
            if t >= n_queries: ms.append(1e3 * (time.perf_counter() - t0))
    return {"n_memories": n_memories, "past_queries": n_queries, "N": N, "budget": budget, "ms_median": float(np.median(ms)),
            "ms_p95": float(np.percentile(ms, 95)), "blas_threads": 1}


def _complete_and_mix(ex, ids, got):
    "The store's completion + mixing step (MemoryStore._complete_and_mix does not use the store itself)."
    from earmem.memory import MemoryStore
    return MemoryStore._complete_and_mix(None, ex, ids, got)


def _pm(v, f=1):
    return "—" if v is None else f"{v[0]:.{f}f} ± {v[1]:.{f}f}" if isinstance(v, list) else f"{100 * v['mean']:.1f} ± {100 * v['std']:.1f}"


def table(out) -> str:
    "Recall@10 and scorer calls per query, per stage, mean ± std over seeds (and the harness's Recall@10 when run)."
    lines = ["| policy | " + " | ".join(("all",) + STAGES) + " |", "|---" * 6 + "|"]
    for p in ("semantic", "full", "earm"):
        if p not in out: continue
        lines.append(f"| {p} R@10 | " + " | ".join(_pm(out[p].get(g, {}).get("recall@10")) for g in ("all",) + STAGES) + " |")
        lines.append(f"| {p} calls/query | " + " | ".join(_pm(out[p].get(g, {}).get("calls")) for g in ("all",) + STAGES) + " |")
    for p, v in out.get("harness", {}).items():
        lines.append(f"| harness {p} R@10 | " + " | ".join(_pm(v.get(g)) for g in ("all",) + STAGES) + " |")
    share = out["earm_share_of_full_calls"]
    lines.append(f"\nEARM's scorer calls: {'—' if share is None else f'{100 * share:.1f}'} % of Full's over the stream; "
                 f"completion + mixing median {out['completion_ms_median']:.2f} ms per search; {out['questions']} questions, "
                 f"seeds {out['seeds']}, completion rank {out['rank']}, conversations {out['part']} {out['banks']}, {out['seconds']} s")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--banks", nargs="*", help="only these conversations (default: all ten)")
    ap.add_argument("--max-queries", type=int, help="at most this many questions per conversation (smoke runs)")
    ap.add_argument("--harness", action="store_true", help="also run chapter 15's harness on the same questions")
    ap.add_argument("--latency", action="store_true", help="only the latency benchmark (10,000 memories, 1,000 past queries)")
    ap.add_argument("--json", metavar="OUT", help="write the figures to OUT")
    ap.add_argument("--figure", metavar="PNG", help="plot scorer calls per search over the stream to PNG")
    ap.add_argument("--rank", type=int, default=8, help="EARM's completion rank r (default 8, the harness's)")
    ap.add_argument("--part", default="all", choices=("all", "dev", "test"),
                    help="only the dev or test conversations of chapter 31a's conversation split (choose settings on dev, report test once)")
    ap.add_argument("--policies", nargs="+", default=["semantic", "full", "earm"], choices=("semantic", "full", "earm"))
    ap.add_argument("--progress", action="store_true")
    a = ap.parse_args(argv)
    if "earm" not in a.policies: ap.error("--policies: must include earm (its stream labels the stages)")
    out = {"latency": latency()} if a.latency else study(a.seeds, a.banks, a.max_queries, a.progress, a.rank, a.part, tuple(a.policies))
    if a.harness and not a.latency: out["harness"] = harness(a.seeds, out["banks"], a.max_queries, a.progress, a.rank)
    if a.json: Path(a.json).write_text(json.dumps(out, indent=1))
    if a.figure and not a.latency: figure(out, a.figure)
    print(table(out) if not a.latency else json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
