#!/usr/bin/env bash
# The committed compiler-change runs: `xlabench compilers diff BASE HEAD` with the shipped policy, one run a
# split (train: one a family), each merged as it ends into baselines/compiler-changes/BASE-HEAD/{diff.json,report.md,changes.png}
# (written as the command writes them). A split whose graphs are all in that diff.json is not run again:
# committed, an unfinished run resumes on another machine with the same command.
#
#   baselines/compiler-changes/run.sh flip      # 0.10.2 -> 0.10.2 + --xla_allow_excess_precision=false
#   baselines/compiler-changes/run.sh wheel     # the 0.10.1 release's jaxlib wheel (--wheel) -> 0.10.2
#   SPLITS="test" RUNTIME=1 baselines/compiler-changes/run.sh wheel
#
# Cold, on 2 cores, a graph takes 15-60 s with runtimes and outputs (RUNTIME=1), less without them
# (`--no-runtime`, the default here: op counts, sequences and the passes named). Hours for all splits:
# start it with nohup.
set -euo pipefail
cd "$(dirname "$0")/../.."

# train in one run a family: its 191 graphs outlast a session
train_families="$(python -c 'from xlabench.graphs import resolve_graphs
print(" ".join(sorted({f"train:{g.family}" for g in resolve_graphs("train")})))')"
SPLITS="${SPLITS:-test val unseen $train_families}"
runtime=(--no-runtime)
[[ "${RUNTIME:-0}" == 1 ]] && runtime=()
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT

case "${1:-}" in
  flip)
    base=0.10.2 head=no-excess-precision
    xlabench compilers list --json | grep -q "\"name\": \"$head\"" ||
      xlabench compilers add --base 0.10.2 --xla-flags=--xla_allow_excess_precision=false --name "$head"
    ;;
  wheel)
    base=my-build head=0.10.2
    if ! xlabench compilers list --json | grep -q "\"name\": \"$base\""; then
      python -m pip download --quiet --no-deps jaxlib==0.10.1 -d "$scratch"
      xlabench compilers add --wheel "$scratch"/jaxlib-0.10.1-*.whl --name "$base"
    fi
    ;;
  *)
    echo "usage: $0 flip|wheel" >&2
    exit 2
    ;;
esac
out="baselines/compiler-changes/$base-$head"

for split in $SPLITS; do
  if python - "$out/diff.json" "$split" <<'EOF'; then
# Exit 0 when every graph of the split is in the merged diff already.
import json, sys
from xlabench.graphs import resolve_graphs
try:
    done = {graph["name"] for graph in json.load(open(sys.argv[1]))["graphs"]}
except OSError:
    sys.exit(1)
sys.exit(0 if {graph.name for graph in resolve_graphs(sys.argv[2])} <= done else 1)
EOF
    continue
  fi
  echo "== $(date -u +%FT%TZ) $base -> $head on $split"
  # Exit 1 is a regression found, the diff's answer; anything else is a failure of the run.
  xlabench compilers diff "$base" "$head" --graphs "$split" --policy general "${runtime[@]}" \
    --json "$scratch/$split.json" || [[ $? == 1 ]]
  python - "$out" "$split" "$scratch/$split.json" "${runtime[*]}" <<'EOF'
# Merge one split's diff into BASE-HEAD/diff.json and write the report as `compilers diff` writes it.
import dataclasses, json, os, sys

from xlabench.eval.compiler_diff import CompilerDiff, GraphDiff, write_diff_report
from xlabench.files import write_json

out, split, path, options = sys.argv[1:5]
new = json.load(open(path))
merged = os.path.join(out, "diff.json")
documents, splits = [new], [split]
if os.path.exists(merged):
    documents.append(json.load(open(merged)))
    splits = sorted(set(documents[1].get("splits", [])) | {split})
for key in ("base", "head", "policy", "tolerance", "runtime", "catalogue", "compilers"):
    if any(document[key] != new[key] for document in documents):
        sys.exit(f"{merged}: made otherwise ({key}): move it away to start over")
fields = {field.name for field in dataclasses.fields(GraphDiff)}
graphs = {}
for document in reversed(documents):  # the new run's entry wins
    graphs.update((g["name"], GraphDiff(**{k: v for k, v in g.items() if k in fields})) for g in document["graphs"])
diff = CompilerDiff(
    new["base"], new["head"], new["policy"], new["catalogue"], new["action_match"],
    [graphs[name] for name in sorted(graphs)], new["tolerance"], new["runtime"], new["compilers"],
)
os.makedirs(out, exist_ok=True)
write_json(merged, {**diff.to_dict(), "splits": splits})
command = f"xlabench compilers diff {new['base']} {new['head']} --graphs SPLIT --policy general {options}"
write_diff_report(out, diff, f"{command} (SPLIT: {', '.join(splits)}, one run each)")
print(f"{out}: {len(graphs)} graphs ({', '.join(splits)}), {len(diff.regressions())} regressions")
EOF
done
