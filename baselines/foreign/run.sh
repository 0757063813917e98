#!/usr/bin/env bash
# Every module of the foreign corpus (real modules written by others) and of the synthetic cases (what
# such modules carry) through the commands a user runs on their own module: stats, a 10-pass apply with
# --check-outputs, XLA's pipeline replayed pass by pass (and --trace where it parts from XLA's), and the
# shipped policy against XLA's default. Writes baselines/foreign/CORPUS/{checks.tsv,replay.json,
# trace.txt,eval.json,report.md}.
#
#   baselines/foreign/run.sh                  # both corpora
#   CORPORA=synthetic baselines/foreign/run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."

CORPORA="${CORPORA:-synthetic foreign}"
WORKERS="${WORKERS:-2}"
SEQUENCE="call-inliner algsimp cse dce reshape-mover tuple-simplifier algsimp transpose-folding cse dce"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT

for corpus in $CORPORA; do
  out="baselines/foreign/$corpus"
  mkdir -p "$out"
  echo "== $(date -u +%FT%TZ) $corpus: stats and apply"
  printf 'graph\tstats\tapply (10 passes, --check-outputs)\n' > "$scratch/checks.tsv"
  for name in $(xlabench graphs list "$corpus" --json | python -c 'import json,sys; print(" ".join(g["name"] for g in json.load(sys.stdin)))'); do
    stats=$(xlabench stats "$name" --json > /dev/null 2> "$scratch/err" && echo ok || head -c 300 "$scratch/err")
    # shellcheck disable=SC2086
    apply=$(xlabench apply "$name" $SEQUENCE --check-outputs -o "$scratch/out.hlo" 2> "$scratch/err" | tail -n 2 \
      || head -c 300 "$scratch/err")
    printf '%s\t%s\t%s\n' "$name" "$stats" "$apply" | tr -s '\n' ' ' >> "$scratch/checks.tsv"
    echo >> "$scratch/checks.tsv"
  done
  mv "$scratch/checks.tsv" "$out/checks.tsv"

  echo "== $(date -u +%FT%TZ) $corpus: replay"
  xlabench bench replay "$corpus" --workers "$WORKERS" --json > "$scratch/replay.json" || [[ $? -eq 1 ]]
  mv "$scratch/replay.json" "$out/replay.json"
  xlabench bench replay "$corpus" --workers "$WORKERS" --trace > "$scratch/trace.txt" || [[ $? -eq 1 ]]
  mv "$scratch/trace.txt" "$out/trace.txt"

  echo "== $(date -u +%FT%TZ) $corpus: eval --policy general"
  xlabench eval --policy general --graphs "$corpus" --no-runtime --workers "$WORKERS" \
    --json "$out/eval.json" --report "$out" || [[ $? -eq 1 ]]
done
