// Fuzzes the table= and schema= parameters of the SQL schemes (parse_common_params): the only
// user text that reaches SQL. Lock names never do: they are bound as bytes (bytea/VARBINARY), so
// the table strategies have no name mapping to fuzz.
// Properties: a table or schema is accepted exactly when it is a plain identifier of allowed
// length; and every object name derived from an accepted table (<table>_fence,
// <table>_waiters, the NOTIFY channel dlock_<table>) fits PostgreSQL's 63 bytes, so the server
// never cuts two objects' names into one.
#include <cstdint>
#include <string>
#include <string_view>

#include "dlock/error.hpp"
#include "dlock/uri.hpp"
#include "dlock_fuzz/check.hpp"
#include "dlock_sql/params.hpp"

using dlock::fuzz::check;

namespace {

std::string percent_encoded(std::string_view s) {
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string out;
  for (const unsigned char c : s) {
    out += '%';
    out += hex[c >> 4];
    out += hex[c & 0xF];
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto [table, schema] = dlock::fuzz::two_strings(data, size);
  if (table.empty() || schema.empty()) return 0;  // an empty value is the URI's business, not ours
  dlock::uri u;
  try {
    u = dlock::uri::parse("postgres+index://127.0.0.1/db?table=" + percent_encoded(table) +
                          "&schema=" + percent_encoded(schema));
  } catch (const dlock::error&) {
    // Every byte is percent-encoded, so only a NUL byte (%00, refused in any URI) stops the parse.
    check(table.find('\0') != std::string::npos || schema.find('\0') != std::string::npos,
          "only a NUL byte makes the URI unparsable", table, schema);
    return 0;
  }
  const bool valid = dlock::sql::is_identifier(table) && table.size() <= dlock::sql::max_table_length &&
                     dlock::sql::is_identifier(schema);
  dlock::sql::common_params p;
  try {
    p = dlock::sql::parse_common_params(u, "dlock_index");
  } catch (const dlock::error&) {
    check(!valid, "a valid table and schema are accepted", table, schema);
    return 0;
  }
  check(valid, "only valid identifiers are accepted", table, schema);
  check(p.table.table == table && p.table.schema == schema, "the accepted names are kept as given", table, schema);
  for (const std::string_view suffix : {"_fence", "_waiters"})
    check(table.size() + suffix.size() <= 63, "a derived object name fits 63 bytes", table, suffix);
  check(std::string("dlock_").size() + table.size() <= 63, "the NOTIFY channel fits 63 bytes", table);
  return 0;
}
