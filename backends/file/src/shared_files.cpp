#include "shared_files.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "dlock/error.hpp"

namespace dlock::file {
namespace {

constexpr std::size_t counter_file_size = 64;
constexpr std::size_t boot_id_offset = 24;
constexpr std::size_t boot_id_size = 36;

// This boot's id, read once; nullopt when the kernel does not offer it.
const std::optional<std::array<char, boot_id_size>>& this_boot() {
  static const auto id = []() -> std::optional<std::array<char, boot_id_size>> {
    std::ifstream in("/proc/sys/kernel/random/boot_id");
    std::string line;
    std::getline(in, line);
    if (line.size() != boot_id_size) return std::nullopt;
    std::array<char, boot_id_size> bytes{};
    std::memcpy(bytes.data(), line.data(), boot_id_size);
    return bytes;
  }();
  return id;
}

// How many times this process (or its ancestors since the first kept_file) has forked: a child
// sees a count its kept files were not opened at.
std::atomic<unsigned> fork_count{0};

unsigned forks_so_far() {
  static const bool counting = [] {
    return ::pthread_atfork(nullptr, nullptr, [] { fork_count.fetch_add(1, std::memory_order_relaxed); }) == 0;
  }();
  // Without the handler (out of memory at the first use) every use opens the file again: correct, slower.
  return counting ? fork_count.load(std::memory_order_relaxed) : fork_count.fetch_add(1, std::memory_order_relaxed) + 1;
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
  return {key + ".lock", key + ".rw-gate", key + ".rw-fence"};
}

semaphore_file_names semaphore_files(std::string_view name) {
  const auto key = file_key(name);
  return {key + ".sem", key + ".sem-held", key + ".sem."};
}

flock_outcome flock_file(const lock_directory& dir, const std::string& file_name, int operation, if_missing missing,
                         std::error_code& ec) {
  const int dir_fd = dir.fd();
  flock_outcome out;
  for (int attempt = 0; attempt < max_replacement_retries; ++attempt) {
    int open_errno = 0;
    unique_fd fd = open_lock_file(dir_fd, file_name, open_errno, missing);
    if (!fd) {
      if (open_errno == ENOENT && missing == if_missing::report) {
        out.missing = true;
      } else {
        set_open_error(ec, open_errno, dir.where(file_name));
      }
      return out;
    }
    int rc;
    do {
      rc = ::flock(fd.get(), operation);
    } while (rc != 0 && errno == EINTR);
    if (rc != 0) {
      if (errno == EWOULDBLOCK) return out;  // held in a conflicting mode: not an error
      const int err = errno;
      set_error(ec, errc::backend_error, "cannot flock " + dir.where(file_name) + ": " + std::strerror(err));
      return out;
    }
    struct stat locked {};
    if (::fstat(fd.get(), &locked) != 0 || !S_ISREG(locked.st_mode)) {
      set_error(ec, errc::backend_error, dir.where(file_name) + " is not a regular file we can stat");
      return out;
    }
    // The unlink/replace race: between our open and our flock, the file may have been deleted or
    // replaced (by an operator or a cleanup job). Then we hold a lock on an inode nobody else will
    // ever open, while the next one locks the new file. Only a lock on the inode the name still
    // refers to counts (closing fd drops the stale one).
    if (still_names(dir_fd, file_name, locked.st_dev, locked.st_ino)) {
      out.held = held_file{std::move(fd), locked.st_dev, locked.st_ino, 0};
      return out;
    }
  }
  set_error(ec, errc::backend_error, replaced_too_often(dir.where(file_name)));
  return out;
}

std::optional<held_file> flock_file(const lock_directory& dir, const std::string& file_name, int operation,
                                    std::error_code& ec) {
  return std::move(flock_file(dir, file_name, operation, if_missing::create, ec).held);
}

kept_file::kept_file(std::shared_ptr<const lock_directory> dir, std::string file_name, if_missing missing)
    : dir_(std::move(dir)), file_name_(std::move(file_name)), missing_(missing) {}

kept_file::hold::~hold() {
  if (fd_ >= 0) ::flock(fd_, LOCK_UN);
}

bool kept_file::open_locked(std::error_code& ec) {
  const unsigned forks = forks_so_far();
  if (fd_ && forks_ == forks) return true;
  fd_.reset();  // in a child: closes only the child's fd; the parent's open file description stays
  int open_errno = 0;
  unique_fd fd = open_lock_file(dir_->fd(), file_name_, open_errno, missing_);
  if (!fd) {
    if (open_errno != ENOENT || missing_ != if_missing::report) set_open_error(ec, open_errno, dir_->where(file_name_));
    return false;
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    set_error(ec, errc::backend_error, dir_->where(file_name_) + " is not a regular file we can stat");
    return false;
  }
  fd_ = std::move(fd);
  device_ = st.st_dev;
  inode_ = st.st_ino;
  forks_ = forks;
  return true;
}

kept_file::hold kept_file::lock(int operation, std::error_code& ec) {
  std::unique_lock guard(mutex_);
  for (int attempt = 0; attempt < max_replacement_retries; ++attempt) {
    if (!open_locked(ec)) return ec ? hold() : hold::file_missing();
    int rc;
    do {
      rc = ::flock(fd_.get(), operation);
    } while (rc != 0 && errno == EINTR);
    if (rc != 0) {
      if (errno == EWOULDBLOCK) return {};  // held in a conflicting mode: not an error
      const int err = errno;
      set_error(ec, errc::backend_error, "cannot flock " + dir_->where(file_name_) + ": " + std::strerror(err));
      return {};
    }
    if (still_names(dir_->fd(), file_name_, device_, inode_)) return hold(std::move(guard), fd_.get());
    // Replaced or deleted since we opened it: whoever opens the name now locks another inode.
    ::flock(fd_.get(), LOCK_UN);
    fd_.reset();
  }
  set_error(ec, errc::backend_error, replaced_too_often(dir_->where(file_name_)));
  return {};
}

std::optional<counter_state> read_counter_file(int fd, const file_label& where, std::error_code& ec,
                                               older_counter older) {
  std::array<unsigned char, counter_file_size> bytes{};
  ssize_t n;
  do {
    n = ::pread(fd, bytes.data(), bytes.size(), 0);
  } while (n < 0 && errno == EINTR);
  if (n < 0) {
    set_error(ec, errc::backend_unavailable, "cannot read " + where.str() + ": " + std::strerror(errno));
    return std::nullopt;
  }
  counter_state state;
  if (n == 0) return state;
  if (n == 8 && older == older_counter::accepted) {
    state.last = load64(bytes.data());
    return state;
  }
  if (static_cast<std::size_t>(n) != counter_file_size) {
    set_error(ec, errc::backend_error,
              where.str() + " holds " + std::to_string(n) +
                  " bytes; expected an empty file or the 64-byte counter of " +
                  (older == older_counter::accepted ? "a file:// lock (or the 8-byte counter of an older version)"
                                                    : "a file:// semaphore") +
                  " (was it written by something else?)");
    return std::nullopt;
  }
  state.last = load64(bytes.data());
  state.reserved = load64(bytes.data() + 8);
  state.extra = load64(bytes.data() + 16);
  std::memcpy(state.boot_id.data(), bytes.data() + boot_id_offset, boot_id_size);
  state.laid_out = true;
  return state;
}

std::optional<std::uint64_t> issue_token(int fd, counter_state& state, const file_label& where, std::error_code& ec,
                                         bool flush_always) {
  const auto& boot = this_boot();
  bool flush = flush_always;
  if (!boot || state.boot_id != *boot) {
    // A new boot (or none known): tokens of the last one may be lost from [0, 8), never from the mark.
    state.last = std::max(state.last, state.reserved);
    state.boot_id = boot ? *boot : std::array<char, boot_id_size>{};
    flush = true;
  }
  const std::uint64_t token = state.last + 1;
  if (token > state.reserved) {
    state.reserved = token + (boot ? counter_reserve : 0);
    flush = true;
  }
  state.last = token;
  state.laid_out = true;
  std::array<unsigned char, counter_file_size> bytes{};
  store64(bytes.data(), state.last);
  store64(bytes.data() + 8, state.reserved);
  store64(bytes.data() + 16, state.extra);
  std::memcpy(bytes.data() + boot_id_offset, state.boot_id.data(), boot_id_size);
  ssize_t n;
  do {
    n = ::pwrite(fd, bytes.data(), bytes.size(), 0);
  } while (n < 0 && errno == EINTR);
  // The token must be on disk (itself, or a mark above it) before anyone uses it: a crash after
  // handing out token N must not let the next holder (after a reboot) hand out N again.
  if (static_cast<std::size_t>(n) != counter_file_size || (flush && ::fdatasync(fd) != 0)) {
    const int err = errno;
    set_error(ec, errc::backend_unavailable,
              "cannot write the fencing counter " + where.str() + ": " + std::strerror(err));
    return std::nullopt;
  }
  return token;
}

}  // namespace dlock::file
