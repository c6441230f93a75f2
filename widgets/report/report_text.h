// Text formatting shared by every report format: numbers as in the summary tables, durations,
// times, HTML escaping and RFC 4180 CSV fields. No Qt, so the CSV path and tests use it directly.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "engine/store/store_types.h"

namespace lathe::report {

/// A metric value as the report tables show it: "-" for NaN; 4 significant digits below 10^4
/// ("0.8512", "0.001234"); whole numbers with thousands separators from 10^4 up to 10^15
/// ("1,234,567"); scientific beyond ("1.235e+18").
std::string format_value(double value);
/// A value for the headline cards: accuracies as percentages ("85.12%"), bytes in KiB/MiB/GiB,
/// dollars with a "$" (4 decimals, or 2 significant digits below a cent: "$0.000019"), rates with
/// "/s"; other metrics as format_value.
std::string format_headline(std::string_view metric, double value);
/// Seconds as "m:ss" or "h:mm:ss" ("-" for negative or non-finite).
std::string format_duration_s(double seconds);
/// The run's duration (started -> finished, or -> last heartbeat while running); "-" before it started.
std::string run_duration(const RunRecord& run);
/// A double in the shortest form that reads back to the same value ("0.1", "1e-07"); "NaN" for NaN.
std::string exact_number(double value);

/// &, <, >, " and ' escaped for HTML text and attribute values.
std::string html_escape(std::string_view text);
/// A CSV field per RFC 4180: quoted (with "" for ") when it holds a comma, a quote, CR or LF.
std::string csv_field(std::string_view text);

}  // namespace lathe::report
