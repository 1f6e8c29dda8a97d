#include "backend/cuda/gemm.h"

#include <cublas_v2.h>
#include <dlfcn.h>

#include <type_traits>

#include "backend/cuda/check.h"
#include "common/error.h"

namespace loom::backend::cuda {

struct Gemm::Api {
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasDestroy_v2) destroy = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  decltype(&cublasSetWorkspace_v2) set_workspace = nullptr;
  using GemmEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                                   const void*, cudaDataType, int, const void*, cudaDataType, int, const void*, void*,
                                   cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
  GemmEx gemm = nullptr;
  std::string error;

  Api() {
    void* lib = nullptr;
    for (const char* name : {"libcublas.so.13", "libcublas.so.12", "libcublas.so"})
      if ((lib = dlopen(name, RTLD_NOW | RTLD_LOCAL))) break;
    if (!lib) {
      error = "cuBLAS (libcublas.so) is not on the library path";
      return;
    }
    bool ok = true;
    auto sym = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
      ok = ok && fn;
    };
    sym(create, "cublasCreate_v2");
    sym(destroy, "cublasDestroy_v2");
    sym(set_stream, "cublasSetStream_v2");
    sym(set_workspace, "cublasSetWorkspace_v2");
    sym(gemm, "cublasGemmEx");
    if (!ok) error = "libcublas lacks cublasGemmEx or its handle calls";
  }
};

namespace {
constexpr size_t kWorkspaceBytes = size_t(32) << 20;  // our own, so graph capture never allocates

void check(cublasStatus_t st, const char* what) {
  if (st != CUBLAS_STATUS_SUCCESS) loom::fail("cuBLAS: {} failed with status {}", what, int(st));
}
}  // namespace

std::unique_ptr<Gemm> Gemm::open(cudaStream_t stream, std::string& why) {
  static const Api api;
  if (!api.error.empty()) {
    why = api.error;
    return nullptr;
  }
  std::unique_ptr<Gemm> g(new Gemm);
  g->api_ = &api;
  cublasHandle_t h = nullptr;
  check(api.create(&h), "cublasCreate");
  g->handle_ = h;
  check(api.set_stream(h, stream), "cublasSetStream");
  g->workspace_ = DeviceBuffer(kWorkspaceBytes);
  check(api.set_workspace(h, g->workspace_.get(), kWorkspaceBytes), "cublasSetWorkspace");
  return g;
}

Gemm::~Gemm() {
  if (handle_) api_->destroy(static_cast<cublasHandle_t>(handle_));
}

void Gemm::f16(const __half* w, const __half* x, int64_t N, int64_t T, int64_t K, float* y, int64_t ldy) {
  // Column-major view: y^T (N x T, ld ldy) = W^T' (W row-major N x K is K x N column-major)
  // times x (T x K row-major is K x T column-major).
  const float one = 1.f, zero = 0.f;
  check(api_->gemm(static_cast<cublasHandle_t>(handle_), CUBLAS_OP_T, CUBLAS_OP_N, int(N), int(T), int(K), &one, w,
                   CUDA_R_16F, int(K), x, CUDA_R_16F, int(K), &zero, y, CUDA_R_32F, int(ldy), CUBLAS_COMPUTE_32F,
                   CUBLAS_GEMM_DEFAULT),
        "cublasGemmEx");
}

}  // namespace loom::backend::cuda
