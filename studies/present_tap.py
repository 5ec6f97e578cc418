"""Issue 36: a tap on the store's last ranking step (22a `present_newer`), for studies that try versions of it offline.

`install()` wraps `present_newer` where `search` (chapter 23) calls them, so the last search's hits in the
order `present_newer` receives, their pairwise cosines and times are kept in the returned dict (the ranking itself is
unchanged). `snapshot(tap, query)` turns the last call into a JSON-able row: per hit id, kind, text, metadata, created,
relevance, frozen cosine, score, the order received and the order returned. A study writes one row per question with
`--dump OUT` (JSON lines).
"""
from __future__ import annotations
import numpy as np


def install() -> dict:
    import earmem.memory.store.operations as ops
    tap, pn = {}, ops.present_newer
    def present_newer(query, hits, order, vectors, formed, similarity):
        out = pn(query, hits, order, vectors, formed, similarity)
        tap.update(query=query, hits=list(hits), order=[int(i) for i in order], out=[int(i) for i in out],
                   cos=np.round(np.asarray(vectors, np.float64) @ np.asarray(vectors, np.float64).T, 4).tolist(),
                   created=[float(f[0]) for f in formed])
        return out
    ops.present_newer = present_newer
    return tap


def snapshot(tap: dict, query: str, **extra) -> dict:
    "The last search's row (its query must be `query`: a check that the tap saw this search)."
    if tap.get("query") != query: raise RuntimeError(f"present_tap: the last tapped search was {tap.get('query')!r}, expected {query!r}")
    hs = tap["hits"]
    return dict(query=query, order=tap["order"], out=tap["out"], cos=tap["cos"], created=tap["created"],
                hits=[dict(id=h.id, kind=h.kind, text=h.text, metadata=h.metadata or {}, entities=list(h.entities or ()),
                           relevance=round(float(h.relevance), 4), frozen=round(float(h.frozen_relevance), 4), score=round(float(h.score), 4))
                      for h in hs], **extra)
