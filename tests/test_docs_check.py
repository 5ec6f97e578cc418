"The docs checker (tools/check_docs.py) finds missing pages and broken links in any folder, without a browser."
import importlib.util, json, subprocess, sys
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parent.parent

def _load(name):
    spec = importlib.util.spec_from_file_location(name, ROOT/'tools'/f'{name}.py')
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod

check_docs = _load('check_docs')

def _nb(path: Path, *sources):
    cells = [dict(cell_type='code', metadata={}, source=s, outputs=[], execution_count=None) for s in sources]
    path.write_text(json.dumps(dict(cells=cells, metadata={}, nbformat=4, nbformat_minor=5)))

PAGE = """<!DOCTYPE html><html><head><link rel="stylesheet" href="site.css"></head><body>
<nav class="sidebar"><ol>{side}</ol></nav><main><h1 class="title">{title}</h1>{body}</main></body></html>"""
SHOWDOC = ('<div class="cell celltag_showdoc"><h3 id="top_k">top_k</h3>'
           '<div class="highlight"><pre>def top_k(queries, k:int)</pre></div></div>')

@pytest.fixture
def site(tmp_path):
    "A tiny site: nbs/ has index, 00_core and 01_adapter; _docs/ has index.html and core.html only"
    nbs, docs = tmp_path/'nbs', tmp_path/'_docs'
    nbs.mkdir(); docs.mkdir()
    _nb(nbs/'index.ipynb', 'print(1)')
    _nb(nbs/'00_core.ipynb', '#| default_exp core', '#| export\ndef top_k(queries, k:int): pass')
    _nb(nbs/'01_adapter.ipynb', '#| default_exp ear.adapter')
    (nbs/'_private.ipynb').write_text('{}')                        # not a page: nbdev skips `_` names
    side = ''.join(f'<li><a href="{f}">{f}</a></li>' for f in ('index.html', 'core.html', 'adapter.html'))
    (docs/'site.css').write_text('body{color:#000}')
    (docs/'index.html').write_text(PAGE.format(side=side, title='earmem', body=(
        '<p><a href="core.html#top_k">top_k</a> <a href="core.html#nowhere">gone</a> '
        '<a href="missing.html">missing</a> <a href="#here">here</a> <a href="https://example.org/x">out</a></p>'
        '<h2 id="here">Here</h2>')))
    (docs/'core.html').write_text(PAGE.format(side=side, title='core', body=SHOWDOC + '<img src="_math/eq.svg">'))
    return docs, nbs

def test_reports_missing_page_and_broken_links(site):
    docs, nbs = site
    problems = check_docs.check_site(docs, nbs)
    text = '\n'.join(problems)
    assert 'missing page: adapter.html (for nbs/01_adapter.ipynb)' in text
    assert any('index.html' in p and 'missing.html does not exist' in p for p in problems), text
    assert any('index.html' in p and 'no id "nowhere" in core.html' in p for p in problems), text
    assert any('core.html' in p and '_math/eq.svg does not exist' in p for p in problems), text
    assert sum('adapter.html does not exist' in p for p in problems) == 2, text     # the sidebar of both pages
    assert not any('top_k"' in p or '#here' in p or 'example.org' in p for p in problems), text   # fine links
    assert len(problems) == 6, text

def test_a_correct_site_passes(site):
    docs, nbs = site
    for f in ('index.html', 'core.html'):
        (docs/f).write_text((docs/f).read_text().replace('<li><a href="adapter.html">adapter.html</a></li>', '')
                            .replace(' <a href="core.html#nowhere">gone</a>', '').replace(' <a href="missing.html">missing</a>', ''))
    (docs/'_math').mkdir(); (docs/'_math'/'eq.svg').write_text('<svg xmlns="http://www.w3.org/2000/svg"/>')
    (nbs/'01_adapter.ipynb').unlink()
    assert check_docs.check_site(docs, nbs) == []

def test_network_resources_and_missing_signatures(site):
    docs, nbs = site
    (docs/'core.html').write_text((docs/'core.html').read_text()
                                  .replace(SHOWDOC, '<script src="https://cdn.example.com/mathjax.js"></script>'))
    text = '\n'.join(check_docs.check_site(docs, nbs))
    assert 'network resource: core.html' in text and 'cdn.example.com' in text
    assert 'core.html: no show_doc signature' in text

def test_cli_exits_nonzero_with_a_clear_message(site):
    docs, nbs = site
    r = subprocess.run([sys.executable, str(ROOT/'tools'/'check_docs.py'), '--docs', str(docs), '--nbs', str(nbs),
                        '--no-browser'], capture_output=True, text=True)
    assert r.returncode == 1
    assert 'missing page: adapter.html' in r.stdout and 'broken link' in r.stdout and 'FAIL' in r.stdout

def test_page_names_follow_nbdev():
    from nbdev.doclinks import _nbpath2html
    for n in ['index.ipynb', '00_core.ipynb', '07_evaluation.ipynb', '10a_Extra_Stuff.ipynb']:
        assert check_docs.page_name(n) == _nbpath2html(Path(n)).name
    assert _load('build_docs').page_name('00_core.ipynb') == 'core.html'

def test_slugs_follow_pandoc():
    slugify = _load('build_docs').slugify
    assert slugify('Why a residual adapter') == 'why-a-residual-adapter'
    assert slugify('MemoryBank.candidates') == 'memorybank.candidates'
    assert slugify('Slate probabilities (Plackett–Luce)') == 'slate-probabilities-plackettluce'
    assert slugify('3.1 The setting') == 'the-setting'
    assert slugify('§') == 'section'
