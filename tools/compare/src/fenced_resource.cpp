#include "dlock_compare/fenced_resource.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <system_error>

namespace dlock::compare {

namespace {

[[noreturn]] void throw_errno(const std::string& what) {
  throw std::system_error(errno, std::generic_category(), what);
}

// flock(LOCK_EX) for one scope; the resource's own mutual exclusion, not the lock under test.
class file_lock {
 public:
  explicit file_lock(int fd) : fd_(fd) {
    while (::flock(fd_, LOCK_EX) != 0)
      if (errno != EINTR) throw_errno("cannot lock the fenced resource's file");
  }
  ~file_lock() { ::flock(fd_, LOCK_UN); }
  file_lock(const file_lock&) = delete;
  file_lock& operator=(const file_lock&) = delete;

 private:
  int fd_;
};

}  // namespace

fenced_resource::fenced_resource(const std::filesystem::path& path)
    : fd_(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644)) {
  if (fd_ < 0)
    throw std::system_error(errno, std::generic_category(), "cannot open the fenced resource's file " + path.string());
}

fenced_resource::~fenced_resource() {
  if (fd_ >= 0) ::close(fd_);
}

std::uint64_t fenced_resource::read_highest() {
  std::uint64_t highest = 0;
  const auto n = ::pread(fd_, &highest, sizeof highest, 0);
  if (n < 0) throw_errno("cannot read the fenced resource's highest token");
  return n == sizeof highest ? highest : 0;  // a new (empty) file: nothing accepted yet
}

fenced_resource::admission fenced_resource::admit(std::optional<std::uint64_t> token) {
  const file_lock hold(fd_);
  const auto at = shared_clock::now();
  if (!token) return {fence_verdict::no_token, at};
  const auto highest = read_highest();
  if (*token < highest) return {fence_verdict::refused, at};
  if (*token > highest && ::pwrite(fd_, &*token, sizeof *token, 0) != sizeof *token)
    throw_errno("cannot record the fenced resource's highest token");
  return {fence_verdict::accepted, at};
}

std::uint64_t fenced_resource::highest_accepted() {
  const file_lock hold(fd_);
  return read_highest();
}

}  // namespace dlock::compare
