/*
 * fakeffi.c - the hand-built XLA FFI of fakeffi.h.
 *
 * Errors and futures are plain heap objects; a future's mutex orders the
 * completing thread's writes before the waiter's reads (helgrind sees the
 * edge). Live counts let tests check that every error a handler made was
 * handed over (returned, or given to a future) and nothing leaked.
 */
#include "fakeffi.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Seconds a test waits for a future before calling it lost. Generous:
 * helgrind makes everything 100x slower. */
#define FF_TIMEOUT_S 300

#define FF_PT(call)                                                        \
  do {                                                                     \
    int rc_ = (call);                                                      \
    if (rc_ != 0) {                                                        \
      fprintf(stderr, "%s:%d: %s failed: %d\n", __FILE__, __LINE__, #call, \
              rc_);                                                        \
      abort();                                                             \
    }                                                                      \
  } while (0)

struct XLA_FFI_Error {
  XLA_FFI_Error_Code code;
  char* msg;
};

struct XLA_FFI_Future {
  pthread_mutex_t mu; /* guards the fields below */
  pthread_cond_t cv;
  int sets; /* SetAvailable + SetError calls: must end up 1 */
  XLA_FFI_Error_Code code;
  char msg[1024];
  char completer[32];
};

static pthread_mutex_t live_mu = PTHREAD_MUTEX_INITIALIZER;
static int live_errors, live_futures; /* guarded by live_mu */
static void (*cont_fn)(void*);        /* guarded by live_mu */
static void* cont_arg;
static void (*create_fn)(void*); /* guarded by live_mu */
static void* create_arg;

void ff_set_create_hook(void (*fn)(void*), void* arg) {
  FF_PT(pthread_mutex_lock(&live_mu));
  create_fn = fn;
  create_arg = arg;
  FF_PT(pthread_mutex_unlock(&live_mu));
}

void ff_set_continuation(void (*fn)(void*), void* arg) {
  FF_PT(pthread_mutex_lock(&live_mu));
  cont_fn = fn;
  cont_arg = arg;
  FF_PT(pthread_mutex_unlock(&live_mu));
}

static void live_add(int* counter, int d) {
  FF_PT(pthread_mutex_lock(&live_mu));
  *counter += d;
  FF_PT(pthread_mutex_unlock(&live_mu));
}
int ff_live_errors(void) {
  FF_PT(pthread_mutex_lock(&live_mu));
  int n = live_errors;
  FF_PT(pthread_mutex_unlock(&live_mu));
  return n;
}
int ff_live_futures(void) {
  FF_PT(pthread_mutex_lock(&live_mu));
  int n = live_futures;
  FF_PT(pthread_mutex_unlock(&live_mu));
  return n;
}

/* ---- the API ------------------------------------------------------------- */

static XLA_FFI_Error* error_create(XLA_FFI_Error_Create_Args* a) {
  if (a->struct_size < XLA_FFI_Error_Create_Args_STRUCT_SIZE) abort();
  XLA_FFI_Error* e = malloc(sizeof(*e));
  if (e == NULL) abort();
  e->code = a->errc;
  e->msg = strdup(a->message ? a->message : "");
  if (e->msg == NULL) abort();
  live_add(&live_errors, 1);
  return e;
}

static void error_get_message(XLA_FFI_Error_GetMessage_Args* a) {
  a->message = a->error->msg;
}

static void error_destroy(XLA_FFI_Error_Destroy_Args* a) {
  free(a->error->msg);
  free(a->error);
  live_add(&live_errors, -1);
}

static XLA_FFI_Error* future_create(XLA_FFI_Future_Create_Args* a) {
  if (a->struct_size < XLA_FFI_Future_Create_Args_STRUCT_SIZE) abort();
  FF_PT(pthread_mutex_lock(&live_mu));
  void (*hook)(void*) = create_fn;
  void* hook_arg = create_arg;
  create_fn = NULL;
  FF_PT(pthread_mutex_unlock(&live_mu));
  if (hook != NULL) hook(hook_arg);
  XLA_FFI_Future* f = calloc(1, sizeof(*f));
  if (f == NULL) abort();
  FF_PT(pthread_mutex_init(&f->mu, NULL));
  FF_PT(pthread_cond_init(&f->cv, NULL));
  live_add(&live_futures, 1);
  a->future = f;
  return NULL;
}

static void future_complete(XLA_FFI_Future* f, XLA_FFI_Error* e) {
  char name[32] = "";
  pthread_getname_np(pthread_self(), name, sizeof(name));
  FF_PT(pthread_mutex_lock(&f->mu));
  f->sets++;
  f->code = e ? e->code : XLA_FFI_Error_Code_OK;
  snprintf(f->msg, sizeof(f->msg), "%s", e ? e->msg : "");
  snprintf(f->completer, sizeof(f->completer), "%s", name);
  FF_PT(pthread_cond_broadcast(&f->cv));
  FF_PT(pthread_mutex_unlock(&f->mu));
  FF_PT(pthread_mutex_lock(&live_mu));
  void (*fn)(void*) = cont_fn;
  void* arg = cont_arg;
  cont_fn = NULL;
  FF_PT(pthread_mutex_unlock(&live_mu));
  if (fn != NULL) fn(arg);
}

static XLA_FFI_Error* future_set_available(
    XLA_FFI_Future_SetAvailable_Args* a) {
  if (a->struct_size < XLA_FFI_Future_SetAvailable_Args_STRUCT_SIZE) abort();
  future_complete(a->future, NULL);
  return NULL;
}

static XLA_FFI_Error* future_set_error(XLA_FFI_Future_SetError_Args* a) {
  if (a->struct_size < XLA_FFI_Future_SetError_Args_STRUCT_SIZE) abort();
  if (a->error == NULL || a->error->code == XLA_FFI_Error_Code_OK) abort();
  future_complete(a->future, a->error);
  XLA_FFI_Error_Destroy_Args d = {XLA_FFI_Error_Destroy_Args_STRUCT_SIZE, NULL,
                                  a->error};
  error_destroy(&d); /* the runtime owns it now */
  return NULL;
}

const XLA_FFI_Api ff_api = {
    .struct_size = XLA_FFI_Api_STRUCT_SIZE,
    .api_version = {XLA_FFI_Api_Version_STRUCT_SIZE, NULL, XLA_FFI_API_MAJOR,
                    XLA_FFI_API_MINOR},
    .XLA_FFI_Error_Create = error_create,
    .XLA_FFI_Error_GetMessage = error_get_message,
    .XLA_FFI_Error_Destroy = error_destroy,
    .XLA_FFI_Future_Create = future_create,
    .XLA_FFI_Future_SetAvailable = future_set_available,
    .XLA_FFI_Future_SetError = future_set_error,
};

/* ---- frames -------------------------------------------------------------- */

void ff_init(ff_frame* f) {
  memset(f, 0, sizeof(*f));
  f->cf.struct_size = XLA_FFI_CallFrame_STRUCT_SIZE;
  f->cf.api = &ff_api;
  f->cf.stage = XLA_FFI_ExecutionStage_EXECUTE;
}

static XLA_FFI_Buffer* buf(XLA_FFI_Buffer* b, int64_t* dims_store,
                           XLA_FFI_DataType dt, void* data, int rank,
                           const int64_t* dims) {
  if (rank > FF_MAX_RANK) abort();
  if (rank > 0) memcpy(dims_store, dims, (size_t)rank * sizeof(int64_t));
  *b = (XLA_FFI_Buffer){
      XLA_FFI_Buffer_STRUCT_SIZE, NULL, dt, data, rank, dims_store};
  return b;
}

XLA_FFI_Buffer* ff_arg(ff_frame* f, XLA_FFI_DataType dt, void* data, int rank,
                       const int64_t* dims) {
  int i = f->nargs++;
  f->atypes[i] = XLA_FFI_ArgType_BUFFER;
  return buf(&f->abufs[i], f->adims[i], dt, data, rank, dims);
}

XLA_FFI_Buffer* ff_ret(ff_frame* f, XLA_FFI_DataType dt, void* data, int rank,
                       const int64_t* dims) {
  int i = f->nrets++;
  f->rtypes[i] = XLA_FFI_RetType_BUFFER;
  return buf(&f->rbufs[i], f->rdims[i], dt, data, rank, dims);
}

static struct ff_attr* attr(ff_frame* f, const char* name, XLA_FFI_AttrType t) {
  if (f->nattrs == FF_MAX) abort();
  struct ff_attr* a = &f->at[f->nattrs++];
  memset(a, 0, sizeof(*a));
  snprintf(a->name, sizeof(a->name), "%s", name);
  a->type = t;
  return a;
}

static void scalar(ff_frame* f, const char* name, XLA_FFI_DataType dt,
                   const void* v, size_t size) {
  struct ff_attr* a = attr(f, name, XLA_FFI_AttrType_SCALAR);
  a->scalar.dtype = dt;
  memcpy(a->value, v, size);
}

void ff_attr_bool(ff_frame* f, const char* name, bool v) {
  uint8_t b = v;
  scalar(f, name, XLA_FFI_DataType_PRED, &b, 1);
}
void ff_attr_f32(ff_frame* f, const char* name, float v) {
  scalar(f, name, XLA_FFI_DataType_F32, &v, sizeof(v));
}
void ff_attr_i64(ff_frame* f, const char* name, int64_t v) {
  scalar(f, name, XLA_FFI_DataType_S64, &v, sizeof(v));
}
void ff_attr_str(ff_frame* f, const char* name, const char* v) {
  struct ff_attr* a = attr(f, name, XLA_FFI_AttrType_STRING);
  /* Not NUL-terminated in XLA either: copy without the NUL, pad with 'X'
   * so a handler reading past len sees garbage, not a terminator. */
  size_t n = strlen(v);
  if (n >= sizeof(a->strbuf)) abort();
  memset(a->strbuf, 'X', sizeof(a->strbuf));
  memcpy(a->strbuf, v, n);
  a->str.len = n;
}
void ff_attr_array(ff_frame* f, const char* name, XLA_FFI_DataType dt, int n,
                   const void* v, size_t elem_size) {
  struct ff_attr* a = attr(f, name, XLA_FFI_AttrType_ARRAY);
  if ((size_t)n * elem_size > sizeof(a->arr)) abort();
  a->array.dtype = dt;
  a->array.size = (size_t)n;
  memcpy(a->arr, v, (size_t)n * elem_size);
}
void ff_attr_i64s(ff_frame* f, const char* name, int n, const int64_t* v) {
  ff_attr_array(f, name, XLA_FFI_DataType_S64, n, v, sizeof(int64_t));
}

void ff_attr_remove(ff_frame* f, const char* name) {
  for (int i = 0; i < f->nattrs; i++)
    if (strcmp(f->at[i].name, name) == 0) {
      memmove(&f->at[i], &f->at[i + 1],
              (size_t)(f->nattrs - i - 1) * sizeof(f->at[0]));
      f->nattrs--;
      return;
    }
  abort(); /* a test removing what it never added is broken */
}

/* Sorts the attributes by name (as XLA does) and points the frame at
 * everything. */
static void finish(ff_frame* f) {
  for (int i = 1; i < f->nattrs; i++)
    for (int j = i; j > 0 && strcmp(f->at[j - 1].name, f->at[j].name) > 0;
         j--) {
      struct ff_attr t = f->at[j];
      f->at[j] = f->at[j - 1];
      f->at[j - 1] = t;
    }
  for (int i = 0; i < f->nattrs; i++) {
    struct ff_attr* a = &f->at[i];
    a->span = (XLA_FFI_ByteSpan){a->name, strlen(a->name)};
    f->attypes[i] = a->type;
    f->atnames[i] = &a->span;
    switch (a->type) {
      case XLA_FFI_AttrType_SCALAR:
        a->scalar.value = a->value;
        f->atvals[i] = &a->scalar;
        break;
      case XLA_FFI_AttrType_ARRAY:
        a->array.data = a->arr;
        f->atvals[i] = &a->array;
        break;
      case XLA_FFI_AttrType_STRING:
        a->str.ptr = a->strbuf;
        f->atvals[i] = &a->str;
        break;
      default: abort();
    }
  }
  for (int i = 0; i < f->nargs; i++) f->args[i] = &f->abufs[i];
  for (int i = 0; i < f->nrets; i++) f->rets[i] = &f->rbufs[i];
  f->cf.args = (XLA_FFI_Args){XLA_FFI_Args_STRUCT_SIZE, NULL, f->nargs,
                              f->atypes, f->args};
  f->cf.rets = (XLA_FFI_Rets){XLA_FFI_Rets_STRUCT_SIZE, NULL, f->nrets,
                              f->rtypes, f->rets};
  f->cf.attrs = (XLA_FFI_Attrs){XLA_FFI_Attrs_STRUCT_SIZE,
                                NULL,
                                f->nattrs,
                                f->attypes,
                                f->atnames,
                                f->atvals};
  f->cf.future = NULL;
}

/* ---- calls --------------------------------------------------------------- */

XLA_FFI_Future* ff_call_async(XLA_FFI_Handler* h, ff_frame* f,
                              XLA_FFI_Error_Code* err) {
  finish(f);
  XLA_FFI_Error* e = h(&f->cf);
  *err = XLA_FFI_Error_Code_OK;
  if (e != NULL) {
    /* XLA: an error must not come with a future. */
    assert_null(f->cf.future);
    *err = e->code;
    XLA_FFI_Error_Destroy_Args d = {XLA_FFI_Error_Destroy_Args_STRUCT_SIZE,
                                    NULL, e};
    error_destroy(&d);
    return NULL;
  }
  return f->cf.future;
}

int ff_is_complete(XLA_FFI_Future* fut) {
  FF_PT(pthread_mutex_lock(&fut->mu));
  int done = fut->sets > 0;
  FF_PT(pthread_mutex_unlock(&fut->mu));
  return done;
}

int ff_wait_quiet(XLA_FFI_Future* fut, ff_result* r) {
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += FF_TIMEOUT_S;
  int rc = 0;
  FF_PT(pthread_mutex_lock(&fut->mu));
  while (fut->sets == 0 && rc != ETIMEDOUT)
    rc = pthread_cond_timedwait(&fut->cv, &fut->mu, &until);
  int sets = fut->sets;
  r->code = fut->code;
  snprintf(r->msg, sizeof(r->msg), "%s", fut->msg);
  snprintf(r->completer, sizeof(r->completer), "%s", fut->completer);
  FF_PT(pthread_mutex_unlock(&fut->mu));
  if (sets == 0) return -1; /* lost: leave it, a late completion is safe */
  r->had_future = true;
  FF_PT(pthread_cond_destroy(&fut->cv));
  FF_PT(pthread_mutex_destroy(&fut->mu));
  free(fut);
  live_add(&live_futures, -1);
  return sets == 1 ? 0 : -1;
}

void ff_wait(XLA_FFI_Future* fut, ff_result* r) {
  if (ff_wait_quiet(fut, r) != 0)
    fail_msg("future not completed in %d s, or completed twice", FF_TIMEOUT_S);
}

ff_result ff_call(XLA_FFI_Handler* h, ff_frame* f) {
  ff_result r;
  memset(&r, 0, sizeof(r));
  finish(f);
  XLA_FFI_Error* e = h(&f->cf);
  if (e != NULL) {
    assert_null(f->cf.future);
    r.code = e->code;
    r.returned_error = true;
    snprintf(r.msg, sizeof(r.msg), "%s", e->msg);
    XLA_FFI_Error_Destroy_Args d = {XLA_FFI_Error_Destroy_Args_STRUCT_SIZE,
                                    NULL, e};
    error_destroy(&d);
    return r;
  }
  if (f->cf.future != NULL) ff_wait(f->cf.future, &r);
  return r;
}

bool ff_metadata(XLA_FFI_Handler* h, int* major, int* minor,
                 uint32_t* traits_after, int64_t* type_id_after) {
  XLA_FFI_Metadata md;
  memset(&md, 0, sizeof(md));
  md.struct_size = XLA_FFI_Metadata_STRUCT_SIZE;
  md.api_version.struct_size = XLA_FFI_Api_Version_STRUCT_SIZE;
  md.api_version.major_version = -1;
  md.api_version.minor_version = -1;
  md.traits = 0xa5a5u; /* sentinels: the handler must leave them alone */
  md.state_type_id.type_id = 77;
  XLA_FFI_Metadata_Extension ext = {{XLA_FFI_Metadata_Extension_STRUCT_SIZE,
                                     XLA_FFI_Extension_Metadata, NULL},
                                    &md};
  XLA_FFI_CallFrame cf;
  memset(&cf, 0, sizeof(cf));
  cf.struct_size = XLA_FFI_CallFrame_STRUCT_SIZE;
  cf.extension_start = &ext.extension_base;
  cf.api = NULL; /* must not be touched: a call through it would crash */
  cf.stage = XLA_FFI_ExecutionStage_EXECUTE;
  XLA_FFI_Error* e = h(&cf);
  *major = md.api_version.major_version;
  *minor = md.api_version.minor_version;
  *traits_after = md.traits;
  *type_id_after = md.state_type_id.type_id;
  return e == NULL && cf.future == NULL;
}

void ff_assert_error_at(const ff_result* r, XLA_FFI_Error_Code code,
                        const char* prefix, const char* want, const char* file,
                        int line) {
  if (r->code != code || strncmp(r->msg, prefix, strlen(prefix)) != 0 ||
      strstr(r->msg, want) == NULL) {
    print_error(
        "expected code %d and a message starting with '%s' that "
        "contains '%s'; got code %d: '%s'\n",
        (int)code, prefix, want, (int)r->code, r->msg);
    _fail(file, line);
  }
}

void ff_conv_attrs(ff_frame* f, int64_t sh, int64_t sw, int64_t dh, int64_t dw,
                   const char* padding, const int64_t* pads) {
  static const int64_t zeros[4] = {0, 0, 0, 0};
  int64_t s[2] = {sh, sw}, d[2] = {dh, dw};
  ff_attr_i64s(f, "strides", 2, s);
  ff_attr_i64s(f, "dilations", 2, d);
  ff_attr_str(f, "padding", padding);
  ff_attr_i64s(f, "explicit_paddings", 4, pads ? pads : zeros);
}

/* ---- misc ---------------------------------------------------------------- */

int ff_teardown_shutdown(void** state) {
  (void)state;
  simdev_xla_shutdown();
  return 0;
}

int ff_scale(void) {
  const char* s = getenv("SIMDEV_TEST_SCALE");
  long v = s ? strtol(s, NULL, 10) : 1;
  return v < 1 ? 1 : (int)v;
}

void ff_fill(void* p, XLA_FFI_DataType dt, int64_t n, uint64_t* seed) {
  for (int64_t i = 0; i < n; i++) {
    *seed = *seed * 6364136223846793005ull + 1442695040888963407ull;
    /* 24 bits: exact in float, in [-1, 1) */
    double v = (double)(int32_t)((*seed >> 40) & 0xffffff) / (1 << 23) - 1.0;
    if (dt == XLA_FFI_DataType_F32)
      ((float*)p)[i] = (float)v;
    else
      ((double*)p)[i] = v;
  }
}
