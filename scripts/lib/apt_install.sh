# Sourced by scripts/install-deps*.sh: installs the Debian packages of an
# array that are missing, as root or through sudo, without letting a
# package start its service (a chronyd started by its package would
# discipline the host clock; containers have no init anyway).
#
#   apt_install_missing NAME [--refuse-removals] PACKAGE...
#
# NAME prefixes the messages. --refuse-removals: simulate first and stop
# (exit 1) if apt would remove any package, e.g. an arm64 library that is not
# Multi-Arch co-installable with the amd64 one the native build needs.
apt_install_missing() {
  local name=$1
  shift
  local refuse_removals=0
  if [ "${1:-}" = --refuse-removals ]; then
    refuse_removals=1
    shift
  fi
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "$name: run as root (or install sudo)" >&2; exit 1; }
    sudo=sudo
  fi
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -eq 0 ]; then
    echo "$name: all $# packages present"
    return 0
  fi
  echo "$name: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  local policy=/usr/sbin/policy-rc.d created_policy=0
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' | $sudo tee "$policy" >/dev/null
    $sudo chmod +x "$policy"
    created_policy=1
  fi
  # shellcheck disable=SC2064  # expand now: the trap runs after this function returns
  trap "[ $created_policy = 1 ] && $sudo rm -f $policy" EXIT
  $sudo apt-get update -qq
  if [ "$refuse_removals" = 1 ]; then
    local plan
    plan=$($sudo apt-get install -s --no-install-recommends "${missing[@]}")
    if grep -q '^Remv ' <<<"$plan"; then
      echo "$name: apt would remove packages; not installing:" >&2
      grep '^Remv ' <<<"$plan" >&2
      exit 1
    fi
  fi
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
}
