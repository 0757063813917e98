#!/usr/bin/env bash
# The committed compiler-change runs: `xlabench compilers diff BASE HEAD` with the shipped policy, one run a
# split (a split's diff.json and report in a scratch folder as it ends), then merged into
# baselines/compiler-changes/BASE-HEAD/{diff.json,report.md,changes.png}. A split already in the scratch
# folder is not run again, so the same command resumes where it stopped.
#
#   baselines/compiler-changes/run.sh flip      # 0.10.2 -> 0.10.2 + --xla_allow_excess_precision=false
#   baselines/compiler-changes/run.sh wheel     # the 0.10.1 release's jaxlib wheel (--wheel) -> 0.10.2
#   SPLITS="test" RUNTIME=1 baselines/compiler-changes/run.sh wheel
#
# Cold, on 2 cores, a graph takes 15-60 s with runtimes and outputs, about half that without them
# (`--no-runtime`, the default here: op counts and the passes named; RUNTIME=1 executes both executables).
set -euo pipefail
cd "$(dirname "$0")/../.."

SPLITS="${SPLITS:-test val unseen train}"
SCRATCH="${SCRATCH:-${XLABENCH_CACHE_DIR:-$HOME/.cache/xlabench}/compiler-changes}"
runtime=(--no-runtime)
[[ "${RUNTIME:-0}" == 1 ]] && runtime=()

case "${1:-}" in
  flip)
    base=0.10.2 head=no-excess-precision
    xlabench compilers list --json | grep -q "\"name\": \"$head\"" ||
      xlabench compilers add --base 0.10.2 --xla-flags=--xla_allow_excess_precision=false --name "$head"
    ;;
  wheel)
    base=my-build head=0.10.2
    if ! xlabench compilers list --json | grep -q "\"name\": \"$base\""; then
      wheels="$(mktemp -d)"
      trap 'rm -rf "$wheels"' EXIT
      python -m pip download --quiet --no-deps jaxlib==0.10.1 -d "$wheels"
      xlabench compilers add --wheel "$wheels"/jaxlib-0.10.1-*.whl --name "$base"
    fi
    ;;
  *)
    echo "usage: $0 flip|wheel" >&2
    exit 2
    ;;
esac

parts=()
for split in $SPLITS; do
  part="$SCRATCH/$base-$head/$split"
  if [[ ! -f "$part/diff.json" ]]; then
    echo "== $(date -u +%FT%TZ) $base -> $head on $split"
    # Exit 1 is a regression found, the diff's answer; anything else is a failure of the run.
    xlabench compilers diff "$base" "$head" --graphs "$split" --policy general "${runtime[@]}" \
      --json "$part/diff.json.partial" --report "$part" || [[ $? == 1 ]]
    mv "$part/diff.json.partial" "$part/diff.json"
  fi
  parts+=("$part/diff.json")
done
command="xlabench compilers diff $base $head --graphs SPLIT --policy general ${runtime[*]} (SPLIT: $SPLITS)"
python - "baselines/compiler-changes/$base-$head" "$command" "${parts[@]}" <<'EOF'
# One document of the runs (one a split), written as `compilers diff` writes it.
import dataclasses, json, os, sys

from xlabench.eval.compiler_diff import CompilerDiff, GraphDiff, write_diff_report
from xlabench.files import write_json

out, command, paths = sys.argv[1], sys.argv[2], sys.argv[3:]
documents = [json.load(open(path)) for path in paths]
first = documents[0]
for other in documents[1:]:
    for key in ("base", "head", "policy", "tolerance", "runtime", "catalogue", "compilers"):
        if other[key] != first[key]:
            sys.exit(f"the runs differ in {key}: not one diff")
fields = {f.name for f in dataclasses.fields(GraphDiff)}
graphs = [GraphDiff(**{k: v for k, v in g.items() if k in fields}) for d in documents for g in d["graphs"]]
if len({g.name for g in graphs}) != len(graphs):
    sys.exit("the runs' graphs overlap")
graphs.sort(key=lambda g: g.name)
diff = CompilerDiff(
    first["base"], first["head"], first["policy"], first["catalogue"], first["action_match"], graphs,
    first["tolerance"], first["runtime"], first["compilers"],
)
os.makedirs(out, exist_ok=True)
write_json(os.path.join(out, "diff.json"), diff.to_dict())
write_diff_report(out, diff, command)
print(f"{out}: {len(graphs)} graphs, {len(diff.regressions())} regressions, {len(diff.improvements())} improvements")
EOF
