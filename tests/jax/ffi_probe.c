/*
 * ffi_probe.c - a test-only typed-FFI handler that answers XLA's metadata
 * request with API version 1.0, which jaxlib 0.10.2 (API 0.3) must refuse.
 * Built with cc by tests/jax/test_jax_docs.py against jaxlib's c_api.h, to
 * pin what docs/xla-custom-calls.md says about the handshake.
 */
#include <stddef.h>

#include "xla/ffi/api/c_api.h"

XLA_FFI_Error* probe_badver(XLA_FFI_CallFrame* frame);

XLA_FFI_Error* probe_badver(XLA_FFI_CallFrame* frame) {
  XLA_FFI_Extension_Base* ext = frame->extension_start;
  if (ext != NULL && ext->type == XLA_FFI_Extension_Metadata) {
    XLA_FFI_Metadata* md = ((XLA_FFI_Metadata_Extension*)ext)->metadata;
    md->api_version.major_version = 1;
    md->api_version.minor_version = 0;
  }
  return NULL; /* never executed: the registration is refused */
}
