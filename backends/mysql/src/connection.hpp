#pragma once
// One MariaDB/MySQL connection through Connector/C++ 1.1 (the legacy JDBC-style API), the
// settings parsed from the URI and the mapping of Connector/C++ exceptions to dlock::errc. The
// pool is sql_common's (sql_connection.hpp: make_pool). Connector/C++ throws; everything above
// this file is noexcept, so every call into the connector is wrapped (sql_connection.cpp: run).
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <system_error>
#include <vector>

#include <sys/types.h>

#include "dlock/error.hpp"
#include "dlock/uri.hpp"

namespace sql {
class Connection;
class PreparedStatement;
class SQLException;
namespace mysql {
class MySQL_Driver;
}  // namespace mysql
}  // namespace sql

namespace dlock::mysql {

struct connection_settings {
  std::string host = "127.0.0.1";
  std::uint16_t port = 3306;
  std::string user;
  std::string password;  // never formatted into a message
  std::string database;
  std::chrono::milliseconds connect_timeout{std::chrono::seconds{5}};
  // Socket read/write timeout of every statement; a server-side wait (GET_LOCK(name, n)) is cut
  // into pieces shorter than this.
  std::chrono::milliseconds command_timeout{std::chrono::seconds{30}};
  std::string redacted_uri;

  static connection_settings from_uri(const uri& u);
};

// MySQL / MariaDB client and server error numbers we classify.
namespace error_number {
inline constexpr int access_denied = 1045;
inline constexpr int unknown_database = 1049;
inline constexpr int duplicate_key = 1062;
inline constexpr int lock_wait_timeout = 1205;
inline constexpr int deadlock = 1213;
inline constexpr int query_interrupted = 1317;
inline constexpr int lock_nowait_mysql = 3572;  // MySQL 8: NOWAIT found the row locked
inline constexpr int server_gone = 2006;
inline constexpr int cant_connect = 2003;
inline constexpr int unknown_host = 2005;
inline constexpr int cant_connect_local = 2002;
inline constexpr int lost_connection = 2013;
inline constexpr int connection_killed = 1927;  // MariaDB ER_CONNECTION_KILLED
inline constexpr int server_shutdown = 1053;
}  // namespace error_number

// The errc for a connector exception: authentication_failed, backend_unavailable (unreachable,
// dropped, killed, timed out), backend_error (anything else the server said).
errc classify(const ::sql::SQLException& e) noexcept;
// "<what>: MySQL error <n> (SQLSTATE xxxxx): <server message>"; never contains the password
// (the server's 1045 message names the user and host only).
std::string describe(const ::sql::SQLException& e, const std::string& what);

struct connection_deleter {
  void operator()(::sql::Connection* c) const noexcept;
};
using connection_ptr = std::unique_ptr<::sql::Connection, connection_deleter>;

// Opens one connection with the settings' timeouts, auto-reconnect OFF (a silent reconnect
// would drop every GET_LOCK and row lock the session held without telling us). Throws
// dlock::error: authentication_failed, backend_unavailable or backend_error (unknown database).
connection_ptr connect(const connection_settings& s);

// Connector/C++'s driver, the client library initialised on first use (from any thread).
::sql::mysql::MySQL_Driver& loaded_driver();

struct statement_deleter {
  void operator()(::sql::PreparedStatement* p) const noexcept;
};
using statement_ptr = std::unique_ptr<::sql::PreparedStatement, statement_deleter>;

// One connection with its prepared statements cached (prepare once per connection: a statement
// then costs one round trip to execute).
// The inodes of this process's sockets, taken just before connecting: the session finds its own
// socket as the one new socket to the server's port (no round trip), else asks the server.
std::set<ino_t> sockets_before_connect();

class session {
 public:
  session(connection_ptr c, int server_port, const std::set<ino_t>& sockets_before);
  ~session();
  ::sql::Connection& connection() noexcept { return *connection_; }
  // The statement for this SQL text, prepared on first use. Throws ::sql::SQLException.
  ::sql::PreparedStatement& prepared(const std::string& text);
  // Plain statement without parameters (SET SESSION ..., COMMIT). Throws ::sql::SQLException.
  void execute(const std::string& text);
  bool closed() const noexcept;
  // Without a round trip, and only while no statement is in flight: false when the server has
  // closed this session (KILL, shutdown) as far as the socket shows: EOF, or bytes the server
  // sent unasked (MariaDB's "connection killed" packet). True when it cannot tell.
  bool poll_alive() const noexcept;
  // This connection's TCP socket (-1: unknown), for shutting it down when its lease is lost.
  int socket_fd() const noexcept { return socket_fd_; }
  // The server's id of this session (CONNECTION_ID()), which KILL takes.
  std::uint64_t server_id() const noexcept { return server_id_; }

 private:
  connection_ptr connection_;
  int socket_fd_ = -1;  // this connection's TCP socket, found through its local port; -1: unknown
  std::uint64_t server_id_ = 0;
  std::vector<std::pair<std::string, statement_ptr>> statements_;
};
using session_ptr = std::unique_ptr<session>;

}  // namespace dlock::mysql
