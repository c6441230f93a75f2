# Lists the gpu suite's tests when ctest reads the test files (not at build time), in CTest script
# mode: included through the tests folder's TEST_INCLUDE_FILES with LATHE_SUITE_EXE and LATHE_SUITE_LABEL
# set. If the executable cannot start (a shared library missing on the machine),
# it lists nothing and the suite's "<exe>_starts" test, which runs the executable, fails with the
# loader's message: the build never fails because of it, and the other suites still run.
if(NOT EXISTS "${LATHE_SUITE_EXE}")
  return()
endif()
execute_process(COMMAND "${LATHE_SUITE_EXE}" --gtest_list_tests
                OUTPUT_VARIABLE _out ERROR_VARIABLE _err RESULT_VARIABLE _rc TIMEOUT 60)
if(NOT _rc EQUAL 0)
  return()
endif()
string(REPLACE ";" "" _out "${_out}")
string(REPLACE "\n" ";" _lines "${_out}")
set(_suite "")
foreach(_line IN LISTS _lines)
  string(REGEX REPLACE "  #.*$" "" _line "${_line}")  # "# GetParam() = ..." / "# TypeParam = ..."
  if(_line MATCHES "^([^ ].*\\.)$")
    set(_suite "${CMAKE_MATCH_1}")
  elseif(_line MATCHES "^  ([^ ]+)$" AND _suite)
    set(_name "${_suite}${CMAKE_MATCH_1}")
    if(NOT _name MATCHES "(^|\\.)DISABLED_")
      add_test("${_name}" "${LATHE_SUITE_EXE}" "--gtest_filter=${_name}")
      set_tests_properties("${_name}" PROPERTIES LABELS "${LATHE_SUITE_LABEL}"
                           SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\]")
    endif()
  endif()
endforeach()
