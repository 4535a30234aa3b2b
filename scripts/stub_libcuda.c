/* A stand-in for libcuda.so.1, for timing the runtime's launch path on a machine without a
   GPU (scripts/host_time.py --stub-driver): the cuda-bindings calls a launch makes run their
   Python-side conversions as on a GPU, and the driver does nothing. One context, always
   current; launches succeed without running anything. Build:
   cc -O2 -shared -fPIC -Wl,-soname,libcuda.so.1 -o libcuda_stub.so stub_libcuda.c -ldl */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>

typedef int CUresult;
enum { CUDA_SUCCESS = 0, CUDA_ERROR_NOT_SUPPORTED = 801 };

static void *current_context = (void *)0x5678;

CUresult cuInit(unsigned flags) { return CUDA_SUCCESS; }
CUresult cuDriverGetVersion(int *version) { *version = 13000; return CUDA_SUCCESS; }
CUresult cuCtxGetCurrent(void **context) { *context = current_context; return CUDA_SUCCESS; }
CUresult cuCtxPushCurrent_v2(void *context) { current_context = context; return CUDA_SUCCESS; }
CUresult cuCtxPopCurrent_v2(void **context) {
  if (context) *context = current_context;
  return CUDA_SUCCESS;
}
CUresult cuLaunchKernel(void *function, unsigned grid_x, unsigned grid_y, unsigned grid_z,
                        unsigned block_x, unsigned block_y, unsigned block_z, unsigned shared_bytes,
                        void *stream, void **params, void **extra) {
  return CUDA_SUCCESS;
}
CUresult cuGetErrorString(int status, const char **text) { *text = "stub"; return CUDA_SUCCESS; }
CUresult cuGetErrorName(int status, const char **text) { *text = "stub"; return CUDA_SUCCESS; }

static CUresult not_supported(void) { return CUDA_ERROR_NOT_SUPPORTED; }

/* The bindings find every entry point through here: this library's own symbol, or one
   that answers "not supported". */
CUresult cuGetProcAddress_v2(const char *symbol, void **function, int version, uint64_t flags,
                             int *status) {
  Dl_info self;
  dladdr((void *)cuGetProcAddress_v2, &self);
  void *found = dlsym(dlopen(self.dli_fname, RTLD_NOW | RTLD_NOLOAD), symbol);
  *function = found ? found : (void *)not_supported;
  if (status) *status = 0;
  return CUDA_SUCCESS;
}
CUresult cuGetProcAddress(const char *symbol, void **function, int version, uint64_t flags) {
  return cuGetProcAddress_v2(symbol, function, version, flags, NULL);
}
