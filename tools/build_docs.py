"""Offline build of earmem's documentation site (no quarto, no network): `python tools/build_docs.py`.

Where quarto is installed, `nbdev_docs` builds the site from the same notebooks and `_quarto.yml`. This script is
the offline equivalent that CI runs (`.ci/docs`):

1. copy `nbs/` to `_exec/run/` and execute every notebook there (those of the wing folders `nbs/core`, `nbs/ear`, ...
   too; nbdev's selection rules) with execnb, in the notebook's own folder as `nbdev_test` does, one fresh process per
   notebook (2 in parallel, forked from a server that imported torch & co once), skipping the cells `nbdev_test` skips (`tst_flags` from settings.ini, i.e.
   `#| slow`/`#| notest`, and `#| eval: false`). Skipped cells keep the outputs stored in the notebook. A failing
   cell fails the build and names the notebook, the cell and the traceback;
2. apply nbdev's own docs processors to each executed notebook (`nbdev.processors.FilterDefaults`, what
   `nbdev.serve.proc_nbs` runs: title/description frontmatter, automatic `show_doc` for exported names, removal of
   exported and `#| hide` cells, backtick links to the API);
3. render one HTML page per notebook with nbconvert into `_docs/`, at nbdev's page path (`nbs/ear/02_adapter.ipynb`
   -> `_docs/ear/adapter.html`, where the symbol links of `_modidx.py` point), in reading order (index first, then by
   numeric prefix across the wings), with a sidebar grouping the chapters under their wing, an "on this page" table
   of contents and previous/next links. Every link between pages and to `site.css`/`_math/` is relative. Code is highlighted by
   pygments, PNG figures stay embedded, equations are drawn as SVG by matplotlib's mathtext (TeX source kept as the
   image's alt text; an equation mathtext cannot parse is shown as TeX source). No file is fetched from the network.

Options: `--no-exec` renders the outputs stored in the notebooks instead of executing them (fast, for writing
prose); `--workers N`; `--keep` keeps `_exec/` for inspection. Check the result with `python tools/check_docs.py`.
Never call `nbdev_proc_nbs`/`nbdev_docs`/`nbdev_preview` without quarto: they try to install it with sudo."""
from __future__ import annotations
import argparse, ast, hashlib, html, itertools, json, multiprocessing, os, posixpath, re, shutil, sys, time, traceback, warnings
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OFFLINE_ENV = {'HF_HUB_OFFLINE': '1', 'TRANSFORMERS_OFFLINE': '1', 'HF_DATASETS_OFFLINE': '1'}
PRELOAD = ['numpy', 'torch', 'matplotlib.pyplot', 'IPython', 'execnb.shell', 'nbdev.processors', 'nbdev.showdoc',
           'fastcore.test', 'nbconvert', 'sentence_transformers', 'sklearn', 'datasets', 'safetensors', 'tqdm']
SLOW_NOTEBOOK_SECONDS = 60   # a notebook slower than this is reported: CI wants the whole build under 2 minutes


# ---------------------------------------------------------------------------------------------------- notebooks
sys.path.insert(0, str(Path(__file__).resolve().parent))
from check_docs import notebooks as notebook_order, page_name, rel_nb, wing_of, wing_title   # one definition of
# the pages, their order and their wings


# ---------------------------------------------------------------------------------------------------- lint
def docs_lint(path: Path, flags: set, name: str = '') -> tuple[list[str], list[str]]:
    """Cells nbdev's docs processors would execute although they are not exported: (errors, warnings).

    To render `show_doc`, nbdev (`exec_show_docs`, also under `nbdev_docs` with quarto) runs, in a fresh kernel,
    the exported cells and every other cell that contains an import, ignoring `#| slow`. A cell mixing imports
    with other code therefore runs at docs time without the notebook's earlier variables (it may fail), and a
    `#| slow` one runs its long computation. The first kind is a warning, the second an error."""
    from nbdev.process import NBProcessor
    from nbdev.processors import _ast_contains
    errors, warns = [], []
    nb = NBProcessor(path).nb
    known = set(dir(__import__('builtins'))) | {'get_ipython', 'display', '__file__'}   # what the docs kernel has so far
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != 'code' or not cell.source: continue
        d = cell.directives_ or {}
        trees = cell.parsed_()
        if 'nbdev_export' + '()' in cell.source or d.get('eval:', [''])[0].lower() == 'false' or not trees: continue
        if d.keys() & {'export', 'exports', 'exporti', 'exec_doc'}:
            known |= _bound_names(trees)
            continue
        if not _ast_contains(trees, (ast.Import, ast.ImportFrom)): continue
        mixed = _ast_contains(trees, (ast.Expr, ast.Assign))
        first = next((l for l in cell.source.splitlines() if l.strip()), '')
        where = f"nbs/{name or path.name} cell #{i} (0-based; {first.strip()[:60]!r})"
        flagged = sorted(flags & d.keys())
        bound = _bound_names(trees)
        missing = sorted(_loaded_names(trees) - known - bound) if mixed else []
        known |= bound
        if not mixed: continue
        if flagged: errors.append(f"{where} is `#| {' '.join(flagged)}` but imports: nbdev's docs processors would "
                                  "still run it (nbdev_docs too). Move its imports into a cell of their own.")
        elif missing: errors.append(f"{where} mixes imports with code that uses {', '.join(missing)}, defined in cells "
                                    "nbdev does not run when it renders the docs (only exported cells and cells with "
                                    "imports): it fails there. Move its imports into a cell of their own.")
        else: warns.append(f"{where} mixes imports with other code: nbdev re-runs it in a fresh kernel to render "
                           "the docs. Better: imports in a cell of their own.")
    return errors, warns

def _star_names(module: str) -> set:
    "The names `from module import *` binds (its `__all__`, else its public names); empty if it does not import"
    import importlib
    try: m = importlib.import_module(module)
    except Exception: return set()
    return set(getattr(m, '__all__', None) or [n for n in dir(m) if not n.startswith('_')])

def _bound_names(trees) -> set:
    "The module-level names a cell binds (assignments, definitions, imports; `import *` through the module itself)"
    import symtable
    top = symtable.symtable('\n'.join(ast.unparse(t) for t in trees), '<cell>', 'exec')
    out = {s.get_name() for s in top.get_symbols() if s.is_assigned() or s.is_imported() or s.is_namespace()}
    for t in trees:
        for n in ast.walk(t):
            if isinstance(n, ast.ImportFrom) and any(a.name == '*' for a in n.names): out |= _star_names(n.module or '')
    return out

def _loaded_names(trees) -> set:
    "The module-level names a cell reads, at its top level or from inside its functions and comprehensions"
    import symtable
    top = symtable.symtable('\n'.join(ast.unparse(t) for t in trees), '<cell>', 'exec')
    out, todo = set(), [top]
    while todo:
        t = todo.pop()
        todo.extend(t.get_children())
        for s in t.get_symbols():
            if not s.is_referenced(): continue
            if t is top or s.is_global(): out.add(s.get_name())
    return out


# ---------------------------------------------------------------------------------------------------- execution
def _collapse_cr(text: str) -> str:
    "Show a stream like a terminal does: of the segments a carriage return separates, keep the last (tqdm bars)"
    return '\n'.join(line.rstrip('\r').split('\r')[-1] for line in text.split('\n'))

def _process_notebook(name: str, run_dir: str, proc_dir: str, execute: bool, process: bool = True) -> dict:
    """Worker (fresh process): execute the copy `run_dir/name` of one notebook (`name` relative to `nbs/`, e.g.
    `ear/02_adapter.ipynb`) in its own folder, apply nbdev's docs processors, save it to `proc_dir/name`"""
    os.environ.update(OFFLINE_ENV)
    os.environ['IN_TEST'] = '1'                     # as nbdev_test and nbdev's docs processors do
    import copy
    from execnb.nbio import read_nb, write_nb
    from execnb.shell import CaptureShell
    from nbdev.config import get_config
    from nbdev.process import extract_directives
    from nbdev.processors import FilterDefaults
    run_dir = Path(run_dir)
    res = dict(name=name, ok=True, exec_s=0.0, proc_s=0.0, skipped=0, error='')
    path = run_dir/name
    os.chdir(path.parent)      # relative paths (`data/...`) are relative to the notebook's folder, as in nbdev_test
    nb = read_nb(path)
    if execute:
        flags = set(get_config().tst_flags.split())
        state = dict(idx=None, src='')
        def _skip(cell):
            if cell.cell_type != 'code': return True
            d = extract_directives(copy.deepcopy(cell), remove=False)
            if 'nbdev_export' + '(' in cell.source or flags & d.keys() or d.get('eval:', [''])[0].lower() == 'false':
                res['skipped'] += 1
                return True                           # skipped cells keep their stored outputs
            cell.outputs, cell.execution_count = [], None
            state.update(idx=cell.idx_, src=cell.source)
            return False
        sys.path.insert(0, str(ROOT))
        shell = CaptureShell(path)
        t0 = time.time()
        try: shell.run_all(nb, exc_stop=True, preproc=_skip)
        except BaseException as e:
            res.update(ok=False, exec_s=time.time()-t0, error=(
                f"cell #{state['idx']} (0-based) raised {type(e).__name__}: {e}\n--- cell source ---\n{state['src']}\n"
                f"--- traceback ---\n{''.join(traceback.format_exception(e))}"))
            return res
        res['exec_s'] = time.time() - t0
        for cell in nb.cells:
            for o in cell.get('outputs', []):
                if o.get('output_type') == 'stream': o['text'] = _collapse_cr(''.join(o['text'])).splitlines(True)
        write_nb(nb, path)
        nb = read_nb(path)
    if not process: return res
    t0 = time.time()
    try:
        with warnings.catch_warnings():        # nbdev's "imports and other code" warning: `docs_lint` reports it
            warnings.simplefilter('ignore', UserWarning)
            FilterDefaults()(nb)
    except BaseException as e:
        cause = e.__cause__ or e
        res.update(ok=False, proc_s=time.time()-t0, error=(
            f"nbdev's docs processors failed (nbdev_docs fails the same way): {e}\n--- cause ---\n"
            f"{''.join(traceback.format_exception(cause)[-3:])}\nHint: to render show_doc, nbdev re-runs the exported "
            "cells and every cell that contains an import in a fresh kernel; a cell that mixes imports with code "
            "using earlier variables fails there. Move the imports into a cell of their own."))
        return res
    (Path(proc_dir)/name).parent.mkdir(parents=True, exist_ok=True)
    write_nb(nb, Path(proc_dir)/name)
    exporter = _exporter(MathRenderer(Path(proc_dir)/'_math'))   # draw the equations here, in parallel
    for cell in nb.cells:
        if cell.cell_type == 'markdown' and '$' in cell.source: exporter.markdown2html({}, cell.source)
    res['proc_s'] = time.time() - t0
    return res

def run_notebooks(order: list[Path], nbs: Path, run_dir: Path, proc_dir: Path, execute=True, workers=2,
                  lint=None) -> list[dict]:
    """Execute and process `order` (notebooks of `nbs`) in `workers` processes (one fresh process per notebook);
    returns the results, named by the notebooks' paths relative to `nbs`. A notebook with errors in `lint`
    ({name: [error]}) is only executed (to report its other errors too): failed."""
    lint = lint or {}
    if not order: return []
    workers = max(1, min(workers, len(order)))
    # A fresh process per notebook (no state leaks between notebooks), forked from a server that has imported the
    # heavy libraries once: starting a worker costs milliseconds instead of ~10 s of imports.
    ctx = multiprocessing.get_context('forkserver')
    ctx.set_forkserver_preload(PRELOAD)
    jobs = sorted(order, key=lambda p: -p.stat().st_size)   # big notebooks first: better packing on 2 workers
    results = []
    fresh = {'max_tasks_per_child': 1} if sys.version_info >= (3, 11) else {}   # 3.10: workers are reused
    with ProcessPoolExecutor(workers, mp_context=ctx, **fresh) as ex:
        futs = {ex.submit(_process_notebook, rel_nb(p, nbs), str(run_dir), str(proc_dir), execute,
                          rel_nb(p, nbs) not in lint): p for p in jobs}
        for f in as_completed(futs):
            try: r = f.result()
            except BaseException as e:     # the worker process itself died
                r = dict(name=rel_nb(futs[f], nbs), ok=False, exec_s=0.0, proc_s=0.0, skipped=0,
                         error=f'worker crashed: {type(e).__name__}: {e}')
            if r['name'] in lint:
                r['error'] = '\n'.join(lint[r['name']] + ([r['error']] if r['error'] else []))
                r['ok'] = False
            status = 'ok  ' if r['ok'] else 'FAIL'
            print(f"  {status} {r['name']:<34} executed in {r['exec_s']:5.1f}s ({r['skipped']} cells skipped), "
                  f"processed in {r['proc_s']:4.1f}s", flush=True)
            results.append(r)
    return results


# ---------------------------------------------------------------------------------------------------- equations
_CW = r'(?![a-zA-Z])'   # end of a TeX control word
_TEX_FIXES = [   # TeX that matplotlib's mathtext lacks, rewritten to what it has
    (r'\\[lr]Vert' + _CW, r'\\Vert '), (r'\\[lr]vert' + _CW, '|'), (r'\\(?:big|Big|bigg|Bigg)[lr]?' + _CW + r'\s*', ''),
    (r'\\le' + _CW, r'\\leq '), (r'\\ge' + _CW, r'\\geq '), (r'\\[td]frac' + _CW, r'\\frac'),
    (r'\\boldsymbol' + _CW, r'\\mathbf'), (r'\\(?:displaystyle|textstyle|limits|nolimits)' + _CW, ''),
    (r'\\(mathbf|mathcal|mathrm|mathbb|mathit|hat|tilde|bar|vec)\s+(\\[a-zA-Z]+|\w)', r'\\\1{\2}'),
    (r'\\operatorname\*', r'\\operatorname'),
]

class MathRenderer:
    """Draw TeX as SVG paths with matplotlib's mathtext (no fonts or scripts needed by the browser).

    Drawings are cached in `cache` by content (the notebook workers fill it in parallel) and copied to
    `out/_math/` when a page uses them; a formula mathtext cannot parse is recorded in `failed` (shown as TeX)."""
    def __init__(self, cache: Path, out: Path | None = None, size=12.0, color='#212529'):
        self.cache, self.out, self.size, self.color = Path(cache), out and Path(out)/'_math', size, color
        self.memo, self.failed, self.prefix = {}, [], ''   # prefix: from the page being rendered to the site root
    def _draw(self, s: str):
        "SVG text and (width, height, depth) in pt of the formula `s` (without dollars)"
        import matplotlib
        from matplotlib.font_manager import FontProperties
        from matplotlib.path import Path as MPath
        from matplotlib.textpath import TextPath
        with matplotlib.rc_context({'mathtext.fontset': 'cm'}):
            tp = TextPath((0, 0), f'${s}$', size=self.size, prop=FontProperties(size=self.size))
        if not len(tp.vertices): raise ValueError('empty formula')
        bb, pad = tp.get_extents(), 0.08*self.size
        x0, top, bottom = min(bb.x0, 0.0) - pad, max(bb.y1, 0.72*self.size) + pad, max(-bb.y0, 0.22*self.size) + pad
        w, h = bb.x1 + pad - x0, top + bottom
        cmd, d = {MPath.MOVETO: 'M', MPath.LINETO: 'L', MPath.CURVE3: 'Q', MPath.CURVE4: 'C'}, []
        for verts, code in tp.iter_segments(simplify=False, curves=True):
            if code == MPath.CLOSEPOLY: d.append('Z'); continue
            xy = verts.reshape(-1, 2)
            d.append(cmd[code] + ' '.join(f'{x - x0:.2f} {top - y:.2f}' for x, y in xy))
        svg = (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w:.2f} {h:.2f}" width="{w:.2f}pt" '
               f'height="{h:.2f}pt"><path fill="{self.color}" d="{"".join(d)}"/></svg>')
        return svg, (w, h, bottom)
    def __call__(self, tex: str):
        "(src, width, height, depth) in em of the drawing of `tex`, or None when mathtext cannot draw it"
        if tex in self.memo: return self.memo[tex]
        s = ' '.join(tex.split())
        for a, b in _TEX_FIXES: s = re.sub(a, b, s)
        key = hashlib.sha1(f'{s}|{self.size}|{self.color}'.encode()).hexdigest()[:16]
        meta, svg = self.cache/f'{key}.json', self.cache/f'{key}.svg'
        if meta.exists(): info = json.loads(meta.read_text())
        else:
            try:
                text, (w, h, d) = self._draw(s)
                info = dict(ok=True, w=w, h=h, d=d)
                self.cache.mkdir(parents=True, exist_ok=True)
                tmp = svg.with_suffix(f'.{os.getpid()}.tmp'); tmp.write_text(text); os.replace(tmp, svg)
            except Exception as e: info = dict(ok=False, error=f'{type(e).__name__}: {str(e)[:200]}')
            self.cache.mkdir(parents=True, exist_ok=True)
            tmp = meta.with_suffix(f'.{os.getpid()}.tmp'); tmp.write_text(json.dumps(info)); os.replace(tmp, meta)
        res = None
        if info['ok']:
            res = (f'_math/{key}.svg', info['w']/self.size, info['h']/self.size, info['d']/self.size)
            if self.out and not (self.out/f'{key}.svg').exists():
                self.out.mkdir(parents=True, exist_ok=True); shutil.copy2(svg, self.out/f'{key}.svg')
        else: self.failed.append(tex)
        self.memo[tex] = res
        return res
    def html(self, tex: str, display: bool) -> str:
        "An <img> of the drawing (its src relative to the page: `prefix`), or the TeX source when mathtext fails"
        r, alt = self(tex), html.escape(tex.strip(), quote=True)
        if r is None:
            src = html.escape(tex.strip())
            return (f'<div class="math display tex"><code>$${src}$$</code></div>' if display
                    else f'<code class="math tex">${src}$</code>')
        src, w, h, d = r
        if display: w, h, d = (1.25*x for x in (w, h, d))   # display equations a little larger, as in TeX
        img = (f'<img class="math" src="{self.prefix}{src}" alt="{alt}" title="{alt}" '
               f'style="width:{w:.3f}em;height:{h:.3f}em;vertical-align:{-d:.3f}em">')
        return f'<div class="math display">{img}</div>' if display else img


# ---------------------------------------------------------------------------------------------------- html
def slugify(text: str) -> str:
    "Pandoc's (hence quarto's) heading identifier: lower case, keep alphanumerics `_-.`, spaces to `-`, start at a letter"
    s = ''.join(c for c in text.lower() if c.isalnum() or c in '_-. \n\t')
    s = '-'.join(s.split())
    s = re.sub(r'^[^a-z]+', '', s) if not s[:1].isalpha() else s
    return s or 'section'

_TEMPLATE = r"""{%- extends 'basic/index.html.j2' -%}
{% block input %}
<div class="inner_cell"><div class="input_area">
{{ cell.source | highlight_code(metadata=cell.metadata) }}
</div></div>
{%- endblock input %}
{% block input_group -%}
{%- if 'fold' in cell.metadata.get('tags', []) -%}
<details class="code-fold"><summary>{{ cell.metadata.get('code_summary', 'Code') }}</summary>{{ super() }}</details>
{%- else -%}{{ super() }}{%- endif -%}
{%- endblock input_group %}
"""

def _exporter(math: MathRenderer):
    import jinja2
    from nbconvert import HTMLExporter
    from nbconvert.filters.markdown_mistune import IPythonRenderer, MarkdownWithMath
    from traitlets.config import Config

    class Renderer(IPythonRenderer):
        "nbconvert's markdown renderer with pandoc-style heading ids and equations drawn by `math`"
        def __init__(self, ids, **kw): super().__init__(**kw); self.ids = ids
        def heading(self, text, level, **attrs):
            plain = re.sub(r'<img [^>]*alt="([^"]*)"[^>]*>', r'\1', text)
            base = slugify(html.unescape(re.sub(r'<[^>]+>', '', plain)))
            slug, n = base, 0
            while slug in self.ids: n += 1; slug = f'{base}-{n}'
            self.ids.add(slug)
            return f'<h{level} id="{slug}">{text}<a class="anchor-link" href="#{slug}">¶</a></h{level}>\n'
        def block_math(self, body): return math.html(body, True)
        def inline_math(self, body): return math.html(body, False)
        def latex_environment(self, name, body): return math.html(f'\\begin{{{name}}}{body}\\end{{{name}}}', True)

    class Exporter(HTMLExporter):
        ids: set = set()
        nb_dir: Path = ROOT/'nbs'      # the folder of the notebook being rendered (relative image paths)
        def markdown2html(self, context, source):
            cell = context.get('cell', {})
            r = Renderer(self.ids, escape=False, attachments=cell.get('attachments', {}), embed_images=True,
                         path=str(self.nb_dir))
            return MarkdownWithMath(renderer=r).render(source)
        def from_notebook_node(self, nb, resources=None, **kw):
            self.ids = set()
            return super().from_notebook_node(nb, resources, **kw)
    Exporter.markdown2html.__dict__.update(HTMLExporter.markdown2html.__dict__)   # keep the jinja context flag

    c = Config()
    c.TagRemovePreprocessor.enabled = True
    c.TagRemovePreprocessor.remove_input_tags = {'remove_input'}
    c.TagRemovePreprocessor.remove_cell_tags = {'remove_cell'}
    ex = Exporter(config=c, template_name='basic', exclude_input_prompt=True, exclude_output_prompt=True)
    ex.extra_loaders = [jinja2.DictLoader({'earmem_page.html.j2': _TEMPLATE})]
    ex.template_file = 'earmem_page.html.j2'
    return ex

def _directives(cell):
    """The leading `#|` directives of a cell as {key: value} and its source without them, both as nbdev reads them
    (`nbdev.process.extract_directives`; quarto's `key: value` form and nbdev's `key value` alike)"""
    from nbdev.process import _partition_cell, extract_directives
    d = {k.rstrip(':'): ' '.join(v).strip('"\'') for k, v in extract_directives(cell, remove=False).items()}
    return d, ''.join(_partition_cell(cell, 'python')[1])

_re_bar = re.compile(r'^.*\d+%\|.*\|\s*[\d.]+[kMG]?/[\d.?]+[kMG]?\s*\[.*\]\s*$')

def _progress_only(o) -> bool:
    "Drop the lines of finished progress bars (tqdm, huggingface) from stderr; True when nothing else remains"
    if o.get('output_type') != 'stream' or o.get('name') != 'stderr': return False
    lines = [l for l in ''.join(o.get('text', '')).splitlines(True) if not _re_bar.match(l.rstrip('\n'))]
    o['text'] = ''.join(lines)
    return not ''.join(lines).strip()

def prepare(nb):
    "Turn the quarto-isms of an nbdev-processed notebook into plain nbconvert cells; return (notebook, frontmatter)"
    from nbdev.frontmatter import _fm2dict
    fm, cells = {}, []
    for c in nb.cells:
        if c.cell_type == 'raw' and c.source.lstrip().startswith('---'):
            fm = _fm2dict(c.source)
            continue
        if c.cell_type == 'markdown' and 'AUTOGENERATED! DO NOT EDIT' in c.source: continue
        if c.cell_type == 'code':
            d, c.source = _directives(c)
            tags = c.metadata.setdefault('tags', [])
            if d.get('include', '').lower() == 'false': continue
            if d.get('echo', '').lower() == 'false' or not c.source.strip(): tags.append('remove_input')
            if d.get('output', '').lower() == 'false': c.outputs = []
            if 'code-fold' in d: tags.append('fold'); c.metadata['code_summary'] = d.get('code-summary', 'Code')
            if re.match(r'\s*show_doc\(', c.source): tags.append('showdoc')
            if not c.source.strip() and not c.get('outputs'): continue
            c.outputs = [o for o in c.get('outputs', []) if not _progress_only(o)]
            for o in c.get('outputs', []):   # pandoc link attributes `[source](url){target="_blank"}` are not markdown
                md = o.get('data', {}).get('text/markdown')
                if md: o['data']['text/markdown'] = re.sub(r'\]\(([^)\s]+?)(?:#LNone)?\)\{[^}]*\}', r'](\1)', ''.join(md))
        cells.append(c)
    nb.cells = cells
    nb.metadata['language_info'] = {'name': 'python'}
    return nb, fm

CSS = """
:root{--fg:#212529;--muted:#6c757d;--line:#dee2e6;--accent:#2780e3;--code:#f6f8fa;--side:#f8f9fa}
*{box-sizing:border-box}
body{margin:0;font-family:system-ui,-apple-system,'Segoe UI',Roboto,'Helvetica Neue',Arial,sans-serif;color:var(--fg);
 line-height:1.6;font-size:16px;background:#fff}
a{color:var(--accent);text-decoration:none} a:hover{text-decoration:underline}
header.top{position:fixed;top:0;left:0;right:0;height:52px;background:var(--accent);color:#fff;display:flex;
 align-items:center;padding:0 1.25rem;z-index:2}
header.top a.brand{color:#fff;font-weight:700;font-size:1.25rem;margin-right:1rem}
header.top span{opacity:.85;font-size:.9rem;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
nav.sidebar{position:fixed;top:52px;left:0;bottom:0;width:210px;padding:1rem .75rem 1rem 1.25rem;background:var(--side);
 border-right:1px solid var(--line);overflow-y:auto}
nav.sidebar ol{list-style:none;margin:0;padding:0}
nav.sidebar a{display:block;padding:.3rem .6rem;border-radius:4px;color:#343a40}
nav.sidebar a:hover{background:#e9ecef;text-decoration:none}
nav.sidebar a.active{background:#e7f1fc;color:var(--accent);font-weight:600}
nav.sidebar .num{display:inline-block;min-width:1.8em;color:var(--muted);font-variant-numeric:tabular-nums}
nav.sidebar .wing{display:block;margin:1rem 0 .2rem;padding:.1rem .6rem;font-size:.78rem;font-weight:700;
 letter-spacing:.04em;color:var(--muted);border-bottom:1px solid var(--line)}
nav.sidebar li.wing-group:first-child .wing{margin-top:.2rem}
aside.toc{position:fixed;top:52px;right:0;width:215px;bottom:0;padding:1.5rem 1rem;overflow-y:auto;font-size:.85rem}
aside.toc h2{font-size:.8rem;text-transform:uppercase;letter-spacing:.05em;color:var(--muted);margin:0 0 .5rem}
aside.toc ul{list-style:none;margin:0;padding:0;border-left:1px solid var(--line)}
aside.toc li a{display:block;padding:.15rem .7rem;color:#495057;overflow-wrap:anywhere} aside.toc li.l3 a{padding-left:1.5rem;font-size:.8rem}
main{margin:52px 215px 0 210px;padding:1.5rem 2rem 3rem;max-width:1040px}
h1.title{font-size:2.2rem;margin:.2rem 0 .3rem} p.description{color:var(--muted);font-size:1.15rem;margin:0 0 1.5rem}
h2{margin-top:2.2rem;padding-bottom:.25rem;border-bottom:1px solid var(--line)} h3{margin-top:1.6rem}
a.anchor-link{visibility:hidden;margin-left:.35rem;font-size:.8em;color:var(--muted)}
h1:hover a.anchor-link,h2:hover a.anchor-link,h3:hover a.anchor-link,h4:hover a.anchor-link{visibility:visible}
.cell{margin:.9rem 0}
pre{margin:0;padding:.65rem .85rem;background:var(--code);border-radius:5px;overflow-x:auto;font-size:.8rem;line-height:1.45}
code{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,'Liberation Mono',monospace;font-size:.875em}
p code,li code,td code{background:var(--code);padding:.08em .3em;border-radius:3px}
a code{color:var(--accent)}
.input_area pre{border-left:3px solid var(--accent)}
.output_wrapper{margin-top:.35rem}
.output_text pre,.output_stream pre{background:none;border-left:2px solid #f4a582;border-radius:0;padding:.25rem .9rem;
 white-space:pre-wrap;overflow-wrap:anywhere}
.output_stderr pre{background:#fff5f5}
.output_png img,.output_jpeg img{max-width:100%;height:auto}
.rendered_html table,table{border-collapse:collapse;margin:.6rem 0;font-size:.92rem}
table{border:0} th,td{border:0;border-bottom:1px solid var(--line);padding:.35rem .75rem;text-align:left;vertical-align:top}
table.dataframe td,table.dataframe th{text-align:right;font-variant-numeric:tabular-nums}
thead th{border-bottom:2px solid #adb5bd}
blockquote{margin:.6rem 0;padding:.1rem 1rem;border-left:4px solid var(--line);color:#495057}
hr{border:0;border-top:1px solid var(--line);margin:1.5rem 0}
.celltag_showdoc{margin:1.6rem 0}
.celltag_showdoc .output_markdown{border:1px solid var(--line);border-radius:6px;padding:.1rem 1.1rem .6rem;
 box-shadow:0 1px 2px rgba(0,0,0,.05)}
.celltag_showdoc hr{display:none}
.celltag_showdoc .output_markdown > p:first-of-type > a[href]:only-child{float:right;font-size:.8rem;margin-top:.9rem}
.celltag_showdoc h3,.celltag_showdoc h4{margin:.8rem 0 .5rem;font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
.celltag_showdoc pre{background:#f1f5fb}
details.code-fold summary{cursor:pointer;color:var(--muted);font-size:.9rem}
img.math{display:inline-block}
div.math.display{text-align:center;margin:1rem 0;overflow-x:auto}
div.math.display img.math{vertical-align:middle !important}
.math.tex,div.math.tex code{color:#6f42c1}
nav.pager{display:flex;justify-content:space-between;gap:1rem;margin-top:3rem;padding-top:1rem;border-top:1px solid var(--line)}
nav.pager a{display:block;padding:.5rem .9rem;border:1px solid var(--line);border-radius:6px;max-width:48%}
nav.pager a small{display:block;color:var(--muted);font-size:.75rem} nav.pager a.next{margin-left:auto;text-align:right}
footer{margin-top:2rem;color:var(--muted);font-size:.8rem}
@media (max-width:1100px){aside.toc{display:none} main{margin-right:0}}
@media (max-width:700px){nav.sidebar{position:static;width:auto;margin-top:52px} main{margin:0}}
"""

def _rel(page: str, target: str) -> str:
    "The link from the page `page` to the site file `target` (both relative to the site root): `../site.css`"
    return posixpath.relpath(target, posixpath.dirname(page) or '.')

def _sidebar(page, pages) -> str:
    """The chapters in reading order, those of a wing folder under the wing's heading (`nbs/ear/` -> EAR), with
    their numbers; links relative to `page`"""
    e = html.escape
    def item(p):
        return (f'<li><a href="{_rel(page["file"], p["file"])}"{" class=active" if p is page else ""} '
                f'title="{e(p["description"], quote=True)}"><span class="num">{e(p["num"])}</span>{e(p["title"])}</a></li>')
    out = []
    for wing, group in itertools.groupby(pages, key=lambda p: p['wing']):
        items = '\n'.join(map(item, group))
        out.append(f'<li class="wing-group"><span class="wing">{e(wing_title(wing))}</span><ol>\n{items}\n</ol></li>'
                   if wing else items)
    return '\n'.join(out)

def _page_html(cfg, page, pages, body, toc) -> str:
    e = html.escape
    i = pages.index(page)
    up = lambda f: _rel(page['file'], f)
    side = _sidebar(page, pages)
    toc_html = ''.join(f'<li class="l{lvl}"><a href="#{a}">{t}</a></li>' for lvl, a, t in toc)
    toc_html = f'<aside class="toc"><h2>On this page</h2><ul>{toc_html}</ul></aside>' if toc else ''
    prev = pages[i-1] if i > 0 else None
    nxt = pages[i+1] if i+1 < len(pages) else None
    pager = '<nav class="pager">' + (
        f'<a class="prev" href="{up(prev["file"])}"><small>← Previous</small>{e(prev["title"])}</a>' if prev else '') + (
        f'<a class="next" href="{up(nxt["file"])}"><small>Next →</small>{e(nxt["title"])}</a>' if nxt else '') + '</nav>'
    desc = f'<p class="description">{page["description_html"]}</p>' if page['description'] else ''
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{e(page['title'])} – {e(cfg.title)}</title>
<meta name="description" content="{e(page['description'], quote=True)}">
<link rel="stylesheet" href="{up('site.css')}"></head>
<body>
<header class="top"><a class="brand" href="{up('index.html')}">{e(cfg.title)}</a><span>{e(cfg.description)}</span></header>
<nav class="sidebar" aria-label="chapters"><ol>
{side}
</ol></nav>
{toc_html}
<main id="content">
<h1 class="title">{e(page['title'])}</h1>
{desc}
{body}
{pager}
<footer>Built offline from <code>nbs/{e(page['nb'])}</code> by <code>tools/build_docs.py</code>.</footer>
</main>
</body></html>
"""

def _fix_links(body: str, site: str, nb_pages: dict, ids: dict, repairs: list, page: str) -> str:
    """Make the site's absolute doc links relative to `page` (a page path like `ear/adapter.html`), point links to
    notebooks (relative to the page's notebook, as an author writes them) at their pages, and re-point nbdev's
    backtick links whose anchor no page defines (a method without its own `show_doc`) to the nearest anchor."""
    here = posixpath.dirname(page)
    def fix(m):
        url = m.group(1)
        auto = bool(site) and url.startswith(site)   # written by nbdev's `add_links`, not by an author
        if auto: url = url[len(site):] or 'index.html'
        path, sep, frag = url.partition('#')
        if re.match(r'^[a-z][a-z0-9+.-]*:|^/', path, re.I) or not path: return f'href="{url}"'
        target = path if auto else posixpath.normpath(posixpath.join(here, path))   # relative to the site root
        if target in nb_pages: target = nb_pages[target]
        elif not auto: return f'href="{url}"'      # an author's relative link to a page or file: kept as written
        path = target
        if auto and frag and path in ids and frag not in ids[path]:
            ends = [i for i in ids[path] if i.endswith('.' + frag)]
            new = frag.rsplit('.', 1)[0] if '.' in frag and frag.rsplit('.', 1)[0] in ids[path] else (
                  ends[0] if len(ends) == 1 else '')
            repairs.append(f'{page}: {path}#{frag} -> {path}{"#" + new if new else ""}')
            frag, sep = new, '#' if new else ''
        return f'href="{_rel(page, path)}{sep}{frag}"'
    return re.sub(r'href="([^"]*)"', fix, body)

def _copy_local_assets(body: str, nb_dir: Path, page_dir: Path):
    """Copy files a notebook's markdown refers to by a path relative to the notebook (`![](figs/x.png)`) to the same
    place relative to its page"""
    for url in re.findall(r'(?:src|href)="([^"#?]+)', body):
        if re.match(r'^[a-z][a-z0-9+.-]*:|^/|^//', url, re.I) or url.endswith('.html'): continue
        src, dst = nb_dir/url, page_dir/url
        if src.is_file() and not dst.exists():
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)

def render(cfg, order: list[Path], proc_dir: Path, out: Path) -> list[dict]:
    "Render the processed notebooks to `out`: one page per notebook, shared `site.css`"
    import nbformat
    from pygments.formatters import HtmlFormatter
    math = MathRenderer(proc_dir/'_math', out)
    exporter = _exporter(math)
    pages = []
    for src in order:
        rel = rel_nb(src, cfg.nbs_path)
        nb, fm = prepare(nbformat.read(proc_dir/rel, as_version=4))
        m = re.match(r'^(\d+)[a-zA-Z0-9]*_', src.name)
        file = posixpath.join(posixpath.dirname(rel), fm['output-file']) if fm.get('output-file') else page_name(rel)
        pages.append(dict(nb=rel, file=file, notebook=nb, wing=wing_of(src, cfg.nbs_path), nb_dir=src.parent,
                          title=str(fm.get('title', src.stem)), description=str(fm.get('description', '')),
                          num=m.group(1) if m else ''))
    nb_pages = {p['nb']: p['file'] for p in pages}
    site = f"{cfg.doc_host}{cfg.doc_baseurl.rstrip('/')}/"
    for p in pages:
        math.prefix = _rel(p['file'], '.') + '/' if '/' in p['file'] else ''   # `../` from a page in a wing
        exporter.nb_dir = p['nb_dir']
        p['body'] = exporter.from_notebook_node(p['notebook'])[0]
        p['description_html'] = re.sub(r'^\s*<p>|</p>\s*$', '', exporter.markdown2html({}, p['description']))
    ids = {p['file']: set(re.findall(r'\sid="([^"]+)"', p['body'])) for p in pages}
    repairs = []
    for p in pages:
        body = _fix_links(p['body'], site, nb_pages, ids, repairs, p['file'])
        p['description_html'] = _fix_links(p['description_html'], site, nb_pages, ids, repairs, p['file'])
        toc = [(int(lvl), a, re.sub(r'<a class="anchor-link".*?</a>|<(?!img)[^>]+>', '', t))
               for lvl, a, t in re.findall(r'<h([23]) id="([^"]+)">(.*?)</h\1>', body, flags=re.S)]
        _copy_local_assets(body, p['nb_dir'], (out/p['file']).parent)
        (out/p['file']).parent.mkdir(parents=True, exist_ok=True)
        (out/p['file']).write_text(_page_html(cfg, p, pages, body, toc), encoding='utf-8')
    if repairs:
        repairs = sorted(set(repairs))
        print(f'  {len(repairs)} backtick link(s) named a symbol without its own show_doc section; re-pointed '
              '(document the symbol with show_doc, or drop the backticks):', flush=True)
        for r in repairs[:40]: print(f'    {r}')
    (out/'site.css').write_text(CSS + HtmlFormatter(style='default').get_style_defs('.highlight') + '\n')
    (out/'.nojekyll').write_text('')
    if math.failed:
        print(f'  {len(math.failed)} equation(s) shown as TeX source (mathtext cannot draw them):', flush=True)
        for t in math.failed[:10]: print('    $' + ' '.join(t.split())[:100] + '$')
    return pages


# ---------------------------------------------------------------------------------------------------- main
def build(execute=True, workers=2, keep=False) -> int:
    from nbdev.config import get_config
    from nbdev.doclinks import _build_modidx
    os.environ.update(OFFLINE_ENV)
    t0 = time.time()
    cfg = get_config(path=ROOT)
    root, nbs, out = cfg.config_path, cfg.nbs_path, cfg.config_path/cfg.doc_path.name
    order = notebook_order(nbs)
    if not order: print(f'FAIL: no notebooks in {nbs}'); return 1
    print(f"{'Executing and processing' if execute else 'Processing (no execution)'} {len(order)} notebooks "
          f"with {workers} workers: {', '.join(rel_nb(p, nbs) for p in order)}", flush=True)
    _build_modidx()                                   # the symbol index behind `backtick` links (as nbdev_docs does)
    work = root/'_exec'
    run_dir, proc_dir = work/'run', work/'proc'
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(nbs, run_dir, ignore=shutil.ignore_patterns('.ipynb_checkpoints', '_quarto.yml'))
    proc_dir.mkdir(parents=True)
    flags, linted = set(cfg.tst_flags.split()), {}
    for nb in order:
        errs, warns = docs_lint(nb, flags, rel_nb(nb, nbs))
        for w in warns: print(f'  WARNING: {w}')
        if errs: linted[rel_nb(nb, nbs)] = errs
    results = run_notebooks(order, nbs, run_dir, proc_dir, execute=execute, workers=workers, lint=linted)
    failed = [r for r in results if not r['ok']]
    if failed:
        shutil.rmtree(out, ignore_errors=True)
        for r in failed: print(f"\n{'='*100}\nFAIL nbs/{r['name']}: {r['error']}", file=sys.stderr)
        if not keep: shutil.rmtree(work, ignore_errors=True)
        print(f"\nFAIL: the docs build stopped: {len(failed)} notebook(s) failed: "
              f"{', '.join(r['name'] for r in failed)} (see above). Nothing was written to {out.name}/ "
              "(`--keep` keeps the executed notebooks in _exec/run/ for inspection).", file=sys.stderr)
        return 1
    slow = [r for r in results if r['exec_s'] > SLOW_NOTEBOOK_SECONDS]
    for r in slow: print(f"  WARNING: nbs/{r['name']} took {r['exec_s']:.0f}s to execute (> {SLOW_NOTEBOOK_SECONDS}s): "
                         "mark its long cells `#| slow`")
    t1 = time.time()
    print(f'  notebooks done in {t1-t0:.0f}s; rendering', flush=True)
    shutil.rmtree(out, ignore_errors=True); out.mkdir()
    pages = render(cfg, order, proc_dir, out)
    print(f'  rendered in {time.time()-t1:.0f}s', flush=True)
    if not keep: shutil.rmtree(work, ignore_errors=True)
    print(f'Wrote {len(pages)} pages to {out.relative_to(root)}/ in {time.time()-t0:.0f}s: '
          + ', '.join(p['file'] for p in pages))
    return 0

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--no-exec', action='store_true', help='render stored outputs instead of executing the notebooks')
    ap.add_argument('--workers', type=int, default=int(os.environ.get('DOCS_WORKERS', min(2, os.cpu_count() or 1))),
                    help='notebooks executed in parallel (default: 2 or $DOCS_WORKERS)')
    ap.add_argument('--keep', action='store_true', help='keep the executed and processed notebooks in _exec/')
    a = ap.parse_args(argv)
    return build(execute=not a.no_exec, workers=a.workers, keep=a.keep)

if __name__ == '__main__': sys.exit(main())
