"""House report: the wings and the imports between them, module sizes, and how each chapter's exported cells are cut.
Usage: python tools/house.py [--json] [--check] [--cells]   (run from the repository root)

--check   exit 1 when a module imports a later wing, a later sub-wing or chapter of its own wing, or a module that imports it
          back; when a class method is defined twice (a later chapter replacing an earlier one instead of filling a declared
          hook, or a saved copy wrapped and patched over); or when a module imports another only for its side effects
--cells   per module: exported-cell lines (median / p90 / max), definitions per exported cell, the share of exported
          cells whose names a later non-exported cell uses before the next export (a test or example beneath it), and
          whether the chapter follows prose -> export -> test -> stored demonstration
"""
import ast, glob, json, os, re, statistics, sys

# The build order of the wings: a module may import its own wing and the wings before it, never a later one.
WINGS = ["core", "ear", "earm", "experiments", "memory", "serve", "cli"]
# The memory wing's sub-wings, in build order: a module may import its own sub-wing and those before it.
MEMORY_SUBWINGS = ["rules", "index", "backends", "store", "service", "measure"]
TOP_LEVEL = {"core": "core", "retrievers": "core", "static": "core", "toys": "core", "cli": "cli", "__init__": "cli"}

def wing_of(module: str) -> str:
    head = module.split(".")[0]
    return head if head in WINGS and "." in module else TOP_LEVEL.get(module, head)

def modules(lib="earmem"):
    out = {}
    for f in sorted(glob.glob(f"{lib}/**/*.py", recursive=True)):
        if f.endswith("_modidx.py") or not open(f).read().strip(): continue   # skip empty package __init__ files
        m = os.path.splitext(os.path.relpath(f, lib))[0].replace(os.sep, ".")
        out[m.removesuffix(".__init__") if m != "__init__" else "__init__"] = f
    return out

def subwing_of(module: str) -> int | None:
    "The rank of a memory module's sub-wing (None outside memory/; the wing's own `__init__` comes after them all)."
    parts = module.split(".")
    if parts[0] != "memory" or "." not in module and module != "memory": return None
    return MEMORY_SUBWINGS.index(parts[1]) if len(parts) > 1 and parts[1] in MEMORY_SUBWINGS else len(MEMORY_SUBWINGS)

def _is_patch(d) -> bool:
    return (isinstance(d, ast.Name) and d.id == "patch") or (isinstance(d, ast.Call) and getattr(d.func, "id", "") == "patch")

def _is_hook(fn) -> bool:
    "A declared hook: a body of only a docstring, `pass`, `...` or `return None`, filled in by a later chapter."
    body = [b for b in fn.body if not (isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant))]
    return all(isinstance(b, ast.Pass) or (isinstance(b, ast.Return) and (b.value is None or (isinstance(b.value, ast.Constant)
               and b.value.value is None))) for b in body)

def method_definitions(mods) -> dict:
    "(class, method) -> the modules defining it: in the class body or by `@patch`; declared hooks and property setters not counted."
    defs = {}
    for m, f in mods.items():
        for n in ast.parse(open(f).read()).body:
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(_is_patch(d) for d in n.decorator_list) \
                    and n.args.args and n.args.args[0].annotation is not None and not _is_hook(n):
                defs.setdefault((ast.unparse(n.args.args[0].annotation).strip("'\""), n.name), []).append(m)
            if isinstance(n, ast.ClassDef):
                for b in n.body:
                    if isinstance(b, (ast.FunctionDef, ast.AsyncFunctionDef)) and not _is_hook(b) and not any(
                            isinstance(d, ast.Attribute) and d.attr in ("setter", "deleter") for d in b.decorator_list):
                        defs.setdefault((n.name, b.name), []).append(m)
    return defs

def saved_methods(mods) -> list:
    "`_plain = Cls.method` at module level: the wrap-and-replace pattern (a saved copy, then a new definition over it)."
    out = []
    for m, f in mods.items():
        for n in ast.parse(open(f).read()).body:
            if isinstance(n, ast.Assign):
                for v in (n.value.elts if isinstance(n.value, ast.Tuple) else [n.value]):
                    if isinstance(v, ast.Attribute) and isinstance(v.value, ast.Name) and v.value.id[:1].isupper():
                        out.append((m, f"{v.value.id}.{v.attr}"))
    return out

def side_effect_imports(mods) -> list:
    "`import earmem.x.y` (or `import earmem.x.y as z`) whose module is never used by name: imported only for what importing it does."
    out = []
    for m, f in mods.items():
        text = open(f).read()
        for n in ast.walk(ast.parse(text)):
            if not isinstance(n, ast.Import): continue
            for a in n.names:
                if not a.name.startswith("earmem."): continue
                used = a.asname or a.name
                if len(re.findall(rf"(?<![\w.]){re.escape(used)}\.\w", text)) == 0: out.append((m, a.name))
    return out

def _cells(path):
    return [("".join(c["source"]), c) for c in json.load(open(path))["cells"]]

def _is_export(s): return bool(re.search(r"^#\|\s*export", s, re.M))

def _defined(s):
    "Names an exported cell defines (functions, classes, assignments, @patch-ed methods)."
    try: tree = ast.parse("\n".join(l for l in s.splitlines() if not l.startswith("#|")))
    except SyntaxError: return [], 1
    names, defs = [], 0
    for n in tree.body:
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)): names.append(n.name); defs += 1
        elif isinstance(n, (ast.Assign, ast.AnnAssign)):
            for t in (n.targets if isinstance(n, ast.Assign) else [n.target]):
                names += [x.id for x in ast.walk(t) if isinstance(x, ast.Name)]
    return names, defs

def notebook_of(nbs="nbs"):
    "module name -> notebook path"
    out = {}
    for f in sorted(glob.glob(f"{nbs}/**/*.ipynb", recursive=True)):
        for s, _ in _cells(f):
            m = re.search(r"^#\|\s*default_exp\s+(\S+)", s, re.M)
            if m: out[m.group(1).removesuffix(".__init__")] = f; break
    return out

def chapter_cells(path):
    "Per exported cell: lines, definitions, and whether a later non-exported cell before the next export uses its names."
    cells, rows = _cells(path), []
    for i, (s, c) in enumerate(cells):
        if c["cell_type"] != "code" or not _is_export(s): continue
        names, defs = _defined(s)
        tested = False
        for s2, c2 in cells[i + 1:]:
            if c2["cell_type"] != "code": continue
            if _is_export(s2): break
            body = "\n".join(l for l in s2.splitlines() if not l.startswith("#|"))
            if any(re.search(rf"(?<![\w.]){re.escape(n)}\b", body) or re.search(rf"\.{re.escape(n)}\b", body) for n in names):
                tested = True; break
        rows.append(dict(lines=s.count("\n") + 1, defs=defs, tested=tested or not names))
    code = [(s, c) for s, c in cells if c["cell_type"] == "code" and not re.match(r"#\|\s*(hide|default_exp)", s)]
    has_prose = any(c["cell_type"] == "markdown" and len(s) > 200 for s, c in cells)
    demo = bool(code) and not _is_export(code[-1][0]) and any(c.get("outputs") for s, c in code[-3:])
    pattern = has_prose and bool(rows) and sum(r["tested"] for r in rows) >= 0.8 * len(rows) and demo
    return rows, pattern

def functions(path):
    tree = ast.parse(open(path).read())
    return [(n.name, n.end_lineno - n.lineno + 1) for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]

def imports(mods):
    "module -> the earmem modules it imports (relative imports resolved against its package)"
    edges = {m: set() for m in mods}
    for m, f in mods.items():
        package = [] if m == "__init__" else m.split(".") if f.endswith("__init__.py") else m.split(".")[:-1]
        for n in ast.walk(ast.parse(open(f).read())):
            if isinstance(n, ast.ImportFrom) and n.level:
                base = package[:len(package) - (n.level - 1)] + (n.module.split(".") if n.module else [])
                names = [".".join(base)] + [".".join(base + [a.name]) for a in n.names]
            elif isinstance(n, ast.Import): names = [a.name.removeprefix("earmem.") for a in n.names if a.name.startswith("earmem.")]
            elif isinstance(n, ast.ImportFrom) and n.module and n.module.startswith("earmem."):
                base = n.module.removeprefix("earmem.")
                names = [base] + [f"{base}.{a.name}" for a in n.names]
            else: continue
            for t in names:
                if t in mods and t != m: edges[m].add(t)
    return edges

def report():
    mods, nbs = modules(), notebook_of()
    edges = imports(mods)
    order = {m: os.path.basename(nbs.get(m, "?")) for m in mods}
    rows, allf = [], []
    for m, f in mods.items():
        fs = functions(f); allf += [l for _, l in fs]
        name, longest = max(fs, key=lambda x: x[1]) if fs else ("-", 0)
        rows.append(dict(module=m, wing=wing_of(m), notebook=nbs.get(m, "?"), lines=sum(1 for _ in open(f)),
                         longest_function=f"{name} ({longest})", imports=sorted(edges[m])))
    rank = {w: i for i, w in enumerate(WINGS)}
    against = [(a, b) for a in edges for b in edges[a] if rank.get(wing_of(b), 99) > rank.get(wing_of(a), 99)]
    upward = [(a, b) for a in edges for b in edges[a] if wing_of(a) == wing_of(b) and order[b] > order[a]]
    cycles = sorted({tuple(sorted((a, b))) for a in edges for b in edges[a] if a in edges[b]})
    sub = [(a, b) for a in edges for b in edges[a] if subwing_of(a) is not None and subwing_of(b) is not None
           and subwing_of(b) > subwing_of(a)]
    defs = method_definitions(mods)
    twice = sorted(f"{c}.{n} ({', '.join(ms)})" for (c, n), ms in defs.items() if len(ms) > 1)
    saved = sorted(f"{m}: {w}" for m, w in saved_methods(mods) if len(defs.get(tuple(w.split(".", 1)), [])) > 1)
    table = {w: {v: 0 for v in WINGS} for w in WINGS}
    for a in edges:
        for b in edges[a]:
            if wing_of(a) != wing_of(b): table[wing_of(a)][wing_of(b)] += 1
    allf.sort()
    p90 = allf[int(0.9 * (len(allf) - 1))] if allf else 0
    return dict(modules=sorted(rows, key=lambda r: order[r["module"]]), wing_imports=table, against_the_grain=against,
                upward_imports=upward, cycles=cycles, against_subwings=sub, methods_defined_twice=twice, saved_and_replaced=saved,
                side_effect_imports=sorted(f"{m}: import {t}" for m, t in side_effect_imports(mods)),
                memory_subwings=MEMORY_SUBWINGS, functions=len(allf), function_p90=p90, function_max=max(allf or [0]))

def cells_report():
    "Per module (chapter): exported-cell shape and the share followed by a test."
    out = []
    for m, nb in sorted(notebook_of().items(), key=lambda x: os.path.basename(x[1])):
        rows, pattern = chapter_cells(nb)
        if not rows: continue
        ls = sorted(r["lines"] for r in rows)
        out.append(dict(module=m, notebook=os.path.relpath(nb, "nbs"), cells=len(rows), median=statistics.median(ls),
                        p90=ls[int(0.9 * (len(ls) - 1))], max=ls[-1], defs_per_cell=sum(r["defs"] for r in rows) / len(rows),
                        tested=sum(r["tested"] for r in rows) / len(rows), pattern=pattern))
    return out

def _print_cells(rows):
    print(f"{'module':<24} {'notebook':<30} {'cells':>5} {'med':>4} {'p90':>4} {'max':>4} {'defs/cell':>9} {'tested':>7}  pattern")
    for r in rows:
        print(f"{r['module']:<24} {r['notebook']:<30} {r['cells']:>5} {r['median']:>4.0f} {r['p90']:>4} {r['max']:>4} "
              f"{r['defs_per_cell']:>9.2f} {r['tested']:>6.0%}  {'yes' if r['pattern'] else 'no'}")
    allc = [r for r in rows]
    n = sum(r["cells"] for r in allc)
    print(f"chapters: {len(rows)}, on the prose -> export -> test -> demo pattern: {sum(r['pattern'] for r in rows)}; "
          f"exported cells: {n}, definitions per cell {sum(r['defs_per_cell'] * r['cells'] for r in allc) / max(1, n):.2f}, "
          f"followed by a test {sum(r['tested'] * r['cells'] for r in allc) / max(1, n):.0%}")

if __name__ == "__main__":
    if "--cells" in sys.argv:
        rows = cells_report()
        if "--json" in sys.argv: print(json.dumps(rows, indent=1))
        else: _print_cells(rows)
        sys.exit()
    r = report()
    if "--json" in sys.argv: print(json.dumps(r, indent=1)); sys.exit()
    print(f"{'module':<24} {'wing':<12} {'notebook':<34} {'lines':>5}  longest function            imports")
    for x in r["modules"]:
        print(f"{x['module']:<24} {x['wing']:<12} {os.path.relpath(x['notebook'], 'nbs') if x['notebook'] != '?' else '?':<34} "
              f"{x['lines']:>5}  {x['longest_function']:<27} {', '.join(x['imports'])}")
    print(f"functions: {r['functions']}, p90 length {r['function_p90']} lines, longest {r['function_max']}")
    print("\nwing imports (row imports column; modules of one wing importing modules of another):")
    print(f"{'':<12}" + "".join(f"{w:>12}" for w in WINGS))
    for w in WINGS: print(f"{w:<12}" + "".join(f"{(r['wing_imports'][w][v] or '·') if v != w else '-':>12}" for v in WINGS))
    print("\nimport cycles:", r["cycles"] or "none")
    print("imports of a later wing (against the grain):", r["against_the_grain"] or "none")
    print("imports of a later chapter in the same wing:", r["upward_imports"] or "none")
    print(f"memory sub-wings ({len(r['memory_subwings'])}, in build order): {' -> '.join(r['memory_subwings'])}; imports of a later sub-wing:",
          r["against_subwings"] or "none")
    print("methods defined more than once (use a declared hook):", r["methods_defined_twice"] or "none")
    print("methods saved and patched over:", r["saved_and_replaced"] or "none")
    print("modules imported only for their side effects:", r["side_effect_imports"] or "none")
    bad = (r["cycles"] or r["against_the_grain"] or r["upward_imports"] or r["against_subwings"] or r["methods_defined_twice"]
           or r["saved_and_replaced"] or r["side_effect_imports"])
    if "--check" in sys.argv and bad: print("FAIL: the house check found an arrow against the grain"); sys.exit(1)
