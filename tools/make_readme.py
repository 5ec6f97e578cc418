"""Write README.md from nbs/index.ipynb without quarto (what `nbdev_readme` does through quarto).

Markdown cells are copied; code cells are shown as Python blocks unless they carry `#| hide`; outputs are kept.
The marker `<!-- mcp-tools -->` in a markdown cell becomes the list of tools the MCP server lists (asked of a server
built here, through the SDK), so the README never names a tool the server lacks or misses one it has.
Run from anywhere: `python tools/make_readme.py`. CI fails when README.md differs from what this writes."""
import re, sys, tempfile
from pathlib import Path
import nbformat
from nbconvert import MarkdownExporter
from traitlets.config import Config

root = Path(__file__).resolve().parent.parent
_directive = re.compile(r'^\s*#\|\s*(.*)$')
MCP_TOOLS_MARKER = '<!-- mcp-tools -->'

def _directives(src):
    "Leading `#| key value` lines as a dict, and the source without them."
    d, lines = {}, src.splitlines()
    while lines and _directive.match(lines[0]):
        k, _, v = _directive.match(lines.pop(0)).group(1).partition(' ')
        d[k.rstrip(':')] = v.strip()
    return d, '\n'.join(lines)

def server_tools() -> list:
    "The tools (`mcp.types.Tool`) `earmem serve mcp` lists, in its order: a server over a throwaway store, asked through the SDK."
    if str(root) not in sys.path: sys.path.insert(0, str(root))   # this checkout's earmem
    import anyio
    from earmem.memory.rules.hygiene import HashingEncoder
    from earmem.memory.store import MemoryStore
    from earmem.serve.mcp import build_mcp_server
    with tempfile.TemporaryDirectory() as d, MemoryStore(Path(d) / 'store', encoder=HashingEncoder(16)) as store:
        return anyio.run(build_mcp_server(store).list_tools)

def mcp_tools_sentence(tools: list) -> str:
    "The README's sentence naming the MCP tools `tools` (as the server lists them) and those of them without a `user_id`."
    names = lambda ts: ', '.join(f'`{t.name}`' for t in ts)
    without = [t for t in tools if 'user_id' not in t.input_schema.get('properties', {})]
    return (f"The {len(tools)} tools it lists, each taking `user_id`" + (f" (bar {names(without)})" if without else '')
            + f": {names(tools)}.")

def render() -> str:
    "README.md's text, from nbs/index.ipynb."
    nb = nbformat.read(root / 'nbs' / 'index.ipynb', as_version=4)
    cells = []
    for c in nb.cells:
        if c.cell_type == 'code':
            d, c.source = _directives(c.source)
            if 'hide' in d or d.get('include', '') == 'false' or not c.source.strip(): continue
        elif c.cell_type == 'markdown' and MCP_TOOLS_MARKER in c.source:
            c.source = c.source.replace(MCP_TOOLS_MARKER, mcp_tools_sentence(server_tools()))
        cells.append(c)
    nb.cells = cells
    nb.metadata['language_info'] = {'name': 'python'}
    md, _ = MarkdownExporter(config=Config()).from_notebook_node(nb)
    md = re.sub(r'\n{3,}', '\n\n', md).strip() + '\n'
    return '<!-- WARNING: generated from nbs/index.ipynb by tools/make_readme.py: edit the notebook -->\n\n' + md

def main():
    (root / 'README.md').write_text(render())
    print('wrote README.md')

if __name__ == '__main__': main()
