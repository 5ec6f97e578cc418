"""The two encoder backends side by side on LoCoMo turns: texts/s of each and the cosine between their vectors.

    python tools/encoder_compare.py [--n 300] [--batch-size 64]

Encodes the first N dialogue turns of LoCoMo (from $EARMEM_DATA) with `Encoder(backend='torch')`
(sentence-transformers) and `Encoder(backend='onnx')` (onnxruntime; the ONNX copy is exported once), without the
embedding cache, in length-sorted batches as the store does, and prints the rates and the min / mean cosine."""
import argparse, time
import numpy as np
from earmem.core import Encoder


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=300); p.add_argument("--batch-size", type=int, default=64)
    a = p.parse_args()
    from earmem.experiments.data import load_locomo
    texts = list(load_locomo().memories["text"])[:a.n]
    out = {}
    for backend in ("torch", "onnx"):
        enc = Encoder(cache=False, backend=backend, batch_size=a.batch_size, progress=False)
        t0 = time.perf_counter(); enc._load(); load = time.perf_counter() - t0
        enc.encode_documents(texts[:8])                      # warm-up
        t0 = time.perf_counter(); out[backend] = enc.encode_documents(texts); sec = time.perf_counter() - t0
        print(f"{backend:<6} load {load:6.2f} s   {len(texts) / sec:7.1f} texts/s   ({len(texts)} LoCoMo turns, batch {a.batch_size})")
    cos = (out["torch"] * out["onnx"]).sum(1)
    print(f"cosine torch vs onnx: min {cos.min():.6f}, mean {cos.mean():.6f}")


if __name__ == "__main__": main()
