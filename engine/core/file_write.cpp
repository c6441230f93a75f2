// Checked file output on POSIX file descriptors (see file_write.h).
#include "engine/core/file_write.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "engine/core/error.h"
#include "engine/core/temp_files.h"

namespace lathe {

namespace {
constexpr size_t kBufferBytes = 64 * 1024;
}

std::string write_error_message(const std::string& path, int errno_value, const char* what) {
  return std::string(what) + " " + path + ": " + std::strerror(errno_value);
}

void write_all(int fd, std::string_view data, const std::string& path_for_errors) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR)
        continue;
      throw Error(write_error_message(path_for_errors, errno));
    }
    if (n == 0)  // never happens for regular files; do not spin
      throw Error(write_error_message(path_for_errors, EIO));
    data.remove_prefix(static_cast<size_t>(n));
  }
}

FileWriter::FileWriter(std::string path, Mode mode, std::string name_for_errors)
    : m_path(std::move(path)), m_name(name_for_errors.empty() ? m_path : std::move(name_for_errors)) {
  const int flags = O_WRONLY | O_CREAT | O_CLOEXEC | (mode == Mode::append ? O_APPEND : O_TRUNC);
  m_fd = ::open(m_path.c_str(), flags, 0644);
  if (m_fd < 0)
    throw Error(write_error_message(m_name, errno, "opening for writing"));
  m_buffer.reserve(kBufferBytes);
}

FileWriter::~FileWriter() {
  if (m_fd >= 0) {
    try {
      flush();
    } catch (...) {
    }
    ::close(m_fd);
  }
}

void FileWriter::write(std::string_view data) {
  LATHE_CHECK(m_fd >= 0, "FileWriter::write: ", m_path, " is closed");
  if (m_buffer.size() + data.size() > kBufferBytes) {
    flush();
    if (data.size() >= kBufferBytes) {
      write_all(m_fd, data, m_name);
      return;
    }
  }
  m_buffer.append(data);
}

void FileWriter::flush() {
  if (m_fd < 0 || m_buffer.empty())
    return;
  std::string out;
  out.swap(m_buffer);  // a failed write drops the buffer: nothing is written twice
  m_buffer.reserve(kBufferBytes);
  write_all(m_fd, out, m_name);
}

void FileWriter::sync() {
  flush();
  // fsync on something that cannot sync (a pipe, /dev/full) is EINVAL / EROFS: not a data loss.
  if (::fsync(m_fd) != 0 && errno != EINVAL && errno != EROFS)
    throw Error(write_error_message(m_name, errno));
}

void FileWriter::close(bool fsync) {
  if (m_fd < 0)
    return;
  try {
    if (fsync)
      sync();
    else
      flush();
  } catch (...) {
    ::close(m_fd);
    m_fd = -1;
    throw;
  }
  const int fd = m_fd;
  m_fd = -1;
  if (::close(fd) != 0 && errno != EINTR)  // NFS reports delayed write errors here
    throw Error(write_error_message(m_name, errno));
}

void write_file_atomic(const std::string& path, std::string_view text) {
  const std::string tmp = path + ".tmp" + std::to_string(::getpid());
  const TempFileGuard on_signal(tmp);  // a Ctrl-C of a command without its own handler removes it too
  try {
    FileWriter out(tmp, FileWriter::Mode::truncate, path);
    out.write(text);
    out.close(true);
  } catch (...) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    throw;
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    throw Error("renaming " + tmp + " to " + path + ": " + ec.message());
  }
}

void fsync_dir(const std::string& folder) {
  const int fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    throw Error(write_error_message(folder, errno, "syncing"));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0 && err != EINVAL && err != EROFS)
    throw Error(write_error_message(folder, err, "syncing"));
}

}  // namespace lathe
