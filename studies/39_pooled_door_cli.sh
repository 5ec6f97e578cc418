#!/usr/bin/env bash
# Issue 39: the pooled door from a shell. A pool folder of four users (ana, bo, cy, dee; the folder's root store 'default'
# is a user too, empty): ana, bo and cy give feedback, dee gives none, cy opts out (--exclude cy). One model is fine-tuned on
# ana's and bo's rows and switched into every store (cy's and dee's too); the second run finds the same logs and reuses it.
# Each store's lineage holds counts only (rows, users, users left out) — no name, no text.
#     PYTHONPATH=$PWD bash studies/39_pooled_door_cli.sh > studies/39_pooled_door_cli.txt 2>&1
set -euo pipefail
S=$(mktemp -d)/team
trap 'rm -rf "$(dirname "$S")"' EXIT
show() { echo "\$ $(printf '%q ' "$@" | sed "s#$S#\$S#g")"; "$@" | sed "s#$S#\$S#g"; echo; }
quiet() { echo "\$ $(printf '%q ' "$@" | sed "s#$S#\$S#g")"; "$@" > /dev/null; }
declare -A PEOPLE=([ana]="Ana Abe" [bo]="Bo Bea" [cy]="Cy Cal" [dee]="Dee Dan")
for u in ana bo cy dee; do
  for p in ${PEOPLE[$u]}; do
    for v in "keeps two grey cats" "plays the cello" "works as a nurse"; do quiet earmem memory add "$p $v" --kind fact -s "$S" --user $u; done
  done
done
for u in ana bo cy; do   # each person's pet question; the answer cites that person's cats (m1 for the first, m4 for the second)
  set -- ${PEOPLE[$u]}
  quiet earmem memory feedback --query "which pet does $1 have?" --cited m1 -s "$S" --user $u
  quiet earmem memory feedback --query "which pet does $2 have?" --cited m4 -s "$S" --user $u
done
show earmem memory users -s "$S"
show earmem memory consolidate --all-users --exclude cy -s "$S" --json
echo "# the second run: the same logs, the model already there"
show earmem memory consolidate --all-users --exclude cy -s "$S" --json
echo "# each store's manifest: the encoder it names and its lineage (counts only; own_feedback: whether its log was among the training logs — default's and dee's were, empty; cy's was not)"
for f in "$S"/earmem-store.json "$S"/namespaces/*/earmem-store.json; do
  echo "${f//$S/\$S}"; jq -c '{encoder, lineage}' "$f" | sed "s#$S#\$S#g"
done
echo
show earmem memory search "which pet does Cal have?" -k 1 -s "$S" --user cy
