#!/usr/bin/env bash
# Installs the Debian packages simdev builds and tests with (needs root or
# sudo for apt-get). Idempotent and quick when everything is there (no
# apt-get update then).
#
# Building alone needs build-essential cmake pkg-config libopenblas-dev
# libhwloc-dev python3-dev (and curl, wget or python3 for jemalloc's source:
# scripts/build-jemalloc.sh); the others are for the tests. A machine that only
# runs an installed wheel needs libopenblas0 and libhwloc15.
set -euo pipefail
pkgs=(build-essential cmake pkg-config curl valgrind
      libopenblas-dev libhwloc-dev libcmocka-dev
      python3-venv python3-dev binutils clang)
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
    missing+=("$p")
done
# python3-venv is satisfied by any python3 with a working venv module.
if [ ${#missing[@]} -gt 0 ] && python3 -c 'import venv, ensurepip' 2>/dev/null; then
  missing=("${missing[@]/python3-venv}")
  read -r -a missing <<<"${missing[*]}"
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "apt: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
