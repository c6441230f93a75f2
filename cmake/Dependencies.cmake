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
# Bring-your-own data (engine/data): .npz archives (libzip-dev), PNG (libpng-dev), JPEG (libjpeg62-turbo-dev).
# Debian's libzip-config.cmake also imports the zipcmp/zipmerge tools, which libzip-dev does not
# install; the library and header are found directly.
find_path(LATHE_ZIP_INCLUDE zip.h)
find_library(LATHE_ZIP_LIB zip)
find_package(PNG QUIET)
find_package(JPEG QUIET)
if(LATHE_ZIP_INCLUDE AND LATHE_ZIP_LIB AND NOT TARGET libzip::zip)
  add_library(libzip::zip UNKNOWN IMPORTED)
  set_target_properties(libzip::zip PROPERTIES IMPORTED_LOCATION ${LATHE_ZIP_LIB}
                        INTERFACE_INCLUDE_DIRECTORIES ${LATHE_ZIP_INCLUDE})
endif()
if(NOT TARGET libzip::zip OR NOT PNG_FOUND OR NOT JPEG_FOUND)
  message(FATAL_ERROR "libzip, libpng or libjpeg was not found: Lathe reads .npz arrays and PNG/JPEG image folders "
                      "with them. Install them with scripts/install-deps.sh (apt-get install libzip-dev libpng-dev "
                      "libjpeg62-turbo-dev)")
endif()
# ONNX (Debian's libonnx-dev 1.12, protobuf) for model import and export (engine/io/onnx).
find_package(Protobuf QUIET)
find_package(ONNX 1.12 CONFIG QUIET)
if(NOT Protobuf_FOUND OR NOT TARGET protobuf::libprotobuf OR NOT ONNX_FOUND OR NOT TARGET onnx OR NOT TARGET onnx_proto)
  message(FATAL_ERROR "ONNX (libonnx-dev, with libprotobuf-dev) was not found: Lathe reads and writes .onnx "
                      "models with it. Install it with scripts/install-deps.sh (apt-get install libonnx-dev "
                      "libprotobuf-dev)")
endif()
# Gloo (CPU collectives, tcp transport) for the data-parallel communicator (engine/dist). Debian's
# package exports only a RelWithDebInfo configuration; every build type uses it.
find_package(Gloo REQUIRED CONFIG)
set_target_properties(gloo PROPERTIES MAP_IMPORTED_CONFIG_RELEASE RelWithDebInfo MAP_IMPORTED_CONFIG_DEBUG
                      RelWithDebInfo MAP_IMPORTED_CONFIG_MINSIZEREL RelWithDebInfo)
if(LATHE_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()

# Qt 6 and QCustomPlot for the desktop app, its widgets and the report writer (widgets/, app/gui/).
# Without them the engine, lathe-cli (minus `report`) and the non-GUI tests still build.
option(LATHE_GUI "Build the Qt desktop app and the report writer when Qt 6 is found" ON)
set(LATHE_HAVE_QT OFF)
if(LATHE_GUI)
  find_package(Qt6 6.2 QUIET COMPONENTS Widgets PrintSupport Test Concurrent Svg)
  find_library(LATHE_QCUSTOMPLOT_LIB QCustomPlotQt6)
  find_path(LATHE_QCUSTOMPLOT_INCLUDE qcustomplot.h)
  if(Qt6_FOUND AND LATHE_QCUSTOMPLOT_LIB AND LATHE_QCUSTOMPLOT_INCLUDE)
    set(LATHE_HAVE_QT ON)
    add_library(QCustomPlot::QCustomPlot UNKNOWN IMPORTED)
    set_target_properties(QCustomPlot::QCustomPlot PROPERTIES IMPORTED_LOCATION ${LATHE_QCUSTOMPLOT_LIB}
                          INTERFACE_INCLUDE_DIRECTORIES ${LATHE_QCUSTOMPLOT_INCLUDE}
                          INTERFACE_COMPILE_DEFINITIONS QCUSTOMPLOT_USE_LIBRARY)
    message(STATUS "Lathe: Qt ${Qt6_VERSION} and QCustomPlot found: building the desktop app")
  else()
    message(STATUS "Lathe: Qt 6 or QCustomPlot (Qt6) not found: no desktop app, no `lathe-cli report`")
  endif()
endif()
