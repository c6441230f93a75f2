// Checked file output: every write, flush, fsync and close is tested, and a failure (a full disk,
// a file size limit, an I/O error) throws lathe::Error naming the file and the system's reason,
// e.g. "writing runs/x/config.json: No space left on device". A short write is retried until all
// bytes are out or the system reports an error, so it is never taken for success.
// write_file_atomic() replaces a file whole (temporary file in the same folder, fsync, rename).
#pragma once

#include <string>
#include <string_view>

namespace lathe {

/// An output file written through a small buffer. Not thread-safe.
class FileWriter {
 public:
  enum class Mode { truncate, append };
  /// Opens (creates) `path`. Throws lathe::Error "opening PATH for writing: reason". Errors name
  /// `name_for_errors` when given (the real file behind a temporary one).
  explicit FileWriter(std::string path, Mode mode = Mode::truncate, std::string name_for_errors = "");
  /// Closes the file if close() was not called; never throws (a failure there goes unreported:
  /// call close() to know).
  ~FileWriter();
  FileWriter(const FileWriter&) = delete;
  FileWriter& operator=(const FileWriter&) = delete;

  /// Appends to the buffer; writes it out when it is full.
  void write(std::string_view data);
  /// Writes the buffer out (write-all).
  void flush();
  /// flush() then fsync: the bytes are on the disk.
  void sync();
  /// flush(), optionally fsync, and close. Throws on any failure; afterwards the object is inert.
  void close(bool fsync = true);

  const std::string& path() const { return m_path; }

 private:
  std::string m_path, m_name;
  std::string m_buffer;
  int m_fd = -1;
};

/// Writes all of `data` to `fd` (retrying short writes and EINTR). Throws lathe::Error
/// "writing PATH: reason" (PATH = `path_for_errors`).
void write_all(int fd, std::string_view data, const std::string& path_for_errors);

/// Replaces `path` with `text` atomically: written to a temporary file beside it, fsynced, closed,
/// then renamed over `path`. On failure the temporary file is removed and `path` is untouched.
void write_file_atomic(const std::string& path, std::string_view text);

/// fsyncs a folder, so that a rename or a new file inside it survives a power cut. Throws
/// lathe::Error "syncing FOLDER: reason" (a file system that cannot sync folders is not an error).
void fsync_dir(const std::string& folder);

/// "writing PATH: strerror(errno_value)"
std::string write_error_message(const std::string& path, int errno_value, const char* what = "writing");

}  // namespace lathe
