"""The lexical and hybrid retrievers of chapter 00a against hand computations, and (when LoCoMo is available) against the
numbers measured for issue #12 on the seed-0 test split."""
import math, os, sys, warnings
from pathlib import Path

import numpy as np
import pytest
import fastcore.test as fct

import earmem.core as core
import earmem.retrievers as retrievers
from earmem.core import Memory, Query, zscore
from earmem.retrievers import MemoryBank, LexicalRetriever, HybridRetriever, make_retriever


DOCS = ["alpha beta beta", "beta gamma", "delta alpha alpha alpha epsilon"]


def _bank(texts, groups=None):
    groups = groups or ["S1"] * len(texts)
    mems = [Memory(f"m{i}", t, metadata={"session": g}) for i, (t, g) in enumerate(zip(texts, groups))]
    E = np.eye(len(texts), 4, dtype=np.float32) + 0.1
    return MemoryBank(mems, E, "t")


def _bm25_by_hand(docs, query, k1=1.5, b=0.75):
    "Lucene's BM25 (no (k1 + 1) factor): idf = ln(1 + (N − df + .5)/(df + .5)) times tf / (tf + k1 (1 − b + b dl/avgdl))."
    toks = [d.split() for d in docs]
    N, avg = len(toks), np.mean([len(t) for t in toks])
    out = []
    for t in toks:
        s = 0.0
        for w in set(query.split()):
            df = sum(w in u for u in toks)
            if not df: continue
            tf = t.count(w)
            s += math.log(1 + (N - df + 0.5) / (df + 0.5)) * tf / (tf + k1 * (1 - b + b * len(t) / avg))
        out.append(s)
    return np.array(out)


def test_bm25_matches_the_formula():
    lex = LexicalRetriever(_bank(DOCS), stem=False)
    for q in ("alpha", "beta gamma", "alpha epsilon zeta"):
        fct.test_close(lex.bank_scores(None, q), _bm25_by_hand(DOCS, q), eps=1e-5)
    fct.test_eq(lex.bank_scores(None, "unknown words only"), np.zeros(3))


def test_bm25_candidates_rank_by_score_ties_to_lower_position():
    bank = _bank(["cat sat", "dog ran", "cat sat"])
    c = LexicalRetriever(bank, stem=False).candidates(bank.embeddings[1], 3, Query("q", "cat", ["m0"]))
    fct.test_eq(c.ids, ["m0", "m2", "m1"])                 # m0 and m2 tie: lower position first
    assert c.base is None and c.scale == 1.0                # BM25 candidates are scored by the plain adapter


def test_hybrid_is_the_weighted_z_fusion_plus_neighbours():
    texts = ["alpha beta", "gamma", "beta beta delta", "epsilon", "alpha"]
    bank = _bank(texts, ["S1", "S1", "S1", "S2", "S2"])
    q = np.array([0.2, 1.0, 0.1, 0.0], np.float32); q /= np.linalg.norm(q)
    hy = HybridRetriever(bank, w=0.4, beta=0.25, stem=False)
    f = 0.6 * zscore(bank.embeddings @ q) + 0.4 * zscore(_bm25_by_hand(texts, "beta"))
    nb = [f[1], max(f[0], f[2]), f[1], f[4], f[3]]         # neighbours inside each session only
    fct.test_close(hy.bank_scores(q, "beta"), f + 0.25 * np.array(nb), eps=1e-6)
    c = hy.candidates(q, 5, Query("q", "beta", ["m2"]))
    fct.test_close(c.scale, 0.6 / (bank.embeddings @ q).std(), eps=1e-6)
    fct.test_eq(c.ids, [f"m{i}" for i in np.lexsort((np.arange(5), -(f + 0.25 * np.array(nb))))])


def test_retriever_name_and_option_errors():
    bank = _bank(DOCS)
    with pytest.raises(ValueError, match="retriever: expected one of"): make_retriever("tfidf", bank)
    with pytest.raises(ValueError, match="w: expected a finite number"): make_retriever("hybrid", bank, w=1.5)
    with pytest.raises(ValueError, match="beta: expected a finite number"): make_retriever("hybrid", bank, beta=-1)


def test_without_pystemmer_bm25_warns_once_and_does_not_stem(monkeypatch):
    monkeypatch.setattr(retrievers, "_STEMMER", [])
    monkeypatch.setitem(sys.modules, "Stemmer", None)          # `import Stemmer` now fails
    with pytest.warns(UserWarning, match="PyStemmer is not installed"):
        fct.test_eq(retrievers.lexical_tokens("running dogs"), ["running", "dogs"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fct.test_eq(retrievers.lexical_tokens("running dogs"), ["running", "dogs"])   # no second warning
    assert LexicalRetriever(_bank(DOCS)).stem is False


LOCOMO = Path(os.environ.get("EARMEM_DATA", "")) / "locomo" / "locomo10.json"


@pytest.mark.skipif(not LOCOMO.exists(), reason="LoCoMo not available (set EARMEM_DATA)")
@pytest.mark.parametrize("retriever,load,recall,ceiling", [
    ("dense", {}, 27.9, 44.2),                                  # MiniLM, '{speaker}: {text}'
    ("bm25", {}, 42.2, 54.9),                                   # BM25 with Snowball stems
    ("hybrid", {"with_date": True}, 51.3, 66.9),                # the 'tuned' preset's frozen retriever
])
def test_frozen_retrievers_on_locomo(retriever, load, recall, ceiling):
    from earmem.experiments.evaluation import prepare_locomo, run_method
    prep = prepare_locomo(core.Encoder(progress=False), K=20, retriever=retriever, progress=False, **load)
    r = run_method(prep, "retriever", k=5)["results"]["overall"]
    fct.test_eq(round(100 * r["recall@5"], 1), recall)
    all_gold = np.mean([set(q.gold) <= set(prep.candidates[q.id].ids) for q in prep.test])
    fct.test_eq(round(100 * all_gold, 1), ceiling)
