"""Book report: does each chapter show its results? (issue 35)   Run from the repository root.

Usage: python tools/book.py [PATH ...] [--json] [--check] [--min-share F] [--min-chapter-share F] [--closing] [--paths]

PATH        notebooks or folders to report on (default: every notebook under nbs/)
--json      print the report as JSON instead of a table
--check     exit 1 when a threshold below fails (the figures are printed either way)
--min-share F           with --check: the share of non-export code cells with stored output, over all the chapters
                        reported, must be >= F (0..1; default 0.25)
--min-chapter-share F   with --check: every chapter's share must be >= F (default 0: not checked)
--closing   with --check: every chapter's closing demonstration must assert and keep its output
--paths     with --check: no chapter may point to a file that is not in the checkout

Definitions. A *non-export code cell* is a code cell with some code whose leading directives (nbdev's `#|` lines, read
as nbdev reads them) include none of export/exports/exporti/hide/default_exp; `#| slow` and `#| notest` cells count.
A chapter's *closing demonstration* is its last non-export code cell; it *asserts* when its code holds an `assert`
statement. A *missing pointer* is a relative path with a file extension written in a chapter's prose or code comments (such as
`papers/ear-exploratory-assimilating-reflection.txt`) that exists neither from the repository root nor from the
notebook's folder; URLs, absolute, `~` and `$VAR/` paths, fenced command blocks, placeholders (`nbs/NAME.ipynb`) and
the paths listed in IGNORED_PATHS (a data folder's layout) are ignored.
"""
import argparse, ast, glob, json, os, re, sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXCLUDED = {"export", "exports", "exporti", "hide", "default_exp"}
EXTENSIONS = "txt|md|json|jsonl|py|ipynb|csv|tsv|ini|cfg|toml|yml|yaml|png|svg|pdf|sh|npy|npz|safetensors|sqlite|db|html"
_re_path = re.compile(rf"(?<![\w/.:~$-])((?:\.\.?/)?[\w.-]+(?:/[\w.-]+)+\.(?:{EXTENSIONS}))(?![\w/])")
# Relative paths that are not pointers into the checkout: the layout of a data folder ($EARMEM_DATA) as the loaders
# expect it; add here a path that a chapter creates at run time and names in prose.
IGNORED_PATHS = {"locomo/locomo10.json", "longmemeval/longmemeval_s.json", "longmemeval/longmemeval_s_cleaned.json"}
_re_placeholder = re.compile(r"(^|/)[A-Z][A-Z_]+(\.\w+)?($|/)")   # nbs/NAME.ipynb: a pattern, not a file


def directives(source: str) -> set:
    "The names of a cell's leading `#|` directives, as nbdev reads them (`#| export`, `#|hide`, `# | eval: false`)"
    out = set()
    for line in source.splitlines():
        if not line.strip(): continue
        m = re.match(r"\s*#\s*\|\s*([\w-]+)", line)
        if not m: break
        out.add(m.group(1))
    return out


def is_demonstrable(cell) -> bool:
    "A non-export code cell: code, some code, and none of the export/hide/default_exp directives"
    if cell["cell_type"] != "code": return False
    src = "".join(cell["source"])
    body = "\n".join(l for l in src.splitlines() if not re.match(r"\s*#\s*\|", l))
    return bool(body.strip()) and not (directives(src) & EXCLUDED)


def _is_check(n) -> bool:
    "An `assert` statement, or a call of one of fastcore.test's checks (`test_eq`, `test_fail`, `test_close`, …), which assert"
    return isinstance(n, ast.Assert) or (isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id.startswith("test_"))

def has_assert(source: str) -> bool:
    "True when the cell's code asserts: an `assert` or a fastcore.test check (parsed; a cell IPython magics break is searched as text)"
    code = "\n".join(l for l in source.splitlines() if not l.lstrip().startswith(("%", "!")))
    try: return any(_is_check(n) for n in ast.walk(ast.parse(code)))
    except SyntaxError: return bool(re.search(r"^\s*assert\b|;\s*assert\b|\btest_\w+\(", source, re.M))


def pointer_text(cell) -> str:
    "Where a chapter points to files: all of a markdown cell; the comments of a code cell (its strings are data)"
    src = "".join(cell["source"])
    if cell["cell_type"] == "markdown": return re.sub(r"^```.*?^```", "", src, flags=re.M | re.S)   # not commands
    return "\n".join(m.group(1) for m in re.finditer(r"(?:^|\s)#(?!\s*\|)(.*)$", src, re.M))


def missing_pointers(path: str, cells) -> list:
    "Relative file paths the chapter's prose or code names that exist neither from the root nor beside the notebook"
    found = []
    for c in cells:
        if c["cell_type"] not in ("markdown", "code"): continue
        for m in _re_path.finditer(pointer_text(c)):
            p = m.group(1)
            if p in IGNORED_PATHS or p in found or _re_placeholder.search(p): continue
            if not any(os.path.exists(os.path.join(base, p)) for base in (ROOT, os.path.dirname(os.path.abspath(path)))):
                found.append(p)
    return found


def chapter(path: str) -> dict:
    cells = json.load(open(path, encoding="utf-8"))["cells"]
    demo = [c for c in cells if is_demonstrable(c)]
    shown = sum(bool(c.get("outputs")) for c in demo)
    last = demo[-1] if demo else None
    chapter_nb = any(c["cell_type"] == "code" and "default_exp" in directives("".join(c["source"])) for c in cells)
    return dict(notebook=os.path.relpath(path, os.path.join(ROOT, "nbs")), cells=len(demo), with_output=shown, chapter=chapter_nb,
                share=shown / len(demo) if demo else None,
                closing_asserts=bool(last) and has_assert("".join(last["source"])),
                closing_output=bool(last) and bool(last.get("outputs")),
                missing=missing_pointers(path, cells))


def notebooks(paths) -> list:
    "The notebooks named, and those under the folders named (skipping folders whose name starts with '.' or '_')"
    out = []
    for p in paths or [os.path.join(ROOT, "nbs")]:
        if not os.path.isdir(p): out.append(p); continue
        out += [f for f in glob.glob(os.path.join(p, "**", "*.ipynb"), recursive=True)
                if not any(part.startswith((".", "_")) for part in os.path.relpath(f, p).split(os.sep)[:-1])]
    return sorted(set(out), key=lambda f: os.path.relpath(f, ROOT))


def report(paths) -> dict:
    rows = [chapter(f) for f in notebooks(paths)]
    n, shown = sum(r["cells"] for r in rows), sum(r["with_output"] for r in rows)
    demos = [r for r in rows if r["cells"] and r["chapter"]]   # a chapter (it exports a module) closes on a demonstration; a page need not
    return dict(chapters=rows, cells=n, with_output=shown, share=shown / n if n else 0.0,
                closing_ok=sum(r["closing_asserts"] and r["closing_output"] for r in demos), closing_of=len(demos),
                missing=sum(len(r["missing"]) for r in rows))


def failures(r: dict, a) -> list:
    bad = []
    if r["share"] < a.min_share: bad.append(f"book-wide share {r['share']:.1%} < {a.min_share:.0%}")
    for c in r["chapters"]:
        if c["cells"] and c["share"] < a.min_chapter_share:
            bad.append(f"{c['notebook']}: share {c['share']:.0%} < {a.min_chapter_share:.0%}")
        if a.closing and c["cells"] and c["chapter"] and not (c["closing_asserts"] and c["closing_output"]):
            what = [w for w, ok in (("no assert", c["closing_asserts"]), ("no stored output", c["closing_output"])) if not ok]
            bad.append(f"{c['notebook']}: closing demonstration has {' and '.join(what)}")
        if a.paths and c["missing"]: bad.append(f"{c['notebook']}: points to missing {', '.join(c['missing'])}")
    return bad


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], epilog=__doc__.split("\n\n", 2)[2],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("paths", nargs="*", help="notebooks or folders (default: nbs/)")
    ap.add_argument("--json", action="store_true", help="print JSON")
    ap.add_argument("--check", action="store_true", help="exit 1 when a threshold fails")
    ap.add_argument("--min-share", type=float, default=0.25, help="book-wide share of cells with output (default 0.25)")
    ap.add_argument("--min-chapter-share", type=float, default=0.0, help="each chapter's share (default 0: off)")
    ap.add_argument("--closing", action="store_true", help="each closing demonstration asserts and keeps its output")
    ap.add_argument("--paths", dest="paths_check", action="store_true", help="no pointer to a missing file")
    a = ap.parse_args(argv)
    r = report(a.paths)
    bad = failures(r, argparse.Namespace(min_share=a.min_share, min_chapter_share=a.min_chapter_share,
                                         closing=a.closing, paths=a.paths_check)) if a.check else []
    if a.json: print(json.dumps(dict(r, failures=bad), indent=1))
    else:
        yes = lambda b: "yes" if b else "NO"
        print(f"{'chapter':<34} {'cells':>5} {'shown':>5} {'share':>6}  {'closing: assert':>15} {'output':>6}  missing files")
        for c in r["chapters"]:
            share = f"{c['share']:.0%}" if c["cells"] else "-"
            print(f"{c['notebook']:<34} {c['cells']:>5} {c['with_output']:>5} {share:>6}  "
                  f"{yes(c['closing_asserts']) if c['cells'] else '-':>15} {yes(c['closing_output']) if c['cells'] else '-':>6}  "
                  f"{', '.join(c['missing'])}")
        print(f"book: {len(r['chapters'])} chapters, {r['cells']} non-export code cells, {r['with_output']} with stored output "
              f"= {r['share']:.1%}; closing demonstrations that assert and keep output: {r['closing_ok']}/{r['closing_of']}; "
              f"pointers to missing files: {r['missing']}")
        for b in bad: print("FAIL:", b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
