"The docs checker (tools/check_docs.py) finds missing pages and broken links in any folder, without a browser."
import importlib.util, json, re, subprocess, sys
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

# ---------------------------------------------------------------------------------------------------- wing folders
WING_PAGE = """<!DOCTYPE html><html><head><link rel="stylesheet" href="{up}site.css"></head><body>
<nav class="sidebar"><ol><li><a href="{up}index.html">earmem</a></li>
<li class="wing-group"><span class="wing">Core</span><ol><li><a href="{up}core/core.html">core</a></li></ol></li>
<li class="wing-group"><span class="wing">EAR</span><ol><li><a href="{up}ear/adapter.html">adapter</a></li></ol></li>
</ol></nav><main><h1 class="title">{title}</h1>{body}</main></body></html>"""

@pytest.fixture
def wings(tmp_path):
    "nbs/ with the index on top and chapters in wing folders; _docs/ with a page per notebook at nbdev's nested path"
    nbs, docs = tmp_path/'nbs', tmp_path/'_docs'
    for d in (nbs/'core', nbs/'ear', nbs/'_drafts', nbs/'ear'/'.ipynb_checkpoints', docs/'core', docs/'ear'):
        d.mkdir(parents=True)
    _nb(nbs/'index.ipynb', 'print(1)')
    _nb(nbs/'core'/'00_core.ipynb', '#| default_exp core', '#| export\ndef top_k(queries, k:int): pass')
    _nb(nbs/'ear'/'02_adapter.ipynb', '#| default_exp ear.adapter')
    for skipped in (nbs/'_drafts'/'05_x.ipynb', nbs/'ear'/'_scratch.ipynb', nbs/'ear'/'.ipynb_checkpoints'/'02_adapter-checkpoint.ipynb'):
        _nb(skipped, 'print(2)')
    (docs/'site.css').write_text('body{color:#000}')
    (docs/'index.html').write_text(WING_PAGE.format(up='', title='earmem', body='<a href="ear/adapter.html">a</a>'))
    (docs/'core'/'core.html').write_text(WING_PAGE.format(up='../', title='core', body=SHOWDOC))
    (docs/'ear'/'adapter.html').write_text(WING_PAGE.format(up='../', title='adapter', body=(
        SHOWDOC + '<a href="../core/core.html#top_k">top_k</a> <img src="../_math/eq.svg">')))
    (docs/'_math').mkdir(); (docs/'_math'/'eq.svg').write_text('<svg xmlns="http://www.w3.org/2000/svg"/>')
    return docs, nbs

def test_notebooks_are_found_in_the_wing_folders_in_reading_order(wings, tmp_path):
    docs, nbs = wings
    _nb(nbs/'ear'/'10a_extra.ipynb', 'print(3)'); _nb(nbs/'core'/'10_more.ipynb', 'print(3)')
    _nb(nbs/'ear'/'index.ipynb', 'print(3)')                      # a wing's own index is not the site's index
    _nb(nbs/'guide.ipynb', 'print(4)'); (nbs/'memory'/'store').mkdir(parents=True); _nb(nbs/'memory'/'store'/'10b_deep.ipynb', 'print(5)')
    rel = [check_docs.rel_nb(p, nbs) for p in check_docs.notebooks(nbs)]
    assert rel == ['index.ipynb', 'guide.ipynb', 'core/00_core.ipynb', 'ear/02_adapter.ipynb', 'core/10_more.ipynb',
                   'ear/10a_extra.ipynb', 'memory/store/10b_deep.ipynb', 'ear/index.ipynb']   # unnumbered top pages after
    # the index; then by number across the folders and sub-folders; `_`/`.` skipped
    assert [check_docs.wing_of(p, nbs) for p in check_docs.notebooks(nbs)] == ['', '', 'core', 'ear', 'core', 'ear', 'memory', 'ear']

def test_nested_page_names_follow_nbdev():
    from nbdev.doclinks import _nbpath2html
    for n in ['ear/02_adapter.ipynb', 'memory/27_api.ipynb', 'memory/store/23_operations.ipynb', 'core/10a_Extra_Stuff.ipynb']:
        assert check_docs.page_name(n) == _nbpath2html(Path(n)).as_posix()
    assert check_docs.page_name('ear/02_adapter.ipynb') == 'ear/adapter.html'
    assert check_docs.page_name(Path('index.ipynb')) == 'index.html'

def test_wing_titles():
    assert [check_docs.wing_title(w) for w in ['core', 'ear', 'earm', 'experiments', 'memory', 'serve', 'cli']] == \
        ['Core', 'EAR', 'EARM', 'Experiments', 'Memory', 'Serve', 'CLI']

def test_a_correct_site_with_wings_passes(wings):
    docs, nbs = wings
    assert check_docs.check_site(docs, nbs) == []

def test_wing_pages_need_relative_links_and_their_page(wings):
    docs, nbs = wings
    page = docs/'ear'/'adapter.html'
    page.write_text(page.read_text().replace('../site.css', 'site.css').replace('../core/core.html', 'core/core.html'))
    (docs/'core'/'core.html').unlink()
    text = '\n'.join(check_docs.check_site(docs, nbs))
    assert 'missing page: core/core.html (for nbs/core/00_core.ipynb)' in text
    assert 'ear/adapter.html:1: <link href="site.css">: ear/site.css does not exist' in text
    assert 'ear/core/core.html does not exist' in text

def test_the_sidebar_must_show_the_wings(wings):
    docs, nbs = wings
    idx = docs/'index.html'
    idx.write_text(idx.read_text().replace('<span class="wing">EAR</span>', ''))
    text = '\n'.join(check_docs.check_site(docs, nbs))
    assert "the sidebar headings are ['Core'], not the wings ['Core', 'EAR']" in text

def test_build_links_are_relative_to_the_page():
    b = _load('build_docs')
    assert b._rel('ear/adapter.html', 'site.css') == '../site.css'
    assert b._rel('ear/adapter.html', 'ear/explorer.html') == 'explorer.html'
    assert b._rel('index.html', 'core/core.html') == 'core/core.html'
    site, ids, repairs = 'https://earmem.github.io/earmem/', {'core/core.html': {'memorybank'}}, []
    nb_pages = {'core/00_core.ipynb': 'core/core.html', 'ear/03_explorer.ipynb': 'ear/explorer.html'}
    body = (f'<a href="{site}core/core.html#memorybank">a</a> <a href="{site}core/core.html#memorybank.candidates">b</a> '
            '<a href="03_explorer.ipynb#x">c</a> <a href="../core/00_core.ipynb">d</a> <a href="#here">e</a> '
            '<a href="https://github.com/earmem/earmem">f</a>')
    out = b._fix_links(body, site, nb_pages, ids, repairs, 'ear/adapter.html')
    assert re.findall(r'href="([^"]*)"', out) == ['../core/core.html#memorybank', '../core/core.html#memorybank',
                                                  'explorer.html#x', '../core/core.html', '#here',
                                                  'https://github.com/earmem/earmem']
    assert repairs == ['ear/adapter.html: core/core.html#memorybank.candidates -> core/core.html#memorybank']

def test_build_sidebar_groups_chapters_under_their_wing():
    b = _load('build_docs')
    pages = [dict(file=f, wing=w, num=n, title=t, description='') for f, w, n, t in [
        ('index.html', '', '', 'earmem'), ('core/core.html', 'core', '00', 'core'), ('core/toys.html', 'core', '01', 'toys'),
        ('ear/adapter.html', 'ear', '02', 'adapter'), ('cli/cli.html', 'cli', '33', 'cli')]]
    side = b._sidebar(pages[3], pages)
    p = check_docs.Page(f'<nav class="sidebar"><ol>{side}</ol></nav>')
    assert p.wings == ['Core', 'EAR', 'CLI']
    assert p.sidebar == ['../index.html', '../core/core.html', '../core/toys.html', 'adapter.html', '../cli/cli.html']
    assert '<a href="adapter.html" class=active' in side and '<span class="num">02</span>adapter' in side

def test_docs_lint_names_a_mixed_cell_that_reads_what_the_docs_kernel_lacks(tmp_path):
    "nbdev renders show_doc in a fresh kernel running only exported cells and cells with imports: a mixed cell reading a name from any other cell fails there"
    b = _load('build_docs')
    nb = tmp_path/'n.ipynb'
    _nb(nb, 'import math', 'def helper(x): return x', '#| export\ndef shown(y): return y',
        'import json\ndef _t():\n    assert helper(1) == 1 and shown(2) == 2\n_t()')
    errs, warns = b.docs_lint(nb, {'slow'})
    assert len(errs) == 1 and 'uses helper,' in errs[0] and 'cell #3' in errs[0], errs
    _nb(nb, 'import math', '#| export\ndef helper(x): return x', 'import json\nprint([helper(i) for i in range(2)], math.pi)')
    errs, warns = b.docs_lint(nb, {'slow'})
    assert errs == [] and len(warns) == 1, (errs, warns)             # what it reads comes from cells the docs kernel runs
    _nb(nb, 'from fastcore.test import *', 'import json\ntest_eq(json.loads("1"), 1)')
    errs, warns = b.docs_lint(nb, {'slow'})
    assert errs == [] and len(warns) == 1, (errs, warns)             # `import *` binds the module's names

def test_docs_lint_passes_every_chapter():
    "The check the docs build makes before it runs anything, made here in seconds (CI's docs step comes last)"
    b = _load('build_docs')
    from nbdev.config import get_config
    flags = set(get_config(path=ROOT).tst_flags.split())
    errs = [e for p in sorted((ROOT/'nbs').rglob('*.ipynb')) if '.ipynb_checkpoints' not in p.parts
            for e in b.docs_lint(p, flags, str(p.relative_to(ROOT/'nbs')))[0]]
    assert errs == [], '\n'.join(errs)
