#!/usr/bin/env bash
# A sweep of overrides from the shell: run SPEC at several step counts, each into its own store,
# skip what is done, stop on a real error, and print each run's headline numbers. No text is
# parsed: the JSON of `plan --json` and `show --json`, and the exit codes of `plan
# --detailed-exitcode` (0 nothing to do, 2 work to do, 66 requirements unmet), decide.
#   usage: docs/steps_sweep.sh SPEC [STEPS...]      (RUNNER=path/to/runner to use another)
set -u
runner=${RUNNER:-runner}
spec=$1; shift
[ $# -gt 0 ] || set -- 100 200  # the default step counts, as two words
store_of() { python3 -c 'import json, sys; print(json.load(sys.stdin)["store"])'; }
results() { python3 -c 'import json, sys; [print(r["label"] + ":", json.dumps(r["per_network"])) for r in json.load(sys.stdin)["results"]]'; }

for steps in "$@"; do
  set_args=(--set "dynamics.steps=$steps" --set "experiment.store=\"store/steps_$steps.zarr\"")
  "$runner" plan "$spec" "${set_args[@]}" --no-estimate --detailed-exitcode > /dev/null
  case $? in
    0) echo "steps=$steps: done already" ;;
    2) "$runner" apply "$spec" "${set_args[@]}" --quiet > /dev/null || exit $? ;;
    66) echo "steps=$steps: requirements not met here (runner plan $spec lists them)"; continue ;;
    *) exit 1 ;;
  esac
  store=$("$runner" plan "$spec" "${set_args[@]}" --no-estimate --json | store_of)
  "$runner" show "$store" --json | results | sed "s/^/steps=$steps: /"
done
