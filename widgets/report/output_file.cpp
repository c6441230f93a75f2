// Atomic report output (see output_file.h).
#include "widgets/report/output_file.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "engine/core/error.h"

namespace lathe::report {

namespace fs = std::filesystem;

OutputFile::OutputFile(const std::string& path) : m_path(path) {
  if (path.empty())
    throw DataError("no output file given for the report (-o FILE)");
  std::error_code ec;
  if (fs::is_directory(path, ec))
    throw DataError("cannot write the report to '" + path + "': it is a folder; give a file name");
  const fs::path target(path);
  const fs::path folder = target.has_parent_path() ? target.parent_path() : fs::path(".");
  if (!fs::is_directory(folder, ec))
    throw DataError("cannot write the report to '" + path + "': folder '" + folder.string() + "' does not exist");
  m_tmp = (folder / ("." + target.filename().string() + ".tmp-" + std::to_string(::getpid()))).string();
  m_guard = std::make_unique<TempFileGuard>(m_tmp);  // a Ctrl-C removes it too (install_temp_file_cleanup)
  errno = 0;
  m_out.open(m_tmp, std::ios::binary | std::ios::trunc);
  if (!m_out)
    throw DataError("cannot write the report to '" + path +
                    "': " + (errno ? std::strerror(errno) : "the file cannot be created"));
}

OutputFile::~OutputFile() {
  if (!m_committed) {
    m_out.close();
    std::error_code ec;
    fs::remove(m_tmp, ec);
  }
}

void OutputFile::write(std::string_view bytes) {
  m_out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

void OutputFile::commit() {
  m_out.flush();
  const bool ok = static_cast<bool>(m_out);
  m_out.close();
  if (!ok || m_out.fail())
    throw DataError("cannot write the report to '" + m_path + "': writing failed (disk full?)");
  if (std::rename(m_tmp.c_str(), m_path.c_str()) != 0)
    throw DataError("cannot write the report to '" + m_path + "': " + std::strerror(errno));
  m_committed = true;
}

}  // namespace lathe::report
