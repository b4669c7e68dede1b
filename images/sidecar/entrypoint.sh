#!/bin/sh
# The sidecar's entrypoint. Without arguments it opens a shell, as the original tool did; with arguments it runs them
# (`docker run ... profcpu collect -duration 30`); arguments starting with a dash are options for profcpu itself.
set -eu
if [ $# -eq 0 ]; then
  set -- bash
elif [ "${1#-}" != "$1" ]; then
  set -- profcpu "$@"
fi
if [ "$1" = bash ] && [ -t 0 ]; then
  echo "profcpu sidecar: \`profcpu ps\` lists the processes you can profile, \`profcpu collect --help\` says how;" >&2
  echo "results go to /workspace/profilings (the launcher's -o folder on the host)." >&2
fi
exec "$@"
