#!/usr/bin/env bash
# Builds the chronolink container image (deploy/Containerfile) with podman,
# without a container registry: the Debian bookworm base image is made from
# Debian packages (mmdebstrap, then `podman import`) and handed to the
# Containerfile as DEBIAN_BASE. Prints the runtime image's size and how long
# each step took. Needs root. docs/deployment.md "Container image".
#
#   scripts/build-image.sh                       # the full multi-stage build
#   scripts/build-image.sh --prebuilt build-rel  # reuse binaries built here
#
# Options:
#   --tag TAG          image name (default localhost/chronolink:dev)
#   --prebuilt DIR     skip the build stage's compile: take the four binaries
#                      from the build directory DIR (scripts/build.sh on this
#                      bookworm host; same libraries as the runtime stage).
#                      The runtime stage is the Containerfile's, unchanged.
#   --rebuild-base     make the Debian base again even if it exists
#   --mirror URL       Debian mirror (default http://deb.debian.org/debian)
# Environment: PODMAN_GLOBAL_OPTS (default "--cgroup-manager=cgroupfs
# --runtime=runc": crun refuses this VM's hybrid cgroup v1/v2 layout; add
# "--storage-driver=vfs" where overlay is not available) and PODMAN_RUN_OPTS
# for each RUN step (default: nofile and nproc limits of 4096: podman's own
# defaults are above this VM's hard limits, and without CAP_SYS_RESOURCE the
# runtime cannot raise them). docs/deployment.md "podman on this machine".
set -euo pipefail
cd "$(dirname "$0")/.."

TAG=localhost/chronolink:dev
BASE=localhost/chronolink-debian:bookworm
PREBUILT=""
REBUILD_BASE=0
MIRROR=http://deb.debian.org/debian
while [ $# -gt 0 ]; do
  case "$1" in
    --tag) TAG=$2; shift 2 ;;
    --prebuilt) PREBUILT=$2; shift 2 ;;
    --rebuild-base) REBUILD_BASE=1; shift ;;
    --mirror) MIRROR=$2; shift 2 ;;
    -h | --help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "build-image: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" -eq 0 ] || { echo "build-image: run as root (podman import of a root-made tree)" >&2; exit 1; }

# This script's own packages (scripts/install-deps.sh has the project's).
need=()
for p in podman buildah mmdebstrap uidmap runc; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "build-image: installing ${need[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

read -r -a PODMAN_GLOBAL <<<"${PODMAN_GLOBAL_OPTS:---cgroup-manager=cgroupfs --runtime=runc}"
read -r -a PODMAN_RUN <<<"${PODMAN_RUN_OPTS:---ulimit nofile=4096:4096 --ulimit nproc=4096:4096}"
podman_() { podman "${PODMAN_GLOBAL[@]}" "$@"; }

t0=$SECONDS
if [ "$REBUILD_BASE" = 1 ] || ! podman_ image exists "$BASE"; then
  echo "build-image: making $BASE with mmdebstrap (Debian bookworm, minbase)"
  # Like debian:bookworm-slim: no man pages, docs or locales; no recommends.
  mmdebstrap --variant=minbase --mode=root --quiet \
    --aptopt='APT::Install-Recommends "false"' \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' --dpkgopt='path-exclude=/usr/share/locale/*' \
    bookworm - \
    "deb $MIRROR bookworm main" "deb $MIRROR bookworm-updates main" \
    "deb ${MIRROR%/debian}/debian-security bookworm-security main" |
    podman_ import --quiet - "$BASE" >/dev/null
fi
t_base=$((SECONDS - t0))

# Every podman build reads /dev/null: a RUN step that touches the terminal
# of a background job is stopped (SIGTTIN/SIGTTOU) and the build hangs.
t1=$SECONDS
if [ -z "$PREBUILT" ]; then
  echo "build-image: podman build (build stage compiles Release, then the runtime stage)"
  podman_ build "${PODMAN_RUN[@]}" --network host --build-arg "DEBIAN_BASE=$BASE" -f deploy/Containerfile -t "$TAG" . </dev/null
else
  # The Containerfile with its build stage replaced by a copy of the
  # binaries; the runtime stage is taken as it is.
  ctx=$(mktemp -d /tmp/chronolink-image.XXXXXX)
  trap 'rm -rf "$ctx"' EXIT
  mkdir -p "$ctx/prebuilt" "$ctx/deploy/container"
  for b in agent/chronolink-agent tools/chronolink-solve tools/chronolink-trace collector/chronolink-collect; do
    [ -x "$PREBUILT/$b" ] || { echo "build-image: $PREBUILT/$b missing: build it first (scripts/build.sh)" >&2; exit 1; }
    install -m 0755 -s "$PREBUILT/$b" "$ctx/prebuilt/"
  done
  cp deploy/container/chronolink-agent-entrypoint "$ctx/deploy/container/"
  {
    sed -n '1,/^# --- build stage ---$/p' deploy/Containerfile
    printf 'FROM ${DEBIAN_BASE} AS build\nCOPY prebuilt/ /out/\n\n'
    sed -n '/^# --- runtime stage ---$/,$p' deploy/Containerfile
  } >"$ctx/Containerfile"
  echo "build-image: podman build with the binaries of $PREBUILT (no compile in the build stage)"
  podman_ build "${PODMAN_RUN[@]}" --network host --build-arg "DEBIAN_BASE=$BASE" -f "$ctx/Containerfile" -t "$TAG" "$ctx" </dev/null
fi
t_build=$((SECONDS - t1))

size=$(podman_ image inspect --format '{{.Size}}' "$TAG")
base_size=$(podman_ image inspect --format '{{.Size}}' "$BASE")
echo "build-image: $TAG: $((size / 1000000)) MB (the Debian base alone: $((base_size / 1000000)) MB)"
echo "build-image: base ${t_base} s, image ${t_build} s"
