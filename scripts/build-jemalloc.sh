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
# Usage: scripts/build-jemalloc.sh [PREFIX]   (default: .deps/jemalloc)
# Idempotent: returns at once if PREFIX already holds the library.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
prefix=${1:-$root/.deps/jemalloc}
stamp=$prefix/.simdev-jemalloc-5.3.0-2
if [ -f "$stamp" ] && [ -f "$prefix/lib/libjemalloc_pic.a" ]; then
  exit 0
fi
work=$root/.deps/src
mkdir -p "$work" "$prefix/lib" "$prefix/include/jemalloc"
cd "$work"
if ! ls jemalloc_5.3.0.orig.tar.* >/dev/null 2>&1; then
  # Needs a deb-src entry; scripts/setup-system.sh adds one.
  apt-get source --download-only jemalloc=5.3.0-1 >/dev/null 2>&1 ||
    apt-get source --download-only jemalloc >/dev/null
fi
rm -rf jemalloc-5.3.0
tar xf jemalloc_5.3.0.orig.tar.*
cd jemalloc-5.3.0
EXTRA_CFLAGS="-fvisibility=hidden" ./configure \
  --disable-initial-exec-tls \
  --with-jemalloc-prefix=sdje_ \
  --without-export \
  --with-private-namespace=sdje_internal_ \
  --disable-cache-oblivious \
  --disable-cxx >"$work/jemalloc-configure.log" 2>&1
make -j"$(nproc)" build_lib_static >"$work/jemalloc-build.log" 2>&1
cp lib/libjemalloc_pic.a "$prefix/lib/"
cp include/jemalloc/jemalloc.h "$prefix/include/jemalloc/"
touch "$stamp"
echo "jemalloc 5.3.0 (sdje_ prefix, no initial-exec TLS) -> $prefix"
