"tools/book.py and tools/check_outputs.py: the cell rules they share, on hand-made cells (no notebook is executed)."
import json, subprocess, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import book, check_outputs   # noqa: E402


def code(src, outputs=()): return {"cell_type": "code", "source": src.splitlines(True), "outputs": list(outputs), "metadata": {}}
def md(src): return {"cell_type": "markdown", "source": src.splitlines(True), "metadata": {}}
OUT = {"output_type": "stream", "name": "stdout", "text": ["4\n"]}


def test_demonstrable_cells_follow_nbdev_directives():
    assert book.is_demonstrable(code("x = 1"))
    assert book.is_demonstrable(code("#| slow\nx = 1"))                     # slow cells count
    for d in ("#| export", "#|export", "# | exports", "#| exporti", "#| hide", "#| default_exp core"):
        assert not book.is_demonstrable(code(f"{d}\nx = 1")), d
    assert not book.is_demonstrable(code("#| hide")) and not book.is_demonstrable(code("   \n"))
    assert book.is_demonstrable(code("x = 1\n#| export"))                   # a directive only counts at the top
    assert book.directives("#| demo\n#| slow\nx = 1") == {"demo", "slow"}


def test_asserts_are_parsed_not_grepped():
    assert book.has_assert("y = f()\nassert y > 0, y")
    assert not book.has_assert('print("assert nothing")\n# assert in a comment')
    assert book.has_assert("%time y = 1\nassert y")                          # magics do not hide it


def test_missing_pointers_read_prose_and_comments_not_strings(tmp_path):
    nb = tmp_path / "x.ipynb"
    cells = [md("See `papers/ear-exploratory-assimilating-reflection.txt` and `tools/book.py`, https://a.org/b/c.txt"),
             code('open("data/never.json")  # see docs/missing.md\n'), md("```\nearmem x --json results/r.json\n```")]
    assert book.missing_pointers(str(nb), cells) == ["papers/ear-exploratory-assimilating-reflection.txt", "docs/missing.md"]


def test_chapter_report_and_check(tmp_path):
    nbs = tmp_path / "nbs"; nbs.mkdir()
    cells = [code("#| export\ndef f(): return 4"), code("f()", [OUT]), code("y = f()"), code("assert f() == 4\nf()", [OUT])]
    (nbs / "a.ipynb").write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    r = book.report([str(nbs)])
    c = r["chapters"][0]
    assert (c["cells"], c["with_output"], c["closing_asserts"], c["closing_output"]) == (3, 2, True, True)
    out = subprocess.run([sys.executable, str(ROOT / "tools" / "book.py"), str(nbs), "--check", "--min-share", "0.7"],
                         capture_output=True, text=True)
    assert out.returncode == 1 and "FAIL: book-wide share 66.7% < 70%" in out.stdout
    assert subprocess.run([sys.executable, str(ROOT / "tools" / "book.py"), str(nbs), "--check", "--min-share", "0.6",
                           "--closing", "--paths"], capture_output=True).returncode == 0


def test_compared_text_ignores_stderr_and_trailing_whitespace():
    a = [{"output_type": "stream", "name": "stdout", "text": ["x  \n"]},
         {"output_type": "stream", "name": "stderr", "text": ["100%|####| 3/3 [00:01<00:00, 2.1it/s]\n"]},
         {"output_type": "execute_result", "data": {"text/plain": ["4\n", "\n"], "image/png": "AAA"}}]
    b = [{"output_type": "stream", "name": "stdout", "text": ["x\n"]}, {"output_type": "execute_result", "data": {"text/plain": ["4 "]}}]
    assert check_outputs.text_of(a) == check_outputs.text_of(b) == "x\n4"
    assert check_outputs.text_of(b[:1] * 2) != check_outputs.text_of(b[:1])           # repeated lines are a difference
    assert check_outputs.text_of([{"output_type": "error", "ename": "ValueError", "evalue": "k: bad"}]) == "ValueError: k: bad"
    assert check_outputs._drop_bars(a[1:2]) == []


def test_demo_cells_are_the_closing_one_and_the_marked_ones():
    cells = [code("#| export\nx = 1"), code("#| demo\nx"), code("y = 2"), md("text"), code("x + y"), code("#| hide\nz = 0")]
    assert check_outputs.demo_cells(cells) == [1, 4]
    assert check_outputs.demo_cells(cells, everything=True) == [0, 1, 2, 4, 5]
