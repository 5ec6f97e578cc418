"""Check the documentation site `tools/build_docs.py` wrote: `python tools/check_docs.py`.

Static checks (any folder, no browser; `check_site` is what tests/test_docs_check.py exercises):
- every notebook of `nbs/` and its wing folders has its page (nbdev's name: `core/00_core.ipynb` -> `core/core.html`);
- no internal link is broken: every relative `href`/`src` names an existing file and every `#anchor` an existing
  `id` in the target page; no page loads anything from the network (scripts, styles, images, fonts: no CDN);
- the index page has its title and a sidebar linking every page, under a heading per wing (the notebooks' folder);
  every API notebook (one with `#| default_exp`) has its page show `show_doc` signatures.
Browser checks (headless Chromium, pages served by a local http.server on 127.0.0.1): the rendered DOM (`--dump-dom`)
of the index and of the first API page holds the expected content, and `--screenshot` writes
`_docs/_screenshots/<wing>/<page>.png` (1280x1600) for every page (`--shots index` for the index and first API page only).
Exits 1 with one line per problem."""
from __future__ import annotations
import argparse, functools, http.server, itertools, os, posixpath, re, shutil, subprocess, sys, tempfile, threading, time
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit
from execnb.nbio import read_nb
from fastcore.xtras import globtastic
from nbdev.doclinks import _nbpath2html
from nbdev.process import extract_directives

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM_FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
                  '--disable-component-update', '--no-first-run', '--disable-sync', '--hide-scrollbars']
SHOTS = '_screenshots'
_RESOURCE = {('img', 'src'), ('script', 'src'), ('iframe', 'src'), ('source', 'src'), ('video', 'src'),
             ('audio', 'src'), ('embed', 'src'), ('object', 'data'), ('link', 'href'), ('input', 'src')}


# ------------------------------------------------------------------------------------------------ parsing
class Page(HTMLParser):
    "The ids, links and a few landmarks of one HTML page"
    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.ids, self.links, self.classes, self.title_h1, self.sidebar, self.wings = set(), [], [], None, [], []
        self._stack, self._in_h1, self._in_side, self._in_wing = [], False, 0, None
        self.feed(text)
    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        for k in ('id', 'name') if tag == 'a' else ('id',):
            if a.get(k): self.ids.add(a[k])
        cls = (a.get('class') or '').split()
        self.classes += cls
        line = self.getpos()[0]
        for attr in ('href', 'src', 'data'):
            if a.get(attr) is None: continue
            resource = (tag, attr) in _RESOURCE and not (tag == 'link' and 'stylesheet' not in (a.get('rel') or '')
                                                         and 'icon' not in (a.get('rel') or ''))
            self.links.append((tag, attr, a[attr], line, resource))
        if tag == 'h1' and 'title' in cls: self._in_h1, self.title_h1 = True, ''
        if tag == 'nav' and 'sidebar' in cls: self._in_side = 1
        elif self._in_side and tag == 'nav': self._in_side += 1
        if self._in_side and tag == 'a' and a.get('href'): self.sidebar.append(a['href'])
        if self._in_side and 'wing' in cls: self._in_wing = tag; self.wings.append('')   # a wing's heading
    def handle_endtag(self, tag):
        if tag == 'h1': self._in_h1 = False
        if tag == self._in_wing: self._in_wing = None
        if tag == 'nav' and self._in_side: self._in_side -= 1
    def handle_data(self, data):
        if self._in_h1: self.title_h1 += data
        if self._in_wing: self.wings[-1] = (self.wings[-1] + data).strip()

@functools.lru_cache(maxsize=None)
def _parse(path: Path) -> Page: return Page(path.read_text(encoding='utf-8', errors='replace'))


# ------------------------------------------------------------------------------------------------ static checks
def page_name(nb: str | Path) -> str:
    """nbdev's page of a notebook, given by its path relative to `nbs/` (`nbdev.doclinks._nbpath2html`, the page
    `_modidx.py` links to): `00_core.ipynb` -> `core.html`, `ear/02_adapter.ipynb` -> `ear/adapter.html`"""
    return _nbpath2html(Path(nb)).as_posix()

WING_TITLES = {'ear': 'EAR', 'earm': 'EARM', 'cli': 'CLI'}   # acronyms; any other folder is capitalised

def wing_title(folder: str) -> str:
    "The sidebar heading of a wing folder: `ear` -> `EAR`, `experiments` -> `Experiments`"
    return WING_TITLES.get(folder, folder.replace('_', ' ').capitalize())

def _reading_key(rel: Path):
    """index first, then the other unnumbered pages at the top (the guide, the results), then by numeric prefix
    across the folders (`10a_x` after `10_y`), then by name"""
    m = re.match(r'^(\d+)([a-zA-Z0-9]*)_', rel.name)
    return (rel.stem != 'index' or len(rel.parts) > 1, not (m is None and len(rel.parts) == 1), int(m.group(1)) if m else float('inf'),
            m.group(2) if m else '', rel.as_posix())

def notebooks(nbs: Path) -> list[Path]:
    """Notebooks of `nbs` and its sub-folders in reading order (index first, then by numeric prefix across the
    folders), as the build renders them; which files count is nbdev's rule (`nbdev.doclinks.nbglob` with
    `recursive = True`: files and folders whose names start with `_` or `.` are skipped)"""
    nbs = Path(nbs)
    files = globtastic(nbs, file_glob='*.ipynb', skip_file_re='^[_.]', skip_folder_re='^[_.]', recursive=True).map(Path)
    return sorted(files, key=lambda p: _reading_key(p.relative_to(nbs)))

def rel_nb(nb: Path, nbs: Path) -> str:
    "The notebook's path relative to `nbs/`, as nbdev names it: `ear/02_adapter.ipynb`"
    return Path(nb).relative_to(nbs).as_posix()

def wing_of(nb: Path, nbs: Path) -> str:
    "The wing folder of a notebook ('' for a notebook at the top of `nbs/`)"
    parts = Path(nb).relative_to(nbs).parts
    return parts[0] if len(parts) > 1 else ''

def is_api_notebook(nb: Path) -> bool:
    "Does the notebook export a module (`#| default_exp`, read with nbdev's own directive parser)?"
    try: cells = read_nb(nb).cells
    except (OSError, ValueError, KeyError, AttributeError): return False
    return any(c.cell_type == 'code' and extract_directives(c, remove=False).get('default_exp') for c in cells)

def html_files(docs: Path) -> list[Path]:
    return sorted(p for p in Path(docs).rglob('*.html') if SHOTS not in p.relative_to(docs).parts)

def check_pages(docs: Path, nbs: Path) -> list[str]:
    "A problem per notebook of `nbs` without its page in `docs`"
    nbs = Path(nbs)
    return [f'missing page: {page_name(rel_nb(nb, nbs))} (for nbs/{rel_nb(nb, nbs)})' for nb in notebooks(nbs)
            if not (Path(docs)/page_name(rel_nb(nb, nbs))).is_file()]

def check_links(docs: Path) -> list[str]:
    "A problem per broken internal link (missing file or #anchor) and per resource loaded from the network"
    docs, problems = Path(docs).resolve(), []
    for page in html_files(docs):
        rel = page.relative_to(docs).as_posix()
        for tag, attr, url, line, resource in _parse(page).links:
            u = urlsplit(url.strip())
            where = f'{rel}:{line}: <{tag} {attr}="{url[:120]}">'
            if u.scheme in ('data', 'mailto', 'javascript', 'tel'): continue
            if u.scheme or url.strip().startswith('//'):
                if resource: problems.append(f'network resource: {where} loads from the network (no CDN allowed)')
                continue
            path = unquote(u.path)
            if path.startswith('/'):
                problems.append(f'broken link: {where}: absolute path (the site must work from any folder)'); continue
            target = (page.parent/path).resolve() if path else page
            if path and not (target == docs or docs in target.parents):
                problems.append(f'broken link: {where}: points outside the site'); continue
            if path.endswith('/') or (target.is_dir() and path): target = target/'index.html'
            if not target.is_file():
                problems.append(f'broken link: {where}: {target.relative_to(docs).as_posix()} does not exist'); continue
            frag = unquote(u.fragment)
            if frag and target.suffix == '.html' and frag not in _parse(target).ids:
                problems.append(f'broken link: {where}: no id "{frag}" in {target.relative_to(docs).as_posix()}')
    for css in sorted(Path(docs).rglob('*.css')):
        for m in re.finditer(r'(?:url\(\s*["\']?|@import\s+["\'])(https?:)?//', css.read_text(errors='replace')):
            problems.append(f'network resource: {css.relative_to(docs).as_posix()} loads {m.group(0)}... from the network')
    return problems

_re_sig = re.compile(r'class="[^"]*celltag_showdoc[^"]*".*?<pre[^>]*>.*?\b(?:def|class)\b', re.S)

def check_content(docs: Path, nbs: Path) -> list[str]:
    """The index has its title and a sidebar to every page, with a heading per wing in reading order; API pages show
    `show_doc` signatures"""
    docs, nbs, problems = Path(docs), Path(nbs), []
    nbl = notebooks(nbs)
    pages = [page_name(rel_nb(nb, nbs)) for nb in nbl]
    idx = docs/'index.html'
    if idx.is_file():
        p = _parse(idx)
        if not (p.title_h1 or '').strip(): problems.append('index.html: no page title (<h1 class="title">)')
        missing = [f for f in pages if f not in p.sidebar]
        if missing: problems.append(f'index.html: the sidebar does not link {", ".join(missing)}')
        wings = [wing_title(w) for w, _ in itertools.groupby(wing_of(nb, nbs) for nb in nbl) if w]
        if p.wings != wings:
            problems.append(f'index.html: the sidebar headings are {p.wings}, not the wings {wings} in reading order')
    for nb in nbl:
        name = page_name(rel_nb(nb, nbs))
        f = docs/name
        if f.is_file() and is_api_notebook(nb) and not _re_sig.search(f.read_text(encoding='utf-8')):
            problems.append(f'{name}: no show_doc signature, although nbs/{rel_nb(nb, nbs)} exports a module')
    return problems

def check_site(docs, nbs) -> list[str]:
    "All static checks of the site in `docs` against the notebooks in `nbs`: a list of problems (empty: fine)"
    _parse.cache_clear()
    docs, nbs = Path(docs), Path(nbs)
    if not docs.is_dir(): return [f'missing site: {docs} does not exist (run python tools/build_docs.py)']
    return check_pages(docs, nbs) + check_links(docs) + check_content(docs, nbs)


# ------------------------------------------------------------------------------------------------ browser checks
class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args): pass

def serve(docs: Path):
    "Serve `docs` on 127.0.0.1 (free port) in a thread; returns (server, base url)"
    srv = http.server.ThreadingHTTPServer(('127.0.0.1', 0), functools.partial(_Quiet, directory=str(docs)))
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, f'http://127.0.0.1:{srv.server_address[1]}/'

def chromium(exe: str, *args: str, timeout=90) -> subprocess.CompletedProcess:
    "Run headless Chromium with a fresh profile"
    profile = tempfile.mkdtemp(prefix='earmem-chromium-')
    try:
        return subprocess.run([exe, *CHROMIUM_FLAGS, f'--user-data-dir={profile}', *args],
                              capture_output=True, text=True, timeout=timeout)
    finally: shutil.rmtree(profile, ignore_errors=True)

def _png_ok(path: Path) -> str | None:
    "None if `path` is a non-blank PNG, else what is wrong"
    if not path.is_file() or path.stat().st_size < 2000: return 'missing or empty'
    try:
        from matplotlib.image import imread
        img = imread(path)
        if img.std() < 1e-3: return 'blank'
    except Exception as e: return f'unreadable ({e})'

def browser_check(docs: Path, nbs: Path, exe: str, shots='all') -> list[str]:
    "Rendered-DOM checks of the index and the first API page, and screenshots into `docs/_screenshots/`"
    docs, problems = Path(docs), []
    if not Path(exe).exists() and not shutil.which(exe):
        return [f'no browser: {exe} not found (apt-get install -y chromium, or pass --no-browser)']
    nbs = Path(nbs)
    nbl = notebooks(nbs)
    want = [page_name(rel_nb(nb, nbs)) for nb in nbl]
    api = next((f for nb, f in zip(nbl, want) if is_api_notebook(nb) and (docs/f).is_file()), None)
    out = docs/SHOTS
    shutil.rmtree(out, ignore_errors=True); out.mkdir()
    srv, base = serve(docs)
    try:
        for page, expect in [('index.html', ['<h1 class="title"', 'class="sidebar"']),
                             *([(api, ['celltag_showdoc', 'class="title"'])] if api else [])]:
            r = chromium(exe, '--dump-dom', base + page)
            dom = r.stdout
            if r.returncode or '<body' not in dom:
                problems.append(f'browser: --dump-dom of {page} failed (exit {r.returncode}): {r.stderr.strip()[-300:]}'); continue
            for e in expect:
                if e not in dom: problems.append(f'browser: the rendered DOM of {page} lacks {e}')
            p = Page(dom)
            here = posixpath.dirname(page)     # the sidebar's links are relative to the page's folder
            side = [posixpath.normpath(posixpath.join(here, urlsplit(h).path)) for h in p.sidebar]
            if [h for h in side if h in want] != want:
                problems.append(f'browser: the sidebar of {page} is not {want} in reading order')
            if page == api and not _re_sig.search(dom):
                problems.append(f'browser: the rendered DOM of {page} shows no show_doc signature')
        targets = want if shots == 'all' else ['index.html'] + ([api] if api else [])
        for page in targets:
            if not (docs/page).is_file(): continue
            png = out/Path(page).with_suffix('.png')
            png.parent.mkdir(parents=True, exist_ok=True)
            r = chromium(exe, f'--screenshot={png}', '--window-size=1280,1600', base + page)
            bad = _png_ok(png)
            if r.returncode or bad: problems.append(f'browser: screenshot of {page} {bad or "failed"} '
                                                    f'(exit {r.returncode}): {r.stderr.strip()[-300:]}')
    finally: srv.shutdown(); srv.server_close()
    return problems


# ------------------------------------------------------------------------------------------------ main
def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--docs', default=str(ROOT/'_docs'), help='the built site (default: _docs)')
    ap.add_argument('--nbs', default=str(ROOT/'nbs'), help='the notebooks (default: nbs)')
    ap.add_argument('--no-browser', action='store_true', help='static checks only')
    ap.add_argument('--chromium', default=os.environ.get('CHROMIUM', '/usr/bin/chromium'))
    ap.add_argument('--shots', choices=['all', 'index'], default='all',
                    help='screenshot every page, or only the index and the first API page')
    a = ap.parse_args(argv)
    t0, docs, nbs = time.time(), Path(a.docs), Path(a.nbs)
    problems = check_site(docs, nbs)
    n = len(html_files(docs)) if docs.is_dir() else 0
    print(f'static checks: {n} pages, {len(problems)} problem(s)')
    if not a.no_browser and docs.is_dir():
        bp = browser_check(docs, nbs, a.chromium, a.shots)
        print(f'browser checks: {len(bp)} problem(s); screenshots in {docs/SHOTS}')
        problems += bp
    for p in problems: print(f'  {p}')
    if problems:
        print(f'FAIL: {len(problems)} problem(s) in {docs} (see above)')
        return 1
    print(f'OK: {n} pages, every notebook has its page, no broken link ({time.time()-t0:.0f}s)')
    return 0

if __name__ == '__main__': sys.exit(main())
