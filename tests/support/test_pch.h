// The headers nearly every test file includes, precompiled once for all suites (tests/CMakeLists.txt:
// target_precompile_headers). Only third-party and standard headers: a change to Lathe's own headers
// never rebuilds the precompiled header.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>
