#!/usr/bin/env bash
# Installs what the offline Chrome-trace viewer check needs
# (tools/viewer/speedscope_check.py, docs/viewer-check.md): Debian's
# chromium, npm (Debian's nodejs/npm only when no npm is on PATH: a NodeSource
# node that brings its own npm is kept as it is), and speedscope, pinned, into
# the git-ignored folder build-viewer/ (VIEWER_DIR overrides it). Idempotent;
# needs root (or sudo) for apt-get.
set -euo pipefail
cd "$(dirname "$0")/.."

SPEEDSCOPE_VERSION=1.25.0
VIEWER_DIR=${VIEWER_DIR:-build-viewer}

fail() { echo "install-viewer: $*" >&2; exit 1; }

PACKAGES=(chromium)
command -v npm >/dev/null || PACKAGES+=(nodejs npm)

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || fail "run as root (or install sudo)"
  SUDO=sudo
fi

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-viewer: Debian packages present (${PACKAGES[*]}; npm $(command -v npm))"
else
  echo "install-viewer: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq || fail "apt-get update failed"
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" \
    || fail "apt-get install ${missing[*]} failed"
fi
command -v chromium >/dev/null || fail "no chromium on PATH after the install"
command -v npm >/dev/null || fail "no npm on PATH after the install"

pkg_json="$VIEWER_DIR/node_modules/speedscope/package.json"
index="$VIEWER_DIR/node_modules/speedscope/dist/release/index.html"
installed_version() {
  [ -f "$pkg_json" ] || return 0
  sed -n 's/^  "version": "\([^"]*\)".*/\1/p' "$pkg_json" | head -n 1
}
if [ "$(installed_version)" = "$SPEEDSCOPE_VERSION" ] && [ -f "$index" ]; then
  echo "install-viewer: speedscope $SPEEDSCOPE_VERSION present in $VIEWER_DIR/"
else
  echo "install-viewer: npm install speedscope@$SPEEDSCOPE_VERSION into $VIEWER_DIR/"
  mkdir -p "$VIEWER_DIR"
  # A package.json of its own, so that npm installs here and not into a
  # package.json further up the tree.
  [ -f "$VIEWER_DIR/package.json" ] ||
    printf '{\n  "name": "chronolink-viewer",\n  "private": true\n}\n' >"$VIEWER_DIR/package.json"
  npm install --prefix "$VIEWER_DIR" --no-audit --no-fund --ignore-scripts --save-exact \
    "speedscope@$SPEEDSCOPE_VERSION" || fail "npm install speedscope@$SPEEDSCOPE_VERSION failed"
  if [ "$(installed_version)" != "$SPEEDSCOPE_VERSION" ] || [ ! -f "$index" ]; then
    fail "speedscope $SPEEDSCOPE_VERSION not found in $VIEWER_DIR/ after npm install"
  fi
fi
echo "install-viewer: chromium: $(chromium --version 2>/dev/null | head -n 1)"
echo "install-viewer: speedscope: $(cd "$(dirname "$index")" && pwd)/index.html"
