#!/usr/bin/env bash
# The search baselines at equal budgets (issue 34): every strategy x budget x split that has no
# results.json yet, written to baselines/search/STRATEGY/BUDGET/SPLIT/. Resumable: each run keeps a
# checkpoint under $XLABENCH_CACHE_DIR/search-checkpoints/ and the same command goes on where it stopped.
#
#   baselines/search/run.sh                                  # the whole grid
#   STRATEGIES="local guided" BUDGETS=200 SPLITS="test unseen" baselines/search/run.sh
#
# Guided search follows the shipped policy (`--guide general`, latest version). Runs on 2 cores for
# hours at 2,000 calls: start it with nohup and let it be.
set -euo pipefail
cd "$(dirname "$0")/../.."

STRATEGIES="${STRATEGIES:-local greedy beam random guided}"
BUDGETS="${BUDGETS:-20 200 2000}"
SPLITS="${SPLITS:-val test unseen}"
WORKERS="${WORKERS:-2}"
checkpoints="${XLABENCH_CACHE_DIR:-$HOME/.cache/xlabench}/search-checkpoints"
mkdir -p "$checkpoints"

for budget in $BUDGETS; do
  for strategy in $STRATEGIES; do
    for split in $SPLITS; do
      out="baselines/search/$strategy/$budget/$split"
      if [[ -f "$out/results.json" ]]; then
        continue
      fi
      echo "== $(date -u +%FT%TZ) search:$strategy, $budget calls, $split"
      mkdir -p "$out"
      guide=()
      if [[ "$strategy" == guided ]]; then
        guide=(--guide general)
      fi
      xlabench eval --policy "search:$strategy" "${guide[@]}" --budget "$budget" --graphs "$split" \
        --repeats 3 --workers "$WORKERS" --checkpoint "$checkpoints/$strategy-$budget-$split.json" \
        --json "$out/results.json" --report "$out" || [[ $? -eq 1 ]]  # 1: some outputs differ (reported)
    done
  done
done
