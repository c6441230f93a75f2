// Error checks for the CUDA runtime, cuBLAS, cuDNN and NCCL: each macro evaluates a statement once
// and, when it does not return success, throws lathe::Error naming the statement, the library's own
// error string, file and line. The macros name the library's functions only when expanded, so this
// header needs the CUDA runtime alone; include the library's header where you use its macro.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "engine/core/error.h"

namespace lathe::cuda {

/// Throws lathe::Error: "<library> error <code> (<message>) in `<statement>` at file:line".
[[noreturn]] void throw_library_error(const char* library, long code, const char* message, const char* statement,
                                      const char* file, int line);
/// Throws lathe::Error for a CUDA runtime error, with its name and description.
[[noreturn]] void throw_cuda_error(cudaError_t status, const char* statement, const char* file, int line);

}  // namespace lathe::cuda

#define LATHE_DETAIL_LIBRARY_CHECK(library, statement, ok, message_fn)                                         \
  do {                                                                                                         \
    const auto lathe_status_ = (statement);                                                                    \
    if (lathe_status_ != (ok))                                                                                 \
      ::lathe::cuda::throw_library_error(library, static_cast<long>(lathe_status_), message_fn(lathe_status_), \
                                         #statement, __FILE__, __LINE__);                                      \
  } while (0)

/// Checks a cudaError_t; clears the runtime's last error so later checks do not see it again.
#define LATHE_CUDA_CHECK(statement)                                                   \
  do {                                                                                \
    const cudaError_t lathe_status_ = (statement);                                    \
    if (lathe_status_ != cudaSuccess) {                                               \
      (void)cudaGetLastError();                                                       \
      ::lathe::cuda::throw_cuda_error(lathe_status_, #statement, __FILE__, __LINE__); \
    }                                                                                 \
  } while (0)
/// Checks a cublasStatus_t (needs <cublas_v2.h> or <cublasLt.h>).
#define LATHE_CUBLAS_CHECK(statement) \
  LATHE_DETAIL_LIBRARY_CHECK("cuBLAS", statement, CUBLAS_STATUS_SUCCESS, cublasGetStatusString)
/// Checks a cudnnStatus_t (needs <cudnn.h>).
#define LATHE_CUDNN_CHECK(statement) \
  LATHE_DETAIL_LIBRARY_CHECK("cuDNN", statement, CUDNN_STATUS_SUCCESS, cudnnGetErrorString)
/// Checks an ncclResult_t (needs <nccl.h>).
#define LATHE_NCCL_CHECK(statement) LATHE_DETAIL_LIBRARY_CHECK("NCCL", statement, ncclSuccess, ncclGetErrorString)
