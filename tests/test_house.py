"""The house (issue 35): every module that exposes one of the package's grown classes exposes the same, complete class —
checked in a fresh interpreter per module, as a program importing only that module would see it — and no method of
the package is defined twice (a later chapter fills a declared hook instead)."""
import ast, json, subprocess, sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import house  # noqa: E402

GROWN = ("MemoryStore", "SQLiteBackend", "PostgresBackend")   # classes defined in one chapter and given methods by later ones

def _modules() -> dict:
    return {f"earmem.{m}" if m != "__init__" else "earmem": f for m, f in house.modules(str(ROOT / "earmem")).items()}

def _expected(mods) -> dict:
    "class -> every method name any module defines on it (class body or @patch), read from the source"
    defs = house.method_definitions({m: f for m, f in mods.items()})
    return {c: sorted(n for (cls, n) in defs if cls == c) for c in GROWN}

PROBE = """
import importlib, json, sys
m = importlib.import_module(sys.argv[1])
out = {}
for c, want in json.loads(sys.argv[2]).items():
    C = getattr(m, c, None)
    if isinstance(C, type): out[c] = [f"{C.__module__}.{C.__qualname__}", sorted(n for n in want if not hasattr(C, n))]
print(json.dumps(out))
"""

def _probe(module: str, expected: dict) -> dict:
    r = subprocess.run([sys.executable, "-c", PROBE, module, json.dumps(expected)], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 0, f"{module}: {r.stderr[-2000:]}"
    return json.loads(r.stdout)

def test_grown_classes_are_whole_from_every_module():
    mods = _modules()
    expected = _expected(mods)
    assert all(len(v) > 10 for v in expected.values()), expected   # the source was read
    exposing = [m for m, f in mods.items() if any(c in Path(f).read_text() for c in GROWN)] + ["earmem.memory"]
    with ThreadPoolExecutor(2) as pool: seen = dict(zip(exposing, pool.map(lambda m: _probe(m, expected), exposing)))
    where = {c: {v[c][0] for v in seen.values() if c in v} for c in GROWN}
    assert all(len(w) == 1 for w in where.values()), where          # one class object's name per class, whichever module
    missing = {m: {c: v[1] for c, v in got.items() if v[1]} for m, got in seen.items()}
    assert not {m: x for m, x in missing.items() if x}, missing    # nothing missing, whichever module was imported alone
    assert sum(bool(v) for v in seen.values()) >= 15                  # the check saw the classes from many modules

def test_no_method_defined_twice_and_no_side_effect_imports(monkeypatch):
    monkeypatch.chdir(ROOT)
    r = house.report()
    assert r["methods_defined_twice"] == [] and r["saved_and_replaced"] == [], (r["methods_defined_twice"], r["saved_and_replaced"])
    assert r["side_effect_imports"] == [], r["side_effect_imports"]
    assert r["cycles"] == [] and r["against_the_grain"] == [] and r["against_subwings"] == []
    assert len(house.MEMORY_SUBWINGS) <= 6

def test_house_finds_what_it_forbids(tmp_path):
    "The checks can fail: a method defined twice, a saved copy patched over, a side-effect import, a hook filled (allowed)."
    lib = tmp_path / "lib"; (lib / "memory").mkdir(parents=True)
    (lib / "memory" / "a.py").write_text("from fastcore.basics import patch\nclass C:\n    def f(self): return 1\n    def hook(self):\n        'a hook'\n        return None\n")
    (lib / "memory" / "b.py").write_text("import earmem.memory.a\nfrom .a import C\n_f = C.f\n@patch\ndef f(self: C): return _f(self) + 1\n"
                                         "@patch\ndef hook(self: C): return 2\n")
    mods = {"memory.a": str(lib / "memory" / "a.py"), "memory.b": str(lib / "memory" / "b.py")}
    defs = house.method_definitions(mods)
    assert defs[("C", "f")] == ["memory.a", "memory.b"] and defs[("C", "hook")] == ["memory.b"]
    assert house.saved_methods(mods) == [("memory.b", "C.f")]
    assert house.side_effect_imports(mods) == [("memory.b", "earmem.memory.a")]
