// The report's output file, written atomically: the content goes to a temporary file next to the
// target and is renamed over it on commit(), so a failed report never leaves a half-written file
// and an unwritable path is reported before any work is done. The temporary file is registered
// with engine/core/temp_files.h, so a Ctrl-C of `lathe-cli report` does not leave it behind either.
#pragma once

#include <fstream>
#include <memory>
#include <string>
#include <string_view>

#include "engine/core/temp_files.h"

namespace lathe::report {

class OutputFile {
 public:
  /// Opens the temporary file. DataError naming `path` when it is empty, a folder, or cannot be
  /// written (the system's reason).
  explicit OutputFile(const std::string& path);
  ~OutputFile();  ///< removes the temporary file unless committed; never throws
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  std::ostream& stream() { return m_out; }
  void write(std::string_view bytes);
  /// Flushes, closes and renames onto the target. DataError naming the path when that fails.
  void commit();
  const std::string& path() const { return m_path; }

 private:
  std::string m_path, m_tmp;
  std::ofstream m_out;
  std::unique_ptr<TempFileGuard> m_guard;
  bool m_committed = false;
};

}  // namespace lathe::report
