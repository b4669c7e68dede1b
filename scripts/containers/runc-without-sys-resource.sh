#!/bin/sh
# An OCI runtime for dockerd on machines whose root lacks CAP_SYS_RESOURCE in its bounding set (the project's CI
# VMs): runc cannot grant a capability it does not hold, so `docker run --privileged` fails with "unable to apply
# caps: operation not permitted". This wrapper removes CAP_SYS_RESOURCE from the bundle's config.json, then runs
# runc with the same arguments. Registered by engine.mjs (`dockerd --add-runtime ... --default-runtime ...`) only
# when the machine needs it; real user machines do not.
set -eu
bundle=""
previous=""
for arg in "$@"; do
  case "$previous" in --bundle | -b) bundle=$arg ;; esac
  case "$arg" in --bundle=*) bundle=${arg#--bundle=} ;; esac
  previous=$arg
done
if [ -n "$bundle" ] && [ -f "$bundle/config.json" ]; then
  tmp="$bundle/config.json.profcpu-tmp"
  jq '(.process.capabilities // {}) |= with_entries(.value |= map(select(. != "CAP_SYS_RESOURCE")))' \
    "$bundle/config.json" >"$tmp"
  mv "$tmp" "$bundle/config.json"
fi
exec runc "$@"
