#!/bin/sh
# Runs one sanitized test (see sanitize.cmake) with address-space layout
# randomisation off when the system lets us: gcc 12's ASan cannot place its
# shadow memory under the 32-bit mmap randomisation some kernels use
# (vm.mmap_rnd_bits=32, google/sanitizers#1614) and then loops on
# "AddressSanitizer:DEADLYSIGNAL" before main - a failure that depends on
# where the kernel put the libraries, not on the code. Processes the test
# starts (the conformance harness's children) inherit the setting. Where
# personality() is refused (some container seccomp profiles), the test runs
# as is.
arch=$(uname -m)
if setarch "$arch" -R true 2>/dev/null; then
  exec setarch "$arch" -R "$@"
fi
exec "$@"
