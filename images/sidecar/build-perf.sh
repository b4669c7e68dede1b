#!/bin/sh
# Build stage of the sidecar image: builds perf from the sources of one kernel release and installs it as
# <dest>/<version>/perf, where profcpu looks for it at run time (src/perf/select.ts picks the one closest to the
# running kernel). Usage: build-perf.sh VERSION SHA256SUMS DEST. An empty VERSION only creates DEST: the image then
# uses the distribution's perf. The sources are Debian's linux-source-VERSION package when the build stage's Debian
# has it (6.12 in trixie: apt checks it, no other network than Debian's mirror needed), else kernel.org's tarball,
# which must be listed in SHA256SUMS (kernel-versions/sha256sums).
set -eu
version=$1
sums=$2
dest=$3
mkdir -p "$dest"
if [ -z "$version" ]; then
  echo "build-perf: no KERNEL_VERSION given, the image uses the distribution's perf"
  exit 0
fi
case "$version" in
  [0-9]*.[0-9]*) ;;
  *) echo "build-perf: KERNEL_VERSION must look like 6.6 or 6.12, not '$version'" >&2; exit 1 ;;
esac
export DEBIAN_FRONTEND=noninteractive
apt-get update
tarball="linux-$version.tar.xz"
from=kernel.org
if apt-cache show "linux-source-$version" >/dev/null 2>&1; then
  from=debian
elif ! grep -q "  $tarball\$" "$sums"; then
  echo "build-perf: Debian has no linux-source-$version and $tarball is not listed in kernel-versions/sha256sums; listed:" >&2
  sed 's/.*  linux-\(.*\)\.tar\.xz$/  \1/' "$sums" >&2
  echo "Add its line from https://cdn.kernel.org/pub/linux/kernel/v${version%%.*}.x/sha256sums.asc" >&2
  exit 1
fi

# The libraries are those Debian's linux-perf links against, so the final image (which installs linux-perf) has them.
apt-get install -y --no-install-recommends ca-certificates curl xz-utils make gcc libc6-dev flex bison pkg-config \
  python3-dev libelf-dev libdw-dev zlib1g-dev liblzma-dev libzstd-dev libcap-dev libnuma-dev libtraceevent-dev \
  libslang2-dev libssl-dev
if [ -n "${BUILD_CA_CERTS-}" ]; then
  printf '%s\n' "$BUILD_CA_CERTS" >/usr/local/share/ca-certificates/build-ca.crt
  update-ca-certificates
fi

work=$(mktemp -d)
cd "$work"
if [ "$from" = debian ]; then
  # Debian's sources with Debian's patches: /usr/src/linux-source-VERSION.tar.xz, checked by apt.
  apt-get install -y --no-install-recommends "linux-source-$version"
  tar -xJf "/usr/src/linux-source-$version.tar.xz"
  mv "linux-source-$version" "linux-$version"
  apt-get purge -y "linux-source-$version" >/dev/null
else
  curl -fsSL --retry 3 -o "$tarball" "https://cdn.kernel.org/pub/linux/kernel/v${version%%.*}.x/$tarball"
  grep "  $tarball\$" "$sums" | sha256sum -c -
  tar -xJf "$tarball"
  rm "$tarball"
fi
# Optional features that need more build dependencies than they are worth in a profiler sidecar are switched off;
# WERROR=0 because an older perf meets a newer compiler here. PYTHON (with python3-dev's python3-config): perf
# generates its event tables with it even when Python scripting is off. libssl-dev: `perf inject --jit` needs it.
# Checked with Debian's linux-source-6.12 (6.12.107) in debian:trixie: builds in about two minutes on two cores.
make -C "linux-$version/tools/perf" -j"$(nproc)" WERROR=0 PYTHON=python3 NO_LIBPYTHON=1 NO_LIBPERL=1 \
  NO_LIBBABELTRACE=1 NO_LIBUNWIND=1 BUILD_BPF_SKEL=0 NO_LIBBPF=1 NO_JVMTI=1 NO_GTK2=1
install -D -m 0755 "linux-$version/tools/perf/perf" "$dest/$version/perf"
"$dest/$version/perf" --version
cd /
rm -rf "$work" /var/lib/apt/lists/*
