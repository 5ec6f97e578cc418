"""House report: module sizes, longest exported cell and function per module, the import graph between modules.
Usage: python tools/house.py [--json]   (run from the repository root)"""
import ast, glob, json, os, re, sys

def modules(lib="earmem"):
    return {os.path.splitext(os.path.relpath(f, lib))[0].replace(os.sep, "."): f
            for f in sorted(glob.glob(f"{lib}/**/*.py", recursive=True)) if not f.endswith(("_modidx.py", "__init__.py"))}

def notebook_of(nbs="nbs"):
    "module name -> (notebook, longest exported cell)"
    out = {}
    for f in sorted(glob.glob(f"{nbs}/*.ipynb")):
        cells = json.load(open(f))["cells"]
        srcs = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
        m = next((re.search(r"^#\|\s*default_exp\s+(\S+)", s, re.M) for s in srcs if re.search(r"^#\|\s*default_exp", s, re.M)), None)
        if not m: continue
        ex = [s.count("\n") + 1 for s in srcs if re.search(r"^#\|\s*export", s, re.M)]
        out[m.group(1)] = (os.path.basename(f), max(ex or [0]))
    return out

def functions(path):
    tree = ast.parse(open(path).read())
    return [(n.name, n.end_lineno - n.lineno + 1) for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]

def imports(mods):
    edges = {m: set() for m in mods}
    for m, f in mods.items():
        for n in ast.walk(ast.parse(open(f).read())):
            names = [n.module or ""] if isinstance(n, ast.ImportFrom) and n.level else \
                    [a.name for a in n.names] if isinstance(n, ast.Import) else \
                    [n.module] if isinstance(n, ast.ImportFrom) and n.module and n.module.startswith("earmem") else []
            for t in names:
                t = t.removeprefix("earmem.").lstrip(".")
                if t in mods and t != m: edges[m].add(t)
    return edges

def report():
    mods, nbs = modules(), notebook_of()
    edges = imports(mods)
    order = {m: nbs.get(m, ("?", 0))[0] for m in mods}
    rows, allf = [], []
    for m, f in mods.items():
        fs = functions(f); allf += [l for _, l in fs]
        name, longest = max(fs, key=lambda x: x[1]) if fs else ("-", 0)
        rows.append(dict(module=m, notebook=order[m], lines=sum(1 for _ in open(f)), longest_cell=nbs.get(m, ("?", 0))[1],
                         longest_function=f"{name} ({longest})", imports=sorted(edges[m])))
    upward = [(a, b) for a in edges for b in edges[a] if order[b] > order[a]]
    cycles = sorted({tuple(sorted((a, b))) for a in edges for b in edges[a] if a in edges[b]})
    allf.sort()
    p90 = allf[int(0.9 * (len(allf) - 1))] if allf else 0
    return dict(modules=sorted(rows, key=lambda r: r["notebook"]), upward_imports=upward, cycles=cycles,
                functions=len(allf), function_p90=p90, function_max=max(allf or [0]))

if __name__ == "__main__":
    r = report()
    if "--json" in sys.argv: print(json.dumps(r, indent=1)); sys.exit()
    print(f"{'module':<12} {'notebook':<20} {'lines':>5} {'cell':>5}  longest function        imports")
    for x in r["modules"]:
        print(f"{x['module']:<12} {x['notebook']:<20} {x['lines']:>5} {x['longest_cell']:>5}  {x['longest_function']:<24} {', '.join(x['imports'])}")
    print(f"functions: {r['functions']}, p90 length {r['function_p90']} lines, longest {r['function_max']}")
    print("import cycles:", r["cycles"] or "none"); print("imports of a later chapter:", r["upward_imports"] or "none")
