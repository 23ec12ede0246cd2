#!/usr/bin/env bash
# Builds the jemalloc that simdev links statically into libsimdev.so.
#
# Why not Debian's libjemalloc: it uses initial-exec TLS, and a dlopen'ed
# library with initial-exec TLS fails in a running Python ("cannot allocate
# memory in static TLS block"). We build Debian's own jemalloc source (the
# exact 5.3.0 that bookworm ships) with global-dynamic TLS, symbols prefixed
# with sdje_ and hidden, so it neither clashes with nor replaces malloc.
# --disable-cache-oblivious: otherwise every large allocation gets one extra
# page for a random sub-page offset, which wastes a quarter of a device region
# filled with 1 MiB tensors (device buffers are 64-byte aligned anyway).
#
# The source is Debian's orig tarball, fetched from Debian's archive pool
# (no root, no deb-src entry: this runs inside `pip install .` too) and
# checked against the SHA-256 that Debian's signed jemalloc_5.3.0-1.dsc lists.
# SIMDEV_DEBIAN_MIRROR overrides http://deb.debian.org/debian.
#
# Usage: scripts/build-jemalloc.sh [PREFIX]   (default: .deps/jemalloc)
# The source is unpacked and built in PREFIX/../src. Idempotent: returns at
# once if PREFIX already holds this build of the library. CMake runs it at
# configure time. Needs a C compiler, make, and curl, wget or python3.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
prefix=${1:-$root/.deps/jemalloc}
stamp=$prefix/.simdev-jemalloc-5.3.0-2
if [ -f "$stamp" ] && [ -f "$prefix/lib/libjemalloc_pic.a" ]; then
  exit 0
fi

tarball=jemalloc_5.3.0.orig.tar.bz2
sha256=2db82d1e7119df3e71b7640219b6dfe84789bc0537983c3b7ac4f7189aecfeaa
url=${SIMDEV_DEBIAN_MIRROR:-http://deb.debian.org/debian}/pool/main/j/jemalloc/$tarball

mkdir -p "$prefix/lib" "$prefix/include/jemalloc"
prefix=$(cd "$prefix" && pwd)
work=$(dirname "$prefix")/src
mkdir -p "$work"
cd "$work"

# Two configures at once (make build and pip install . in one checkout)
# would unpack into the same directory: the second waits for the first,
# then finds the library built.
exec 9>"$prefix/.lock"
flock 9
if [ -f "$stamp" ] && [ -f "$prefix/lib/libjemalloc_pic.a" ]; then
  exit 0
fi

fail() {
  echo "build-jemalloc.sh: $*" >&2
  exit 1
}
have_tarball() {
  [ -f "$tarball" ] && echo "$sha256  $tarball" | sha256sum -c --quiet - >/dev/null 2>&1
}

if ! have_tarball; then
  echo "jemalloc: fetching $url"
  rm -f "$tarball.part"
  if command -v curl >/dev/null; then
    curl -fsSL --retry 3 -o "$tarball.part" "$url" || fail "download failed: $url"
  elif command -v wget >/dev/null; then
    wget -q -O "$tarball.part" "$url" || fail "download failed: $url"
  else
    python3 -c 'import sys, urllib.request as r; r.urlretrieve(sys.argv[1], sys.argv[2])' \
      "$url" "$tarball.part" || fail "download failed: $url"
  fi
  echo "$sha256  $tarball.part" | sha256sum -c --quiet - ||
    fail "$url: SHA-256 is not $sha256"
  mv "$tarball.part" "$tarball"
fi

echo "jemalloc: building 5.3.0 in $work (once, about a minute)"
rm -rf jemalloc-5.3.0
tar xf "$tarball"
cd jemalloc-5.3.0
# The logs are long; on failure their tail says why.
run_logged() {
  local log=$1
  shift
  "$@" >"$log" 2>&1 || {
    tail -n 40 "$log" >&2
    fail "'$*' failed; full log: $log"
  }
}
run_logged "$work/jemalloc-configure.log" env EXTRA_CFLAGS="-fvisibility=hidden" \
  ./configure \
  --disable-initial-exec-tls \
  --with-jemalloc-prefix=sdje_ \
  --without-export \
  --with-private-namespace=sdje_internal_ \
  --disable-cache-oblivious \
  --disable-cxx
# Only the PIC archive: it goes into a shared library.
run_logged "$work/jemalloc-build.log" make -j"$(nproc)" lib/libjemalloc_pic.a
cp lib/libjemalloc_pic.a "$prefix/lib/"
cp include/jemalloc/jemalloc.h "$prefix/include/jemalloc/"
touch "$stamp"
echo "jemalloc 5.3.0 (sdje_ prefix, no initial-exec TLS) -> $prefix"
