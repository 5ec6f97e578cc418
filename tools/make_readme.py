"""Write README.md from nbs/index.ipynb without quarto (what `nbdev_readme` does through quarto).

Markdown cells are copied; code cells are shown as Python blocks unless they carry `#| hide`; outputs are kept.
Run from anywhere: `python tools/make_readme.py`. CI fails when README.md differs from what this writes."""
import re
from pathlib import Path
import nbformat
from nbconvert import MarkdownExporter
from traitlets.config import Config

root = Path(__file__).resolve().parent.parent
_directive = re.compile(r'^\s*#\|\s*(.*)$')

def _directives(src):
    "Leading `#| key value` lines as a dict, and the source without them."
    d, lines = {}, src.splitlines()
    while lines and _directive.match(lines[0]):
        k, _, v = _directive.match(lines.pop(0)).group(1).partition(' ')
        d[k.rstrip(':')] = v.strip()
    return d, '\n'.join(lines)

def main():
    nb = nbformat.read(root / 'nbs' / 'index.ipynb', as_version=4)
    cells = []
    for c in nb.cells:
        if c.cell_type == 'code':
            d, c.source = _directives(c.source)
            if 'hide' in d or d.get('include', '') == 'false' or not c.source.strip(): continue
        cells.append(c)
    nb.cells = cells
    nb.metadata['language_info'] = {'name': 'python'}
    md, _ = MarkdownExporter(config=Config()).from_notebook_node(nb)
    md = re.sub(r'\n{3,}', '\n\n', md).strip() + '\n'
    (root / 'README.md').write_text('<!-- WARNING: generated from nbs/index.ipynb by tools/make_readme.py: edit the notebook -->\n\n' + md)
    print('wrote README.md')

if __name__ == '__main__': main()
