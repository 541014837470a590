#include "shared_files.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "dlock/error.hpp"

namespace dlock::file {
namespace {

constexpr std::size_t counter_file_size = 64;
constexpr std::size_t boot_id_offset = 24;
constexpr std::size_t boot_id_size = 36;

// This boot's id, read once; empty when the kernel does not offer it.
const std::string& this_boot() {
  static const std::string id = [] {
    std::ifstream in("/proc/sys/kernel/random/boot_id");
    std::string line;
    std::getline(in, line);
    return line.size() == boot_id_size ? line : std::string();
  }();
  return id;
}

std::uint64_t load64(const unsigned char* p) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

void store64(unsigned char* p, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}

}  // namespace

rw_file_names rw_files(std::string_view name) {
  const auto key = file_key(name);
  return {key + ".rw", key + ".rw-gate", key + ".rw-fence"};
}

semaphore_file_names semaphore_files(std::string_view name) {
  const auto key = file_key(name);
  return {key + ".sem", key + ".sem."};
}

std::optional<held_file> flock_file(int dir_fd, const std::string& file_name, const std::string& where, int operation,
                                    std::error_code& ec) {
  for (int attempt = 0; attempt < max_replacement_retries; ++attempt) {
    unique_fd fd = open_lock_file(dir_fd, file_name, where, ec);
    if (!fd) return std::nullopt;
    int rc;
    do {
      rc = ::flock(fd.get(), operation);
    } while (rc != 0 && errno == EINTR);
    if (rc != 0) {
      if (errno == EWOULDBLOCK) return std::nullopt;  // held in a conflicting mode: not an error
      set_error(ec, errc::backend_error, "cannot flock " + where + ": " + std::strerror(errno));
      return std::nullopt;
    }
    struct stat locked {};
    if (::fstat(fd.get(), &locked) != 0 || !S_ISREG(locked.st_mode)) {
      set_error(ec, errc::backend_error, where + " is not a regular file we can stat");
      return std::nullopt;
    }
    // The unlink/replace race, as for the mutex: only a lock on the inode the name still refers
    // to counts (closing fd drops the stale one).
    if (still_names(dir_fd, file_name, locked.st_dev, locked.st_ino))
      return held_file{std::move(fd), locked.st_dev, locked.st_ino, 0};
  }
  set_error(ec, errc::backend_error, replaced_too_often(where));
  return std::nullopt;
}

std::optional<counter_state> read_counter_file(int fd, const std::string& where, std::error_code& ec) {
  std::array<unsigned char, counter_file_size> bytes{};
  ssize_t n;
  do {
    n = ::pread(fd, bytes.data(), bytes.size(), 0);
  } while (n < 0 && errno == EINTR);
  if (n < 0) {
    set_error(ec, errc::backend_unavailable, "cannot read " + where + ": " + std::strerror(errno));
    return std::nullopt;
  }
  counter_state state;
  if (n == 0) return state;
  if (static_cast<std::size_t>(n) != counter_file_size) {
    set_error(ec, errc::backend_error,
              where + " holds " + std::to_string(n) + " bytes; expected an empty file or the 64-byte counter of a "
                                                      "file:// reader-writer lock or semaphore (was it written by something else?)");
    return std::nullopt;
  }
  state.last = load64(bytes.data());
  state.reserved = load64(bytes.data() + 8);
  state.max_count = load64(bytes.data() + 16);
  state.boot_id.assign(reinterpret_cast<const char*>(bytes.data() + boot_id_offset), boot_id_size);
  return state;
}

std::optional<std::uint64_t> issue_token(int fd, counter_state& state, const std::string& where, std::error_code& ec) {
  const std::string& boot = this_boot();
  bool flush = false;
  if (boot.empty() || state.boot_id != boot) {
    // A new boot (or none known): tokens of the last one may be lost from [0, 8), never from the mark.
    state.last = std::max(state.last, state.reserved);
    state.boot_id = boot;
    flush = true;
  }
  const std::uint64_t token = state.last + 1;
  if (token > state.reserved) {
    state.reserved = token + (boot.empty() ? 0 : counter_reserve);
    flush = true;
  }
  state.last = token;
  std::array<unsigned char, counter_file_size> bytes{};
  store64(bytes.data(), state.last);
  store64(bytes.data() + 8, state.reserved);
  store64(bytes.data() + 16, state.max_count);
  std::memcpy(bytes.data() + boot_id_offset, state.boot_id.data(), std::min(state.boot_id.size(), boot_id_size));
  ssize_t n;
  do {
    n = ::pwrite(fd, bytes.data(), bytes.size(), 0);
  } while (n < 0 && errno == EINTR);
  if (static_cast<std::size_t>(n) != counter_file_size || (flush && ::fdatasync(fd) != 0)) {
    set_error(ec, errc::backend_unavailable, "cannot write the fencing counter " + where + ": " + std::strerror(errno));
    return std::nullopt;
  }
  return token;
}

}  // namespace dlock::file
