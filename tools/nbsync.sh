#!/usr/bin/env bash
# Authoring helper: turn percent-format sources (.nbsrc/NAME.py, kept out of git) into nbs/NAME.ipynb.
# Usage: tools/nbsync.sh 00_core [01_adapter ...]    (reverse: jupytext --to py:percent nbs/NAME.ipynb -o .nbsrc/NAME.py)
set -euo pipefail
cd "$(dirname "$0")/.."
meta='{"jupytext": null, "kernelspec": {"display_name": "python3", "language": "python", "name": "python3"}}'
for n in "$@"; do
  upd=""; [ -f "nbs/$n.ipynb" ] && upd="--update"   # --update keeps existing cell ids: stable diffs
  jupytext --quiet --to ipynb $upd ".nbsrc/$n.py" -o "nbs/$n.ipynb" --update-metadata "$meta"
  nbdev_clean --fname "nbs/$n.ipynb"
done
