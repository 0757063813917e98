#!/usr/bin/env bash
# The search baselines at equal budgets (issue 34): every strategy x budget x split that has no
# results.json yet, written to baselines/search/STRATEGY/BUDGET/SPLIT/. Resumable: an unfinished run keeps
# its finished graphs in checkpoint.json beside where results.json goes, and the same command goes on where
# it stopped. Commit an unfinished run's checkpoint.json to resume it on another machine (a run at 2,000
# calls outlasts a session); it is removed once results.json is written.
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
        --repeats 3 --workers "$WORKERS" --checkpoint "$out/checkpoint.json" \
        --json "$out/results.json" --report "$out" || [[ $? -eq 1 ]]  # 1: some outputs differ (reported)
      rm -f "$out/checkpoint.json"
    done
  done
done
