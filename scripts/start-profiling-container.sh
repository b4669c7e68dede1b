#!/bin/sh
# Starts the profcpu sidecar next to a running container: it shares only that container's PID namespace (not its
# filesystem, not /tmp), so perf and profcpu in the sidecar see the target's processes, its perf maps through
# /proc/<pid>/root, and write their results to a folder of this host. Runs on the host; needs only a POSIX shell and
# the docker CLI (or a compatible one: DOCKER=podman).
#
#   scripts/start-profiling-container.sh -c my-service                       # a shell in the sidecar
#   scripts/start-profiling-container.sh -c my-service -- profcpu collect -duration 30
#
# Options:
#   -c CONTAINER        the container to profile (name or id); required when more than one container runs
#   -k KERNEL_VERSION   use the image whose perf was built from that kernel's sources (profcpu:kernel-6.6, built with
#                       --build-arg KERNEL_VERSION=6.6); default: the distribution's perf (profcpu:latest)
#   -i IMAGE            the sidecar image (default $PROFCPU_IMAGE, else profcpu:latest)
#   -o HOST_DIR         where results go on this host (default ~/perf-profilings), mounted at /workspace/profilings
#   --least-privilege   grant CAP_PERFMON, CAP_SYS_PTRACE, CAP_SYS_ADMIN and CAP_SYSLOG (without it /proc/kallsyms
#                       reads as zeros and kernel frames stay unnamed), and no seccomp filter (which would block
#                       perf_event_open), instead of --privileged
#   -h, --help          this text
#   -- COMMAND...       what to run in the sidecar instead of an interactive shell
# Environment: DOCKER (the CLI to run, default docker), PROFCPU_IMAGE, PROFCPU_DOCKER_RUN_ARGS (more `docker run`
# arguments, split on spaces, for what a particular machine needs).
set -eu

me=$(basename "$0")
docker=${DOCKER:-docker}
image=${PROFCPU_IMAGE:-profcpu:latest}
image_given=""
container=""
kernel=""
out_dir=""
least_privilege=""

die() {
  echo "$me: $1" >&2
  [ -z "${2-}" ] || echo "  $2" >&2
  exit "${3:-1}"
}

usage() {
  sed -n '2,/^set -eu/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'
}

need_value() {
  [ $# -ge 2 ] && [ -n "$2" ] || die "option $1 needs a value" "Run $me --help for the options." 2
}

while [ $# -gt 0 ]; do
  case "$1" in
    -c) need_value "$@"; container=$2; shift 2 ;;
    -k) need_value "$@"; kernel=$2; shift 2 ;;
    -i) need_value "$@"; image=$2; image_given=1; shift 2 ;;
    -o) need_value "$@"; out_dir=$2; shift 2 ;;
    --least-privilege) least_privilege=1; shift ;;
    -h | --help) usage; exit 0 ;;
    --) shift; break ;;
    *) die "unknown option '$1'" "Run $me --help for the options; put the sidecar's command after --." 2 ;;
  esac
done

if [ -n "$kernel" ]; then
  case "$kernel" in
    [0-9]*.[0-9]*) ;;
    *) die "-k wants a kernel version like 6.6, not '$kernel'" "" 2 ;;
  esac
  [ -z "$image_given" ] || die "-k and -i both choose the image: give one of them" "" 2
  repository=$image
  case "${image##*/}" in *:*) repository=${image%:*} ;; esac # a tag, not a registry's port
  image="$repository:kernel-$kernel"
fi

command -v "$docker" >/dev/null 2>&1 ||
  die "'$docker' is not on PATH" "Install Docker (or set DOCKER to a compatible CLI such as podman)."
"$docker" version >/dev/null 2>&1 ||
  die "'$docker' cannot reach its engine" "Start the Docker daemon, or check DOCKER_HOST and your rights on its socket."

# The target: named, or the only container running that is not a profcpu sidecar. Never a guess among several.
if [ -z "$container" ]; then
  running=$("$docker" ps --format '{{.ID}} {{.Names}} {{.Label "profcpu.role"}}' | awk '$3 != "sidecar" { print $1 " " $2 }')
  count=$(printf '%s' "$running" | grep -c . || true)
  case "$count" in
    0) die "no container is running" "Start the container to profile first, then run $me -c NAME." ;;
    1) container=$(printf '%s\n' "$running" | awk '{ print $2 }')
       echo "$me: profiling the only running container, $container" >&2 ;;
    *) echo "$me: $count containers are running; say which to profile with -c NAME:" >&2
       printf '%s\n' "$running" | awk '{ print "  " $2 " (" $1 ")" }' >&2
       exit 1 ;;
  esac
fi
state=$("$docker" inspect --type container --format '{{.State.Running}} {{.Id}} {{.Name}}' "$container" 2>/dev/null) ||
  die "no container named '$container'" "List the running ones with: $docker ps"
running_flag=${state%% *}
rest=${state#* }
target_id=${rest%% *}
target_name=${rest#* }
target_name=${target_name#/}
[ "$running_flag" = true ] || die "container '$target_name' is not running" "Start it, then run $me again."

"$docker" image inspect "$image" >/dev/null 2>&1 || {
  if [ -n "$kernel" ]; then
    die "image $image is not here" "Build it: docker build -f images/sidecar/Dockerfile --build-arg KERNEL_VERSION=$kernel -t $image ."
  fi
  die "image $image is not here" "Build it: docker build -f images/sidecar/Dockerfile -t $image . (from the profcpu repository)"
}

out_dir=${out_dir:-${HOME:-/root}/perf-profilings}
mkdir -p "$out_dir" || die "cannot create the results folder $out_dir" "Choose another one with -o HOST_DIR."
out_dir=$(cd "$out_dir" && pwd)

if [ -n "$least_privilege" ]; then
  privileges="--cap-add=SYS_PTRACE --cap-add=SYS_ADMIN --cap-add=SYSLOG --security-opt=seccomp=unconfined"
  # Engines older than CAP_PERFMON (Debian 12's Docker 20.10) refuse to create a container that asks for it; there
  # CAP_SYS_ADMIN, which perf accepts in its place, is enough.
  probe="profcpu-perfmon-probe-$$"
  if refusal=$("$docker" create --name "$probe" --cap-add=PERFMON "$image" true 2>&1); then
    "$docker" rm "$probe" >/dev/null 2>&1 || true
    privileges="--cap-add=PERFMON $privileges"
  else
    case "$refusal" in
      *PERFMON*) echo "$me: this engine does not know CAP_PERFMON; CAP_SYS_ADMIN stands in for it" >&2 ;;
      *) die "the engine refused a test container: $refusal" "Check the engine with: $docker info" ;;
    esac
  fi
else
  privileges="--privileged"
fi
tty=""
if [ -t 0 ] && [ -t 1 ]; then tty="-it"; fi
# The results belong to whoever ran this (through sudo: whoever ran sudo), and the sidecar prints their host paths.
owner="${SUDO_UID:-$(id -u)}:${SUDO_GID:-$(id -g)}"

echo "$me: sidecar $image in the PID namespace of $target_name (${target_id%"${target_id#????????????}"}), results in $out_dir" >&2
# This run's name, recorded by collect in target/target.json: a folder the sidecar leaves unfinished is told apart
# from another launcher's (the results folder may be shared, and its recording still under way) by carrying it.
launcher_run="$(date +%s)-$$-$(od -An -N4 -tx4 /dev/urandom 2>/dev/null | tr -d ' \n')"
status=0
# $privileges, $tty and PROFCPU_DOCKER_RUN_ARGS are lists of arguments: split on purpose.
# shellcheck disable=SC2086
"$docker" run --rm $tty $privileges ${PROFCPU_DOCKER_RUN_ARGS:-} \
  --pid="container:$target_id" \
  --label profcpu.role=sidecar --label "profcpu.target=$target_name" \
  --env "PROFCPU_TARGET_CONTAINER=$target_name" \
  --env "PROFCPU_OUTPUT_OWNER=$owner" \
  --env "PROFCPU_HOST_OUTPUT=$out_dir=/workspace/profilings" \
  --env "PROFCPU_LAUNCHER_RUN=$launcher_run" \
  --volume "$out_dir:/workspace/profilings" \
  "$image" "$@" || status=$?

# A target that stops (docker stop, or its app exiting) ends every process in its PID namespace, the sidecar
# included: perf's file is left unfinished and nothing was drawn. Finish such folders in a fresh sidecar of its own.
[ "$status" -ne 0 ] || exit 0
running=$("$docker" inspect --type container --format '{{.State.Running}}' "$target_id" 2>/dev/null || echo false)
[ "$running" != true ] || exit "$status"
# The folders to finish become the positional parameters (the sidecar's command is spent): names with spaces stay whole.
set --
for path in "$out_dir"/*/; do
  run=$(basename "$path")
  [ -f "$out_dir/$run/perf.data" ] && [ ! -f "$out_dir/$run/manifest.json" ] || continue
  grep -q "\"launcherRun\": \"$launcher_run\"" "$out_dir/$run/target/target.json" 2>/dev/null || continue
  set -- "$@" "$run"
done
if [ "$#" -eq 0 ]; then
  echo "$me: the container $target_name stopped, and the sidecar with it (exit status $status); no recording was under way" >&2
  exit "$status"
fi
echo "$me: the container $target_name stopped during the recording, and the sidecar with it: finishing what was recorded" >&2
for run in "$@"; do
  # shellcheck disable=SC2086
  if "$docker" run --rm $privileges ${PROFCPU_DOCKER_RUN_ARGS:-} --network none \
    --label profcpu.role=sidecar \
    --env "PROFCPU_OUTPUT_OWNER=$owner" \
    --env "PROFCPU_HOST_OUTPUT=$out_dir=/workspace/profilings" \
    --volume "$out_dir:/workspace/profilings" \
    "$image" profcpu postprocess -dir "/workspace/profilings/$run"; then
    echo "$me: the profile up to the container's stop is in $out_dir/$run" >&2
  else
    echo "$me: $out_dir/$run holds the raw recording; finish it with: $docker run --rm -v $out_dir:/workspace/profilings $image profcpu postprocess -dir /workspace/profilings/$run" >&2
    exit 1
  fi
done
