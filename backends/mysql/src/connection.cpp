#include "connection.hpp"

#include <cppconn/connection.h>
#include <cppconn/exception.h>
#include <cppconn/prepared_statement.h>
#include <cppconn/resultset.h>
#include <cppconn/statement.h>
#include <mysql_driver.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <optional>
#include <set>
#include <string_view>

#include "dlock_sql/deadline.hpp"

namespace dlock::mysql {

connection_settings connection_settings::from_uri(const uri& u) {
  connection_settings s;
  s.redacted_uri = u.redacted();
  if (u.hosts().size() != 1)
    throw error(errc::invalid_uri,
                u.redacted() + ": expected exactly one host (mysql://user:password@host:port/database)");
  s.host = u.hosts().front().host;
  s.port = u.hosts().front().port_or(3306);
  s.user = u.user();
  s.password = u.password().value_or("");
  if (u.path().size() > 1) s.database = u.path().substr(1);
  if (s.database.empty() || s.database.find('/') != std::string::npos)
    throw error(errc::invalid_uri, u.redacted() + ": expected the database as the path (mysql://host:port/<database>)");
  if (auto d = u.get_duration("connect_timeout")) s.connect_timeout = *d;
  if (auto d = u.get_duration("command_timeout")) s.command_timeout = *d;
  if (s.connect_timeout < std::chrono::seconds{1} || s.command_timeout < std::chrono::seconds{1})
    throw error(errc::invalid_uri, u.redacted() + ": connect_timeout and command_timeout must be at least 1s "
                                                  "(the client library counts whole seconds)");
  return s;
}

errc classify(const ::sql::SQLException& e) noexcept {
  using namespace error_number;
  switch (e.getErrorCode()) {
    case access_denied: return errc::authentication_failed;
    case server_gone:
    case cant_connect:
    case cant_connect_local:
    case unknown_host:
    case lost_connection:
    case connection_killed:
    case server_shutdown:
    case query_interrupted: return errc::backend_unavailable;
    default: break;
  }
  // SQLSTATE class 08: connection exception. HY000 with error code 0: the connector's own
  // "connection is closed" style errors.
  const std::string& state = e.getSQLState();
  if (state.rfind("08", 0) == 0) return errc::backend_unavailable;
  if (e.getErrorCode() == 0) return errc::backend_unavailable;
  return errc::backend_error;
}

std::string describe(const ::sql::SQLException& e, const std::string& what) {
  std::string m = what + ": MySQL error " + std::to_string(e.getErrorCode());
  if (!e.getSQLState().empty()) m += " (SQLSTATE " + e.getSQLState() + ")";
  m += ": ";
  m += e.what();
  switch (e.getErrorCode()) {
    case error_number::access_denied: m += " (check the user and password in the URI)"; break;
    case error_number::unknown_database: m += " (the URI's path names the database; create it first)"; break;
    default: break;
  }
  return m;
}

namespace {
// A client-library object closed, then deleted; a close that throws leaves nothing to do.
template <class Closable>
void close_and_delete(Closable* p) noexcept {
  if (!p) return;
  try {
    p->close();
  } catch (...) {
  }
  delete p;
}
}  // namespace

void connection_deleter::operator()(::sql::Connection* c) const noexcept { close_and_delete(c); }

::sql::mysql::MySQL_Driver& loaded_driver() {
  // get_mysql_driver_instance initialises the client library once; not safe to race.
  static std::mutex init_mutex;
  const std::lock_guard lock(init_mutex);
  static ::sql::mysql::MySQL_Driver* d = ::sql::mysql::get_mysql_driver_instance();
  return *d;
}

namespace {
int whole_seconds(std::chrono::milliseconds d) {
  return static_cast<int>(std::max<std::int64_t>(1, std::chrono::ceil<std::chrono::seconds>(d).count()));
}
// Inside an acquire's deadline the connect may not outlast it: the client library counts whole
// seconds, so what is left is rounded down.
int whole_seconds_within(std::chrono::milliseconds d) {
  return static_cast<int>(std::max<std::int64_t>(1, std::chrono::floor<std::chrono::seconds>(d).count()));
}
}  // namespace

connection_ptr connect(const connection_settings& s) {
  ::sql::mysql::MySQL_Driver* d = &loaded_driver();
  ::sql::ConnectOptionsMap options;
  options["hostName"] = ::sql::SQLString(s.host);
  options["port"] = static_cast<int>(s.port);
  options["userName"] = ::sql::SQLString(s.user);
  options["password"] = ::sql::SQLString(s.password);
  options["schema"] = ::sql::SQLString(s.database);
  options["OPT_CONNECT_TIMEOUT"] = dlock::sql::io_deadline() == std::chrono::steady_clock::time_point::max()
                                       ? whole_seconds(s.connect_timeout)
                                       : whole_seconds_within(s.connect_timeout);
  options["OPT_READ_TIMEOUT"] = whole_seconds(s.command_timeout);
  options["OPT_WRITE_TIMEOUT"] = whole_seconds(s.command_timeout);
  options["OPT_RECONNECT"] = false;
  options["CLIENT_MULTI_STATEMENTS"] = false;
  // UPDATE reports the rows it matched, not only those it changed: "was it ours?" is a row count.
  options["CLIENT_FOUND_ROWS"] = true;
  try {
    connection_ptr c(d->connect(options));
    c->setAutoCommit(true);
    return c;
  } catch (const ::sql::SQLException& e) {
    errc code = classify(e);
    if (e.getErrorCode() == error_number::unknown_database) code = errc::backend_error;
    throw error(code, describe(e, "connecting to " + s.redacted_uri));
  }
}

void statement_deleter::operator()(::sql::PreparedStatement* p) const noexcept { close_and_delete(p); }

namespace {
int port_of(const sockaddr_storage& a) {
  if (a.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in&>(a).sin_port);
  if (a.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6&>(a).sin6_port);
  return -1;
}

// Calls `visit(fd)` for each file descriptor of this process (/proc/self/fd) until it returns false.
// Other threads open and close descriptors meanwhile: a number listed here may be closed, or
// reused for another file, by the time `visit` looks at it.
template <class Visit>
void for_each_fd(Visit visit) {
  std::unique_ptr<DIR, int (*)(DIR*)> dir(opendir("/proc/self/fd"), closedir);
  if (!dir) return;
  while (dirent* e = readdir(dir.get())) {
    int fd = -1;
    if (std::from_chars(e->d_name, e->d_name + std::strlen(e->d_name), fd).ec != std::errc()) continue;
    if (!visit(fd)) return;
  }
}

// The inode of the socket descriptor `fd` names now, read from its /proc/self/fd link
// ("socket:[12345]") rather than with fstat: the descriptor may be another thread's, closed by it
// at any moment, and the link is read without touching the descriptor. nullopt: not a socket, or
// closed.
std::optional<ino_t> socket_inode(int fd) {
  char path[32];
  std::snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  char target[64];
  const ssize_t n = ::readlink(path, target, sizeof target);
  constexpr std::string_view prefix = "socket:[";
  if (n <= 0 || static_cast<std::size_t>(n) >= sizeof target) return std::nullopt;
  const std::string_view link(target, static_cast<std::size_t>(n));
  if (!link.starts_with(prefix) || !link.ends_with(']')) return std::nullopt;
  ino_t inode = 0;
  if (std::from_chars(link.data() + prefix.size(), link.data() + link.size() - 1, inode).ec != std::errc())
    return std::nullopt;
  return inode;
}

// Whether `fd` names the socket `inode` and that socket is connected to `server_port`. The
// descriptor may be another thread's, closed and its number reused between any two calls here:
// the answer counts only when the number named the same socket before and after getpeername
// (socket inodes are not reused while the socket lives).
bool connected_to(int fd, ino_t inode, int server_port) {
  sockaddr_storage peer{};
  socklen_t pl = sizeof peer;
  return getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &pl) == 0 && port_of(peer) == server_port &&
         socket_inode(fd) == inode;
}

// Connector/C++ 1.1 does not expose its socket. The server tells us our client port
// ("127.0.0.1:54321" in PROCESSLIST.HOST); the socket of this process bound to that local port
// and connected to the server's port is ours.
int find_socket(const std::string& processlist_host, int server_port) {
  const auto colon = processlist_host.rfind(':');
  if (colon == std::string::npos) return -1;  // a unix socket connection: "localhost"
  int local_port = -1;
  const char* first = processlist_host.data() + colon + 1;
  const char* last = processlist_host.data() + processlist_host.size();
  if (std::from_chars(first, last, local_port).ec != std::errc()) return -1;
  int found = -1;
  bool ambiguous = false;  // two of them (should not happen): do not guess
  for_each_fd([&](int fd) {
    const auto inode = socket_inode(fd);
    if (!inode) return true;
    sockaddr_storage local{};
    socklen_t ll = sizeof local;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &ll) != 0) return true;
    if (port_of(local) != local_port || !connected_to(fd, *inode, server_port)) return true;
    ambiguous = found != -1;
    found = fd;
    return !ambiguous;
  });
  return ambiguous ? -1 : found;
}

std::set<ino_t> socket_inodes() {
  std::set<ino_t> out;
  for_each_fd([&](int fd) {
    if (const auto inode = socket_inode(fd)) out.insert(*inode);
    return true;
  });
  return out;
}

// The socket of a connection just opened: the one socket to the server's port that did not exist
// before (by inode: a number freed and reused meanwhile is not mistaken for it). -1 when there is
// none or more than one (connections opened at the same instant by other threads).
int new_socket_to(int server_port, const std::set<ino_t>& before) {
  int found = -1;
  bool ambiguous = false;
  for_each_fd([&](int fd) {
    const auto inode = socket_inode(fd);
    if (!inode || before.contains(*inode) || !connected_to(fd, *inode, server_port)) return true;
    ambiguous = found != -1;
    found = fd;
    return !ambiguous;
  });
  return ambiguous ? -1 : found;
}
}  // namespace

std::set<ino_t> sockets_before_connect() {
  try {
    return socket_inodes();
  } catch (...) {
    return {};
  }
}

session::session(connection_ptr c, int server_port, const std::set<ino_t>& sockets_before) : connection_(std::move(c)) {
  socket_fd_ = new_socket_to(server_port, sockets_before);
  // The setup statements belong to the connect: inside an acquire's deadline they are bounded by
  // it (dlock_sql/deadline.hpp) when the socket is known.
  dlock::sql::socket_guard guard(socket_fd_);
  std::unique_ptr<::sql::Statement> st(connection_->createStatement());
  // Whatever the server's default: mysql+index's grants rely on REPEATABLE READ's locking reads
  // in INSERT ... SELECT (shared next-key locks on what the check reads), which READ COMMITTED
  // would turn into plain snapshot reads (units.hpp: one name, one lock).
  st->execute("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ");
  std::unique_ptr<::sql::ResultSet> rs(st->executeQuery(
      socket_fd_ >= 0 ? "SELECT CONNECTION_ID()"
                      : "SELECT ID, HOST FROM information_schema.PROCESSLIST WHERE ID = CONNECTION_ID()"));
  if (rs->next()) {
    server_id_ = rs->getUInt64(1);
    if (socket_fd_ < 0 && !rs->isNull(2)) socket_fd_ = find_socket(std::string(rs->getString(2)), server_port);
  }
  // Cut as the last answer came: the session is ending on the server, so it is not handed out.
  if (guard.disarm())
    throw error(errc::backend_unavailable, "connecting: the caller's deadline shut the new connection down");
}

bool session::poll_alive() const noexcept {
  if (socket_fd_ < 0) return true;
  char byte;
  const ssize_t n = ::recv(socket_fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n == 0) return false;  // EOF: the server closed the session
  if (n > 0) return false;   // unasked bytes while idle: the server's goodbye (killed / shutdown)
  return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
}

session::~session() {
  statements_.clear();  // before the connection they belong to
}

::sql::PreparedStatement& session::prepared(const std::string& text) {
  for (auto& [sql_text, st] : statements_)
    if (sql_text == text) return *st;
  statement_ptr st(connection_->prepareStatement(text));
  statements_.emplace_back(text, std::move(st));
  return *statements_.back().second;
}

void session::execute(const std::string& text) {
  std::unique_ptr<::sql::Statement> st(connection_->createStatement());
  st->execute(text);
}

bool session::closed() const noexcept {
  try {
    return connection_->isClosed();
  } catch (...) {
    return true;
  }
}

}  // namespace dlock::mysql
