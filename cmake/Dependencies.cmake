# Finds the Debian-packaged dependencies (scripts/install-deps.sh installs them).
find_package(Threads REQUIRED)
find_package(OpenMP REQUIRED COMPONENTS CXX)
# Debian's dnnl-config.cmake insists on OpenCL (its GPU runtime); we use the CPU engine only, so
# find the library directly.
find_path(LATHE_DNNL_INCLUDE oneapi/dnnl/dnnl.hpp REQUIRED)
find_library(LATHE_DNNL_LIB dnnl REQUIRED)
add_library(DNNL::dnnl UNKNOWN IMPORTED)
set_target_properties(DNNL::dnnl PROPERTIES IMPORTED_LOCATION ${LATHE_DNNL_LIB}
                      INTERFACE_INCLUDE_DIRECTORIES ${LATHE_DNNL_INCLUDE})
find_package(SQLite3 REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(CLI11 REQUIRED)
find_package(ZLIB REQUIRED)
if(LATHE_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
