#include "lock_file.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>

#include "dlock/error.hpp"
#include "dlock/spi.hpp"

namespace dlock::file {
namespace {

bool allowed_byte(unsigned char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
         c == '-';
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
      name, max_key_length, [leading_dot](unsigned char c) { return !leading_dot && allowed_byte(c); },
      "#");
}

bool still_names(int dir_fd, const std::string& file_name, dev_t device, ino_t inode) {
  struct stat by_name {};
  if (::fstatat(dir_fd, file_name.c_str(), &by_name, AT_SYMLINK_NOFOLLOW) != 0) return false;
  return by_name.st_dev == device && by_name.st_ino == inode;
}

std::optional<std::uint64_t> read_counter(int fd, const std::string& where, std::error_code& ec) {
  std::array<unsigned char, 8> bytes{};
  ssize_t n;
  do {
    n = ::pread(fd, bytes.data(), bytes.size(), 0);
  } while (n < 0 && errno == EINTR);
  if (n < 0) {
    set_error(ec, errc::backend_unavailable, "cannot read lock file " + where + ": " + errno_text(errno));
    return std::nullopt;
  }
  if (n == 0) return 0;
  if (n != 8) {
    set_error(ec, errc::backend_error,
              "lock file " + where + " holds " + std::to_string(n) +
                  " bytes; expected an empty file or a 64-bit fencing counter (was it written by something else?)");
    return std::nullopt;
  }
  std::uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | bytes[static_cast<std::size_t>(i)];
  return value;
}

unique_fd open_lock_file(int dir_fd, const std::string& file_name, const std::string& where, std::error_code& ec) {
  for (;;) {
    // O_NOFOLLOW: a symlink planted in a shared lock directory must not make us lock (and write
    // the counter into) some other file. O_CLOEXEC: a program we exec must not inherit the lock.
    unique_fd fd(::openat(dir_fd, file_name.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0660));
    if (fd) return fd;
    const int err = errno;
    if (err == EINTR) continue;
    set_error(ec, err == ENOSPC || err == EIO ? errc::backend_unavailable : errc::backend_error,
              "cannot open lock file " + where + ": " + errno_text(err) +
                  (err == ELOOP ? " (it is a symlink; lock files must be regular files)" : ""));
    return fd;
  }
}

lock_outcome lock_opened_file(unique_fd& fd, int dir_fd, const std::string& file_name, const std::string& where,
                              std::error_code& ec) {
  lock_outcome out;
  for (;;) {
    if (::flock(fd.get(), LOCK_EX | LOCK_NB) == 0) break;
    const int err = errno;
    if (err == EWOULDBLOCK) return out;  // contended: not an error
    if (err == EINTR) continue;
    set_error(ec, errc::backend_error, "cannot flock lock file " + where + ": " + errno_text(err));
    return out;
  }
  // Anything but a grant leaves the fd unlocked: a watch keeps its fd for its next attempt.
  struct unlock_unless_granted {
    unique_fd& fd;
    const lock_outcome& out;
    ~unlock_unless_granted() {
      if (!out.held && fd) ::flock(fd.get(), LOCK_UN);
    }
  } unlock_guard{fd, out};
  struct stat locked {};
  if (::fstat(fd.get(), &locked) != 0) {
    set_error(ec, errc::backend_error, "cannot stat lock file " + where + ": " + errno_text(errno));
    return out;
  }
  // The unlink/replace race: between our open and our flock, the file may have been deleted or
  // replaced (by an operator or a cleanup job). Then we hold a lock on an inode nobody else will
  // ever open, while the next acquirer locks the new file. Only a lock on the inode the name
  // still refers to counts; otherwise start over with the current file.
  if (!S_ISREG(locked.st_mode)) {
    set_error(ec, errc::backend_error, "lock file " + where + " is not a regular file");
    return out;
  }
  if (!still_names(dir_fd, file_name, locked.st_dev, locked.st_ino)) {
    out.replaced = true;
    return out;
  }

  auto counter = read_counter(fd.get(), where, ec);
  if (!counter) return out;
  const std::uint64_t token = *counter + 1;
  std::array<unsigned char, 8> bytes{};
  for (std::size_t i = 0; i < 8; ++i) bytes[i] = static_cast<unsigned char>(token >> (8 * i));
  ssize_t n;
  do {
    n = ::pwrite(fd.get(), bytes.data(), bytes.size(), 0);
  } while (n < 0 && errno == EINTR);
  // The token must be on disk before anyone uses it: a crash after handing out token N must not
  // let the next holder (after a reboot) hand out N again.
  if (n != 8 || ::fdatasync(fd.get()) != 0) {
    set_error(ec, errc::backend_unavailable,
              "cannot write the fencing counter of lock file " + where + ": " + errno_text(errno));
    return out;
  }
  out.held = held_file{std::move(fd), locked.st_dev, locked.st_ino, token};
  return out;
}

std::optional<held_file> try_lock_file(int dir_fd, const std::string& file_name, const std::string& where,
                                       std::error_code& ec) {
  for (int attempt = 0; attempt < max_replacement_retries; ++attempt) {
    unique_fd fd = open_lock_file(dir_fd, file_name, where, ec);
    if (!fd) return std::nullopt;
    auto out = lock_opened_file(fd, dir_fd, file_name, where, ec);
    if (!out.replaced) return std::move(out.held);
  }
  set_error(ec, errc::backend_error, replaced_too_often(where));
  return std::nullopt;
}

std::string replaced_too_often(const std::string& where) {
  return "lock file " + where + " was replaced " + std::to_string(max_replacement_retries) +
         " times while we tried to lock it; is something deleting files in the lock directory?";
}

}  // namespace dlock::file
