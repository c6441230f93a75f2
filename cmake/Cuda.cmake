# Decides whether the CUDA backend is built (LATHE_CUDA=AUTO|ON|OFF) and sets the architectures.
# The binaries link the CUDA runtime statically and load the driver at run time, so a build with CUDA
# still starts, and passes the CPU tests, on a machine with no GPU and no driver.
set(LATHE_HAVE_CUDA OFF)
if(NOT LATHE_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 80 90)
    endif()
    enable_language(CUDA)
    # CMake 3.25 knows no C++20 dialect flag for nvcc; the kernels are C++17 (they include no engine headers).
    set(CMAKE_CUDA_STANDARD 17)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    find_package(CUDAToolkit REQUIRED)
    # cuDNN and NCCL usually sit in the toolkit; elsewhere (e.g. pip's nvidia-cudnn-cu13 and
    # nvidia-nccl-cu13 wheels, which ship only versioned .so files) point LATHE_CUDNN_ROOT /
    # LATHE_NCCL_ROOT (or the environment variables of the same names) at their folder.
    set(LATHE_CUDNN_ROOT "$ENV{LATHE_CUDNN_ROOT}" CACHE PATH "Folder holding include/cudnn.h and lib/libcudnn.so*")
    set(LATHE_NCCL_ROOT "$ENV{LATHE_NCCL_ROOT}" CACHE PATH "Folder holding include/nccl.h and lib/libnccl.so*")
    set(_lathe_cuda_lib_hints ${CUDAToolkit_LIBRARY_ROOT}/lib ${CUDAToolkit_LIBRARY_DIR} /usr/local/cuda/lib)
    find_library(LATHE_CUDNN_LIB NAMES cudnn libcudnn.so.9
                 HINTS ${LATHE_CUDNN_ROOT}/lib ${LATHE_CUDNN_ROOT}/lib64 ${_lathe_cuda_lib_hints})
    find_library(LATHE_NCCL_LIB NAMES nccl libnccl.so.2
                 HINTS ${LATHE_NCCL_ROOT}/lib ${LATHE_NCCL_ROOT}/lib64 ${_lathe_cuda_lib_hints})
    find_path(LATHE_CUDNN_INCLUDE cudnn.h HINTS ${LATHE_CUDNN_ROOT}/include ${CUDAToolkit_INCLUDE_DIRS})
    find_path(LATHE_NCCL_INCLUDE nccl.h HINTS ${LATHE_NCCL_ROOT}/include ${CUDAToolkit_INCLUDE_DIRS})
    if(LATHE_CUDNN_LIB AND LATHE_NCCL_LIB AND LATHE_CUDNN_INCLUDE AND LATHE_NCCL_INCLUDE)
      set(LATHE_HAVE_CUDA ON)
    elseif(LATHE_CUDA STREQUAL "ON")
      message(FATAL_ERROR "LATHE_CUDA=ON but cuDNN (${LATHE_CUDNN_LIB}, ${LATHE_CUDNN_INCLUDE}) or NCCL "
                          "(${LATHE_NCCL_LIB}, ${LATHE_NCCL_INCLUDE}) was not found: set LATHE_CUDNN_ROOT / LATHE_NCCL_ROOT")
    endif()
  elseif(LATHE_CUDA STREQUAL "ON")
    message(FATAL_ERROR "LATHE_CUDA=ON but no CUDA compiler (nvcc) was found")
  endif()
endif()
message(STATUS "Lathe CUDA backend: ${LATHE_HAVE_CUDA} (LATHE_CUDA=${LATHE_CUDA})")
