#pragma once
// Direct server access for the tests and the conformance hooks: is a name held, and break it the
// way an operator would (pg_terminate_backend of the holder's session for connection-bound
// schemes; DELETE of the row for the table schemes, whose grants outlive connections).
#include <string>
#include <string_view>

#include "pg_connection.hpp"

namespace dlock::pg::testing {

// A libpq connection for the URI (any postgres+* scheme). Throws std::runtime_error.
pgconn_ptr connect(const std::string& uri_text);
// Runs one statement with text/bytea parameters; throws std::runtime_error with the message.
sql::result exec(PGconn* c, const std::string& sql, std::vector<sql::param> params = {});

std::string table_of(const std::string& uri_text, std::string_view default_table);
bool held_on_server(const std::string& uri_text, std::string_view name);
// Returns the backend pid terminated (0 when none: table schemes delete the row instead).
int break_lock(const std::string& uri_text, std::string_view name);

// postgres+advisory's reader-writer lock and semaphore, as pg_locks shows them.
struct advisory_row {
  int pid;
  std::string mode;  // ExclusiveLock or ShareLock
  bool granted;
};
// Every session holding or waiting for the name's one-int8 key (the mutex's and the rw lock's).
std::vector<advisory_row> advisory_rows(const std::string& uri_text, std::string_view name);
// The sessions holding one of the name's first `slots` semaphore slots (two-int4 keys), one row
// per slot held.
std::vector<advisory_row> slot_rows(const std::string& uri_text, std::string_view name, std::uint32_t slots);
void terminate(const std::string& uri_text, int pid);

}  // namespace dlock::pg::testing
