#!/bin/sh
# Installs what profcpu needs on a Debian/Ubuntu machine, then its npm packages, then builds it.
#   scripts/setup.sh          perf and the build (enough for `npm run demo`)
#   scripts/setup.sh --test   also what the tests and benchmarks use (gcc, binutils, elfutils, debuginfod, libc6-dbg
#                             for the local debuginfod to serve, xmllint, GNU time, wrk for the overhead benchmark,
#                             docker.io + debootstrap for the real-engine container test, podman + catatonit for its
#                             Kubernetes pod, chromium for the pages' browser tests, golang-go for the source of
#                             Google's pprof, which the pprof symbolisation test builds)
# Installs only the Debian packages that are missing, so a second run is quick. Needs root for apt-get.
set -eu
cd "$(dirname "$0")/.."

packages="linux-perf procps"
if [ "${1-}" = "--test" ]; then
  packages="$packages gcc libc6-dev libc6-dbg binutils elfutils debuginfod libxml2-utils perl util-linux iproute2 time"
  packages="$packages git jq curl"
  packages="$packages wrk docker.io debootstrap podman catatonit"
  # The pages' browser tests (test/render/browser.test.ts) open them in Debian's Chromium.
  packages="$packages chromium"
  # test/postprocess/pprof-addresses.test.ts builds Google's pprof from the source the Go distribution vendors.
  packages="$packages golang-go"
fi

missing=""
for p in $packages; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing="$missing $p"
done
if [ -n "$missing" ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "setup: missing Debian packages:$missing; run this script as root (sudo) to install them" >&2
    exit 1
  fi
  echo "setup: installing$missing"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi

command -v node >/dev/null || { echo "setup: Node.js 20.19 or later is needed (https://nodejs.org)" >&2; exit 1; }
node -e 'const [a,b]=process.versions.node.split(".").map(Number);process.exit(a>20||(a===20&&b>=19)?0:1)' ||
  { echo "setup: Node.js $(node --version) is too old: profcpu needs 20.19 or later" >&2; exit 1; }

npm ci --no-audit --no-fund --loglevel=error
npm run build --silent
