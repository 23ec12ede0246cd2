#!/usr/bin/env bash
# Installs the Debian packages simdev builds and tests with, and a deb-src
# entry so scripts/build-jemalloc.sh can fetch Debian's jemalloc source.
# Idempotent and quick when everything is there (no apt-get update then).
set -euo pipefail
pkgs=(build-essential cmake pkg-config dpkg-dev valgrind
      libopenblas-dev libhwloc-dev libjemalloc-dev libcmocka-dev
      python3-venv python3-dev binutils clang)
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

srcfile=/etc/apt/sources.list.d/simdev-deb-src.sources
need_update=0
if ! grep -rqs '^Types:.*deb-src' /etc/apt/sources.list.d/ &&
   ! grep -qs '^deb-src' /etc/apt/sources.list; then
  codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")
  $SUDO tee "$srcfile" >/dev/null <<SRC
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: $codename
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
  need_update=1
fi

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
if [ ${#missing[@]} -gt 0 ] || [ $need_update -eq 1 ]; then
  $SUDO apt-get update -qq
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "apt: installing ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
