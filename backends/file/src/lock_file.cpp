#include "lock_file.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "dlock/error.hpp"
#include "dlock/spi.hpp"

namespace dlock::file {
namespace {

bool allowed_byte(unsigned char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
}

std::string errno_text(int err) { return std::strerror(err); }

}  // namespace

std::string lock_file_name(std::string_view name) { return file_key(name) + ".lock"; }

std::string file_key(std::string_view name) {
  // safe_key keeps names of allowed bytes as they are; a leading '.' ("..", ".", ".hidden") is
  // made of allowed bytes but must not be a file name, so such a name accepts no byte at all and
  // is always hashed ('#' + '.' + sha256). The '#' prefix is outside the allowed set, so a hashed
  // key never equals a name used as it is.
  const bool leading_dot = name.starts_with('.');
  return spi::safe_key(
      name, max_key_length, [leading_dot](unsigned char c) { return !leading_dot && allowed_byte(c); }, "#");
}

bool still_names(int dir_fd, const std::string& file_name, dev_t device, ino_t inode) {
  struct stat by_name {};
  if (::fstatat(dir_fd, file_name.c_str(), &by_name, AT_SYMLINK_NOFOLLOW) != 0) return false;
  return by_name.st_dev == device && by_name.st_ino == inode;
}

unique_fd open_lock_file(int dir_fd, const std::string& file_name, int& err, if_missing missing) noexcept {
  // O_NOFOLLOW: a symlink planted in a shared lock directory must not make us lock (and write
  // the counter into) some other file. O_CLOEXEC: a program we exec must not inherit the lock.
  const int flags = O_RDWR | O_CLOEXEC | O_NOFOLLOW | (missing == if_missing::create ? O_CREAT : 0);
  for (;;) {
    unique_fd fd(::openat(dir_fd, file_name.c_str(), flags, 0660));
    err = fd ? 0 : errno;
    if (err != EINTR) return fd;
  }
}

void set_open_error(std::error_code& ec, int err, const std::string& where) {
  set_error(ec, err == ENOSPC || err == EIO ? errc::backend_unavailable : errc::backend_error,
            "cannot open lock file " + where + ": " + errno_text(err) +
                (err == ELOOP ? " (it is a symlink; lock files must be regular files)" : ""));
}

unique_fd open_lock_file(int dir_fd, const std::string& file_name, const std::string& where, std::error_code& ec) {
  int err = 0;
  unique_fd fd = open_lock_file(dir_fd, file_name, err);
  if (!fd) set_open_error(ec, err, where);
  return fd;
}

std::string replaced_too_often(const std::string& where) {
  return "lock file " + where + " was replaced " + std::to_string(max_replacement_retries) +
         " times while we tried to lock it; is something deleting files in the lock directory?";
}

}  // namespace dlock::file
