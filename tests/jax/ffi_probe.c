/*
 * ffi_probe.c - test-only typed-FFI handlers that answer XLA's metadata
 * request wrongly, which jaxlib 0.10.2 (API 0.3) must refuse:
 *   probe_badver  answers API version 1.0 (a newer major version);
 *   probe_noans   does not answer at all (returns NULL, the version left
 *                 at 0.0), as a handler that ignores the metadata call does.
 * Built with cc by tests/jax/test_jax_docs.py against jaxlib's c_api.h, to
 * pin what docs/xla-custom-calls.md says about the handshake. Neither is
 * ever executed: XLA refuses them at registration.
 */
#include <stddef.h>

#include "xla/ffi/api/c_api.h"

XLA_FFI_Error* probe_badver(XLA_FFI_CallFrame* frame);
XLA_FFI_Error* probe_noans(XLA_FFI_CallFrame* frame);

XLA_FFI_Error* probe_badver(XLA_FFI_CallFrame* frame) {
  XLA_FFI_Extension_Base* ext = frame->extension_start;
  if (ext != NULL && ext->type == XLA_FFI_Extension_Metadata) {
    XLA_FFI_Metadata* md = ((XLA_FFI_Metadata_Extension*)ext)->metadata;
    md->api_version.major_version = 1;
    md->api_version.minor_version = 0;
  }
  return NULL;
}

XLA_FFI_Error* probe_noans(XLA_FFI_CallFrame* frame) {
  (void)frame;
  return NULL;
}
