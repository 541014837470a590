#include "dlock_compare/history.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <system_error>

namespace dlock::compare {

namespace {
[[noreturn]] void throw_errno(const std::string& what, const std::filesystem::path& path) {
  throw std::system_error(errno, std::generic_category(), what + " " + path.string());
}
}  // namespace

history_writer::history_writer(const std::filesystem::path& path)
    : fd_(::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644)) {
  if (fd_ < 0) throw_errno("cannot open the history file", path);
}

history_writer::~history_writer() {
  if (fd_ >= 0) ::close(fd_);
}

void history_writer::append(const event& e) {
  // O_APPEND: the seek to the end and the write are one atomic step for a regular file, so each
  // record lands whole after every record written before it, whichever process wrote that one.
  for (;;) {
    const auto n = ::write(fd_, &e, sizeof e);
    if (n == static_cast<ssize_t>(sizeof e)) return;
    if (n < 0 && errno == EINTR) continue;
    throw std::system_error(n < 0 ? errno : EIO, std::generic_category(), "cannot append an event to the history file");
  }
}

void history_writer::append_now(std::uint32_t client, std::uint32_t attempt, event_kind kind,
                                std::optional<std::uint64_t> token) {
  append(make_event(kind, client, attempt, shared_clock::now(), token));
}

std::vector<event> read_history(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::system_error(errno, std::generic_category(), "cannot read the history file " + path.string());
  std::vector<event> events;
  event e;
  while (in.read(reinterpret_cast<char*>(&e), sizeof e)) {
    if (e.format != event::format_tag)
      throw std::runtime_error("history file " + path.string() + ": the record at byte " +
                               std::to_string(events.size() * sizeof e) +
                               " is not a dlock compare event (expected format tag DLC1)");
    events.push_back(e);
  }
  return events;
}

}  // namespace dlock::compare
