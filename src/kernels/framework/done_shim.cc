// done_shim.cc - keeps TF's async-kernel `done` callback alive past
// compute_async. The one C++ file in simdev, and why it exists:
//
// TF 2.21's CAsyncOpKernel::ComputeAsync(ctx, AsyncOpKernelDoneCallback done)
// passes compute_async `reinterpret_cast<TF_AsyncOpKernelDoneCallback*>(&done)`:
// the address of its by-value std::function<void()> parameter, which is
// destroyed when ComputeAsync returns. Calling it later (the point of an
// async kernel) jumps through freed stack. So, while it is still alive, we
// copy the callback (a std::function copy: same libstdc++ ABI as TF) and run
// the copy when the work has finished.
#include <functional>
#include <new>

using DoneCallback = std::function<void()>;

extern "C" {

// Copies the callback behind TF's pointer; NULL if out of memory.
__attribute__((visibility("hidden"))) void* sk_done_take(void* tf_done) {
  try {
    return new DoneCallback(*static_cast<DoneCallback*>(tf_done));
  } catch (...) {
    return nullptr;
  }
}

// Runs a copy made by sk_done_take, then frees it.
__attribute__((visibility("hidden"))) void sk_done_run(void* taken) {
  DoneCallback* d = static_cast<DoneCallback*>(taken);
  (*d)();
  delete d;
}

}  // extern "C"
