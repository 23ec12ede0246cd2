/*
 * mutant_leak_stream.c - destroy_stream that releases nothing.
 *
 * Peer: "create/destroy pairs that leak", one of the anti-patterns common to
 * the peers (notes/peers.md), not tied to one plugin. Here the stream's
 * worker thread, its queue and its handle all leak. TF 2.21 itself keeps the
 * streams it creates (StreamGroupFactory never destroys them); any other host
 * of the plugin that creates and destroys streams (tools, tests, this
 * harness) accumulates threads.
 *
 * Expected grade: recommended failure "stream.destroy_releases" (callback
 * destroy_stream); result "pass".
 */
#include "mini.h"

static void destroy_nothing(const SP_Device* device, SP_Stream stream) {}

static void mutate_se(SP_StreamExecutor* se) {
  se->destroy_stream = destroy_nothing;
}

void mini_mutate(SE_PlatformRegistrationParams* params) {
  mini_mutate_se = mutate_se;
}
