// The throwing half of the CUDA error-check macros (cuda_check.h), out of line to keep call sites small.
#include "engine/backend/cuda/cuda_check.h"

#include <sstream>

namespace lathe::cuda {

void throw_library_error(const char* library, long code, const char* message, const char* statement, const char* file,
                         int line) {
  std::ostringstream os;
  os << library << " error " << code << " (" << (message ? message : "unknown") << ") in `" << statement << "` at "
     << file << ":" << line;
  throw Error(os.str());
}

void throw_cuda_error(cudaError_t status, const char* statement, const char* file, int line) {
  const std::string message = std::string(cudaGetErrorName(status)) + ": " + cudaGetErrorString(status);
  throw_library_error("CUDA", static_cast<long>(status), message.c_str(), statement, file, line);
}

}  // namespace lathe::cuda
