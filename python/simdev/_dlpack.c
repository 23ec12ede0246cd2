/*
 * _dlpack.c - simdev._dlpack: the DLPack capsules of simdev.dlpack.
 *
 * The plugin's ops trade managed tensors as int64 addresses; Python's DLPack
 * protocol trades them as PyCapsules. A capsule must be able to delete an
 * unconsumed tensor from its destructor, which has to be C: a Python or
 * ctypes destructor may run during interpreter shutdown, after the objects
 * it needs are gone. So this module is the only C the Python package has:
 *
 *   wrap(address, versioned) -> capsule "dltensor" / "dltensor_versioned"
 *       whose destructor calls the deleter unless a consumer renamed it
 *       "used_dltensor" / "used_dltensor_versioned" (the protocol's rule).
 *   info(capsule) -> (address, versioned, (code, bits, lanes),
 *                     (device_type, device_id), read_only)
 *       of an unconsumed capsule; TypeError for a foreign object or name,
 *       BufferError for one already consumed.
 *   consume(capsule)
 *       marks it used: ownership moved to whoever got the address.
 *
 * Threads: called with the GIL held, like every CPython function.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#include "dlpack/dlpack.h"

static const char kLegacy[] = "dltensor";
static const char kVersioned[] = "dltensor_versioned";
static const char kUsedLegacy[] = "used_dltensor";
static const char kUsedVersioned[] = "used_dltensor_versioned";

/* Runs when the capsule dies: an unconsumed tensor is still the capsule's
 * to delete. Must not disturb a pending exception. */
static void capsule_destructor(PyObject* cap) {
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  if (PyCapsule_IsValid(cap, kLegacy)) {
    DLManagedTensor* m = PyCapsule_GetPointer(cap, kLegacy);
    if (m != NULL && m->deleter != NULL) m->deleter(m);
  } else if (PyCapsule_IsValid(cap, kVersioned)) {
    struct DLManagedTensorVersioned* m = PyCapsule_GetPointer(cap, kVersioned);
    if (m != NULL && m->deleter != NULL) m->deleter(m);
  }
  PyErr_Restore(type, value, tb);
}

static PyObject* wrap(PyObject* self, PyObject* args) {
  (void)self;
  unsigned long long address;
  int versioned;
  if (!PyArg_ParseTuple(args, "Kp", &address, &versioned)) return NULL;
  if (address == 0) {
    PyErr_SetString(PyExc_ValueError, "simdev.dlpack: NULL managed tensor");
    return NULL;
  }
  void* p = (void*)(uintptr_t)address;
  PyObject* cap = PyCapsule_New(p, versioned ? kVersioned : kLegacy,
                                capsule_destructor);
  if (cap == NULL) { /* nobody else will ever delete it */
    if (versioned) {
      struct DLManagedTensorVersioned* m = p;
      if (m->deleter != NULL) m->deleter(m);
    } else {
      DLManagedTensor* m = p;
      if (m->deleter != NULL) m->deleter(m);
    }
  }
  return cap;
}

/* The capsule's tensor, or NULL with an exception set. */
static void* unconsumed(PyObject* cap, int* versioned) {
  if (!PyCapsule_CheckExact(cap)) {
    PyErr_Format(PyExc_TypeError,
                 "simdev.dlpack: expected a DLPack capsule, got %s",
                 Py_TYPE(cap)->tp_name);
    return NULL;
  }
  const char* name = PyCapsule_GetName(cap);
  if (name == NULL && PyErr_Occurred()) return NULL;
  if (name != NULL && (strcmp(name, kUsedLegacy) == 0 ||
                       strcmp(name, kUsedVersioned) == 0)) {
    PyErr_SetString(PyExc_BufferError,
                    "simdev.dlpack: this DLPack capsule was already consumed");
    return NULL;
  }
  if (name == NULL ||
      (strcmp(name, kLegacy) != 0 && strcmp(name, kVersioned) != 0)) {
    PyErr_Format(PyExc_TypeError,
                 "simdev.dlpack: capsule named '%s' is not a DLPack tensor "
                 "('dltensor' or 'dltensor_versioned')",
                 name ? name : "(null)");
    return NULL;
  }
  *versioned = strcmp(name, kVersioned) == 0;
  void* p = PyCapsule_GetPointer(cap, name);
  if (p == NULL) {
    if (!PyErr_Occurred())
      PyErr_SetString(PyExc_ValueError,
                      "simdev.dlpack: DLPack capsule holds NULL");
    return NULL;
  }
  return p;
}

static PyObject* info(PyObject* self, PyObject* cap) {
  (void)self;
  int versioned = 0;
  void* p = unconsumed(cap, &versioned);
  if (p == NULL) return NULL;
  const DLTensor* t;
  int read_only = 0;
  if (versioned) {
    const struct DLManagedTensorVersioned* m = p;
    t = &m->dl_tensor;
    read_only = (m->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0;
  } else {
    t = &((const DLManagedTensor*)p)->dl_tensor;
  }
  return Py_BuildValue("(Ki(iii)(ii)i)", (unsigned long long)(uintptr_t)p,
                       versioned, (int)t->dtype.code, (int)t->dtype.bits,
                       (int)t->dtype.lanes, (int)t->device.device_type,
                       (int)t->device.device_id, read_only);
}

static PyObject* consume(PyObject* self, PyObject* cap) {
  (void)self;
  int versioned = 0;
  if (unconsumed(cap, &versioned) == NULL) return NULL;
  if (PyCapsule_SetName(cap, versioned ? kUsedVersioned : kUsedLegacy) != 0)
    return NULL;
  Py_RETURN_NONE;
}

static PyMethodDef kMethods[] = {
    {"wrap", wrap, METH_VARARGS,
     "wrap(address, versioned) -> DLPack capsule owning the managed tensor"},
    {"info", info, METH_O,
     "info(capsule) -> (address, versioned, dtype, device, read_only)"},
    {"consume", consume, METH_O, "consume(capsule): mark it used"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef kModule = {
    PyModuleDef_HEAD_INIT, "simdev._dlpack",
    "DLPack capsules for simdev.dlpack (see simdev/dlpack.py).", -1, kMethods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__dlpack(void);
PyMODINIT_FUNC PyInit__dlpack(void) { return PyModule_Create(&kModule); }
