#include "lock_directory.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "dlock/error.hpp"

namespace dlock::file {
namespace {

[[noreturn]] void fail(const std::filesystem::path& dir, const std::string& what, int err) {
  throw error(errc::backend_unavailable, "file:// lock directory " + dir.string() + ": " + what + ": " +
                                             std::strerror(err) +
                                             "; expected a directory this process can create and write");
}

// mkdir -p with mode 0700 for every directory it creates (lock files of one user, by default;
// create the directory beforehand with group permissions to share it between users).
void make_directories_0700(const std::filesystem::path& dir) {
  std::filesystem::path prefix;
  for (const auto& part : dir) {
    prefix /= part;
    if (prefix == prefix.root_path()) continue;
    if (::mkdir(prefix.c_str(), 0700) != 0 && errno != EEXIST) fail(dir, "cannot create " + prefix.string(), errno);
  }
}

}  // namespace

std::filesystem::path directory_of(const uri& u) {
  const std::string expected = "; expected an absolute directory such as file:///var/lock/myapp";
  if (!u.user().empty() || u.password())
    throw error(errc::invalid_uri, u.redacted() + ": file:// takes no user" + expected);
  for (const auto& h : u.hosts()) {
    if (h.port) throw error(errc::invalid_uri, u.redacted() + ": file:// takes no port" + expected);
    if (!h.host.empty() && h.host != "localhost")
      throw error(errc::invalid_uri, u.redacted() +
                                         ": file:// locks are local to this host, so the host must be empty "
                                         "or localhost (a relative path cannot be written in a URI)" +
                                         expected);
  }
  if (u.path().empty() || u.path() == "/")
    throw error(errc::invalid_uri, u.redacted() + ": file:// needs the lock directory as its path" + expected);
  return std::filesystem::path(u.path()).lexically_normal();
}

lock_directory::lock_directory(std::filesystem::path path) : path_(std::move(path)) {
  make_directories_0700(path_);
  fd_.reset(::open(path_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd_) fail(path_, "cannot open it", errno);
  // Writable and searchable for the effective user; also catches a read-only file system.
  if (::faccessat(fd_.get(), ".", W_OK | X_OK, AT_EACCESS) != 0) fail(path_, "cannot write in it", errno);
}

}  // namespace dlock::file
