"""Stale-output check: re-execute chapters and compare their demonstration cells' text with the stored outputs.

Usage: python tools/check_outputs.py NOTEBOOK [NOTEBOOK ...] [--all] [--update] [--flags 'slow'] [--timeout S] [--quiet]
       (run from the repository root, with the package you mean to test importable, e.g. PYTHONPATH=$PWD)

Each notebook runs in a fresh process, in its own folder, with execnb's CaptureShell and the cell selection of
`nbdev_test`: cells flagged with a `tst_flags` directive of settings.ini (`#| slow`, `#| notest`), `#| eval: false`
cells and `nbdev_export()` calls are not run (their stored outputs are neither compared nor changed) unless --flags
names the flag. A notebook that raises fails the check.

Compared cells (the chapter's *demonstration cells*):
  - its closing demonstration: the last code cell with code and none of export/exports/exporti/hide/default_exp
    (the definition of tools/book.py);
  - every cell marked with a `#| demo` directive (nbdev ignores directives it does not know: export, tests and docs
    leave the cell alone, and the docs do not show the line);
  - with --all, every code cell that was run.
Compared text: stdout, the text/plain of results and displays (a figure's `<Figure size ... with 1 Axes>`, not its
PNG bytes) and errors' `name: value`; stderr is not compared (progress bars and library warnings). Trailing whitespace
and trailing blank lines are ignored. A difference prints a unified diff (stored -> fresh) and the exit code is 1.

--update   write the fresh outputs of every cell that was run back into the notebook (the way to refresh them; skipped
           cells keep theirs; finished progress bars are dropped from stderr), then run nbdev_clean
--flags    run the cells of these test flags too (as `nbdev_test --flags`), e.g. to refresh `#| slow` cells' outputs
--timeout  seconds per cell (default 900)
"""
from __future__ import annotations
import argparse, difflib, json, os, re, subprocess, sys, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from book import is_demonstrable, directives   # one definition of a closing demonstration

_re_bar = re.compile(r'^.*\d+%\|.*\|\s*[\d.]+[kMG]?/[\d.?]+[kMG]?\s*\[.*\]\s*$')   # a finished tqdm bar (build_docs.py)


def run_notebook(path: str, timeout: int, force: str = "") -> dict:
    "In this process: execute `path` as nbdev_test does; {cell index: fresh outputs} for the cells that ran"
    from execnb.shell import CaptureShell
    from fastcore.basics import str2bool
    from nbdev.config import get_config
    from nbdev.frontmatter import FrontmatterProc
    from nbdev.process import NBProcessor
    os.environ["IN_TEST"] = "1"
    flags = set(get_config().tst_flags.split()) - set(force.split())
    nb = NBProcessor(path, procs=FrontmatterProc, process=True).nb
    if str2bool(getattr(nb, "frontmatter_", {}).get("skip_exec", False)): return dict(ran={}, error=None)

    def skip(cell):
        if cell.cell_type != "code": return True
        if "nbdev_export" + "(" in cell.source: return True
        d = getattr(cell, "directives_", {}) or {}
        if d.get("eval:", [""])[0].lower() == "false": return True
        return bool(flags & d.keys())

    if len(nb.cells) != len(json.load(open(path, encoding="utf-8"))["cells"]):
        return dict(ran={}, error="nbdev's processing changed the number of cells: cannot match them to the stored ones")
    sys.path.insert(0, ROOT)
    shell, ran = CaptureShell(path, timeout=timeout), {}
    os.chdir(os.path.dirname(os.path.abspath(path)))
    for i, cell in enumerate(nb.cells):
        if skip(cell): continue
        outs = shell.run(cell.source, timeout=timeout)
        ran[i] = json.loads(json.dumps(list(outs), default=str))
        if shell.exc is not None:
            return dict(ran=ran, error=f"cell {i}: " + "".join(o for x in outs if x["output_type"] == "error" for o in x["traceback"]))
    return dict(ran=ran, error=None)


def text_of(outputs) -> str:
    "The comparable text of a cell's outputs: stdout, text/plain of results and displays, errors; no stderr"
    parts = []
    for o in outputs or []:
        t = o.get("output_type")
        if t == "stream" and o.get("name") == "stdout": parts.append("".join(o.get("text", "")))
        elif t in ("execute_result", "display_data"):
            plain = o.get("data", {}).get("text/plain")
            if plain is not None: parts.append("".join(plain) + "\n")
        elif t == "error": parts.append(f"{o.get('ename')}: {o.get('evalue')}\n")
    lines = [l.rstrip() for l in "".join(parts).splitlines()]
    while lines and not lines[-1]: lines.pop()
    return "\n".join(lines)


def _drop_bars(outputs):
    out = []
    for o in outputs:
        if o.get("output_type") == "stream" and o.get("name") == "stderr":
            lines = [l for l in "".join(o.get("text", "")).splitlines(True) if not _re_bar.match(l.rstrip("\n"))]
            if not "".join(lines).strip(): continue
            o = dict(o, text=lines)
        out.append(o)
    return out


def demo_cells(cells, everything=False) -> list:
    "Indices of the demonstration cells: the closing demonstration and the `#| demo` cells (all runnable with --all)"
    code = [i for i, c in enumerate(cells) if is_demonstrable(c)]
    if everything: return [i for i, c in enumerate(cells) if c["cell_type"] == "code"]
    marked = [i for i in code if "demo" in directives("".join(cells[i]["source"]))]
    return sorted(set(marked + code[-1:]))


def check(path: str, a) -> bool:
    with tempfile.TemporaryDirectory() as d:
        res_file = os.path.join(d, "res.json")
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p))
        p = subprocess.run([sys.executable, os.path.abspath(__file__), "--_worker", os.path.abspath(path), res_file,
                            "--timeout", str(a.timeout), "--flags", a.flags], env=env, cwd=ROOT)
        if p.returncode or not os.path.exists(res_file): print(f"FAIL {path}: the worker exited with {p.returncode}"); return False
        res = json.load(open(res_file))
    ran = {int(k): v for k, v in res["ran"].items()}
    if res["error"]: print(f"FAIL {path}: raised in {res['error']}"); return False
    raw = json.load(open(path, encoding="utf-8"))
    cells = raw["cells"]
    if a.update:
        for i, outs in ran.items(): cells[i]["outputs"] = _drop_bars(outs)
        with open(path, "w", encoding="utf-8") as f: f.write(json.dumps(raw, indent=1, ensure_ascii=False) + "\n")
        subprocess.run(["nbdev_clean", "--fname", path], check=True, cwd=ROOT)
        print(f"updated {path}: {len(ran)} cells ran, {sum(bool(_drop_bars(o)) for o in ran.values())} with output")
        return True
    ok, compared, skipped = True, 0, []
    for i in demo_cells(cells, a.all):
        if i not in ran: skipped.append(i); continue
        old, new = text_of(cells[i].get("outputs")), text_of(ran[i])
        compared += 1
        if old != new:
            ok = False
            head = "".join(cells[i]["source"]).strip().splitlines()[:1]
            print(f"STALE {path} cell {i} ({head[0][:60] if head else ''}):")
            sys.stdout.writelines(difflib.unified_diff([l + "\n" for l in old.splitlines()],
                                                       [l + "\n" for l in new.splitlines()],
                                                       f"{path} cell {i} (stored)", f"{path} cell {i} (re-executed)"))
    if not a.quiet or not ok:
        note = f", not run (slow/notest/eval: false): cells {skipped}" if skipped else ""
        print(f"{'ok   ' if ok else 'FAIL '} {path}: {compared} demonstration cells compared{note}")
    return ok


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--_worker"]:
        timeout = int(argv[argv.index("--timeout") + 1]) if "--timeout" in argv else 900
        res = run_notebook(argv[1], timeout, argv[argv.index("--flags") + 1] if "--flags" in argv else "")
        with open(argv[2], "w") as f: json.dump(res, f)
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("notebooks", nargs="+", help="notebook paths")
    ap.add_argument("--all", action="store_true", help="compare every cell that ran, not only the demonstrations")
    ap.add_argument("--update", action="store_true", help="write the fresh outputs back (then nbdev_clean)")
    ap.add_argument("--timeout", type=int, default=900, help="seconds per cell (default 900)")
    ap.add_argument("--quiet", action="store_true", help="print only failures")
    ap.add_argument("--flags", default="", help="space-separated test flags to run anyway, as nbdev_test --flags (e.g. 'slow')")
    a = ap.parse_args(argv)
    results = [check(p, a) for p in a.notebooks]
    if not a.update: print(f"check_outputs: {sum(results)}/{len(results)} notebooks match their stored demonstrations")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
