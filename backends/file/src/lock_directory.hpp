#pragma once
// The lock directory of a file:// backend, opened once: created (mode 0700) if missing, checked
// writable, and kept open so lock files are found relative to it (openat) even if the process
// changes its working directory.
#include <filesystem>
#include <string>

#include "dlock/uri.hpp"
#include "unique_fd.hpp"

namespace dlock::file {

// The directory a file:// URI names. file:///var/lock/myapp -> /var/lock/myapp. Throws
// errc::invalid_uri for file:// without a path, a host other than localhost, a user or a port.
// (A relative path cannot be written in a URI: file://dir/x would make "dir" the host.)
std::filesystem::path directory_of(const uri& u);

class lock_directory {
 public:
  // Throws dlock::error(errc::backend_unavailable) naming the directory and the OS error when it
  // cannot be created, opened or written.
  explicit lock_directory(std::filesystem::path path);

  const std::filesystem::path& path() const noexcept { return path_; }
  int fd() const noexcept { return fd_.get(); }
  // "<dir>/<file>" for messages.
  std::string where(const std::string& file_name) const { return (path_ / file_name).string(); }

 private:
  std::filesystem::path path_;
  unique_fd fd_;
};

}  // namespace dlock::file
