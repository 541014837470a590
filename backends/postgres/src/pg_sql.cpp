// The statements, one round trip each where PostgreSQL allows it (ON CONFLICT, RETURNING,
// data-modifying CTEs). Every time is clock_timestamp(): the server's clock, never the client's.
#include "pg_sql.hpp"

namespace dlock::pg {

using sql::arg;

namespace {
std::string quote(const std::string& id) { return "\"" + id + "\""; }
constexpr const char* expiry = "clock_timestamp() + $3::bigint * interval '1 millisecond'";
}  // namespace

std::string qualified(const sql::table_ref& t, const std::string& suffix) {
  return t.schema.empty() ? quote(t.table + suffix) : quote(t.schema) + "." + quote(t.table + suffix);
}

std::string channel_for(const sql::table_ref& t) { return "dlock_" + t.table; }

namespace {
// Milliseconds from now (the server's clock) to expires_at.
constexpr const char* ms_left = "(extract(epoch FROM (expires_at - clock_timestamp())) * 1000)::bigint";
// backend::list's range on the primary key (dialect.hpp: arg::upper, arg::unbounded): the prefix's
// bytes are compared as they are, never as a LIKE pattern.
constexpr const char* in_prefix_range = "name >= $1 AND (name < $2 OR $3 = 1)";

// Fair mode (fair=true only): the waiters table, arrival order from an identity column.
void add_fair_statements(sql::index_sql& s, const sql::table_ref& t) {
  const auto tab = qualified(t), seq = qualified(t, "_fence");
  const auto waiters = qualified(t, "_waiters");
  s.create_fair.push_back("CREATE TABLE IF NOT EXISTS " + waiters +
                          " (name bytea NOT NULL, owner text NOT NULL,"
                          " seq bigint GENERATED ALWAYS AS IDENTITY,"
                          " expires_at timestamptz NOT NULL, PRIMARY KEY (name, owner))");
  s.create_fair.push_back("CREATE INDEX IF NOT EXISTS " + quote(t.table + "_waiters_order") + " ON " + waiters +
                          " (name, seq)");
  // Join once (a new row takes the next seq) or refresh our expiry keeping our seq; other
  // owners' expired rows for this name are cleared on the way.
  s.enqueue = {{"WITH gone AS (DELETE FROM " + waiters +
                    "   WHERE name = $1 AND owner <> $2 AND expires_at <= clock_timestamp())"
                    " INSERT INTO " +
                    waiters + " (name, owner, expires_at) VALUES ($1, $2, " + expiry +
                    ")"
                    " ON CONFLICT (name, owner) DO UPDATE SET expires_at = EXCLUDED.expires_at",
                {arg::name, arg::owner, arg::ttl_ms}}};
  s.dequeue = {{"DELETE FROM " + waiters +
                    " WHERE name = $1 AND owner = $2"
                    " RETURNING pg_notify($3, encode(name, 'hex'))",
                {arg::name, arg::owner, arg::channel}}};
  // The sweeper's part for fair=true: waiters that died without leaving the queue.
  s.sweep_waiters = {{"DELETE FROM " + waiters + " WHERE expires_at <= clock_timestamp()", {}}};
  s.inspection.waiters = {
      {"SELECT owner FROM " + waiters + " WHERE name = $1 AND expires_at > clock_timestamp() ORDER BY seq",
       {arg::name}}};
  // The attempt: the insert/take-over of `acquire`, fed by a SELECT that yields a row only when
  // we already hold the lock (re-entry) or no live waiter of another owner is older than ours
  // (no row of ours: no live waiter at all). On grant our waiter row goes; on a miss it is
  // refreshed. One statement, one round trip.
  s.acquire_fair = {{"WITH mine AS (SELECT seq FROM " + waiters +
                         " WHERE name = $1 AND owner = $2),"
                         " granted AS (INSERT INTO " +
                         tab +
                         " AS l (name, owner, hold_count, expires_at, fence)"
                         "   SELECT $1, $2, 1, " +
                         expiry + ", nextval('" + seq +
                         "')"
                         "   WHERE EXISTS (SELECT 1 FROM " +
                         tab +
                         " h"
                         "                 WHERE h.name = $1 AND h.owner = $2 AND h.expires_at > clock_timestamp())"
                         "      OR NOT EXISTS (SELECT 1 FROM " +
                         waiters +
                         " w"
                         "                     WHERE w.name = $1 AND w.owner <> $2 AND w.expires_at > clock_timestamp()"
                         "                       AND w.seq < COALESCE((SELECT seq FROM mine), 9223372036854775807))"
                         "   ON CONFLICT (name) DO UPDATE SET"
                         "   hold_count = CASE WHEN l.owner = EXCLUDED.owner AND l.expires_at > clock_timestamp()"
                         "     THEN l.hold_count + 1 ELSE 1 END,"
                         "   fence = CASE WHEN l.owner = EXCLUDED.owner AND l.expires_at > clock_timestamp()"
                         "     THEN l.fence ELSE EXCLUDED.fence END,"
                         "   owner = EXCLUDED.owner, expires_at = EXCLUDED.expires_at"
                         "   WHERE l.expires_at <= clock_timestamp() OR l.owner = EXCLUDED.owner"
                         "   RETURNING l.fence, l.hold_count),"
                         " left_queue AS (DELETE FROM " +
                         waiters +
                         " WHERE name = $1 AND owner = $2"
                         "   AND EXISTS (SELECT 1 FROM granted)),"
                         " refreshed AS (UPDATE " +
                         waiters + " SET expires_at = " + expiry +
                         "   WHERE name = $1 AND owner = $2 AND NOT EXISTS (SELECT 1 FROM granted))"
                         " SELECT fence, hold_count FROM granted",
                     {arg::name, arg::owner, arg::ttl_ms}}};
}

// The watchdog's batched renewal (index_sql::renew_many, version_sql::renew_many): the rows named
// by `count` (name, owner[, version]) tuples, each extended in one UPDATE; RETURNING gives the
// position of each tuple whose row was still ours and live. $1 is the ttl; the tuples' values
// follow in order.
std::string renew_many_statement(const std::string& tab, std::size_t count, bool with_version) {
  const std::size_t per_row = with_version ? 3 : 2;
  std::string rows;
  rows.reserve(count * 48);
  for (std::size_t k = 0; k < count; ++k) {
    const auto first = 2 + per_row * k;
    if (k > 0) rows += ", ";
    rows += "($" + std::to_string(first) + "::bytea, $" + std::to_string(first + 1) + "::text, ";
    if (with_version) rows += "$" + std::to_string(first + 2) + "::bigint, ";
    rows += std::to_string(k) + ")";
  }
  return "UPDATE " + tab +
         " AS l SET expires_at = clock_timestamp() + $1::bigint * interval '1 millisecond'"
         " FROM (VALUES " +
         rows + (with_version ? ") AS b(name, owner, version, k)" : ") AS b(name, owner, k)") +
         " WHERE l.name = b.name AND l.owner = b.owner" + (with_version ? " AND l.version = b.version" : "") +
         " AND l.expires_at > clock_timestamp() RETURNING b.k";
}

}  // namespace

sql::index_sql index_statements(const sql::table_ref& t, bool fair) {
  const auto tab = qualified(t), seq = qualified(t, "_fence");
  sql::index_sql s;
  if (!t.schema.empty()) s.create.push_back("CREATE SCHEMA IF NOT EXISTS " + quote(t.schema));
  s.create.push_back("CREATE SEQUENCE IF NOT EXISTS " + seq);
  // `waiting`: true once an attempt of another owner missed on this row (see acquire). It lives
  // as long as the row: a release deletes the row, and the next grant inserts a fresh one.
  s.create.push_back("CREATE TABLE IF NOT EXISTS " + tab +
                     " (name bytea PRIMARY KEY, owner text NOT NULL, hold_count integer NOT NULL,"
                     " expires_at timestamptz NOT NULL, fence bigint NOT NULL,"
                     " waiting boolean NOT NULL DEFAULT false)");
  // A table created before the column existed gets it; looked up first, so the usual open takes
  // no ACCESS EXCLUSIVE lock on a table in use (ADD COLUMN IF NOT EXISTS alone always would).
  s.create.push_back("DO $dlock$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = '" + tab +
                     "'::regclass AND attname = 'waiting' AND NOT attisdropped) THEN ALTER TABLE " + tab +
                     " ADD COLUMN IF NOT EXISTS waiting boolean NOT NULL DEFAULT false; END IF; END $dlock$");
  // Insert, or take over an expired row, or re-enter our own live row: one statement. A live row
  // of another owner is not granted (no row comes back) but is marked `waiting` in the same
  // statement -- the waiter's interest, read by the release that deletes the row (below), so a
  // release NOTIFYs only when some attempt missed since the row was written.
  //
  // Why this cannot lose a wake-up: the mark is written by ON CONFLICT DO UPDATE on the newest
  // version of the row, under its row lock, in the very statement whose miss makes the caller
  // sleep (its listener is armed before, pg_notifier.hpp). A release's DELETE needs that row lock
  // too: either it committed first -- then the attempt found no row (or waited for the deleting
  // transaction and then inserted) and was granted, nothing to wake -- or it comes after the mark
  // and re-reads the marked row (READ COMMITTED re-checks the newest version), so its RETURNING
  // sees waiting = true and notifies after the mark committed. Once the row carries the mark, a
  // further miss only locks it (WHERE ... OR NOT l.waiting is false): no write per retry. A take-
  // over keeps the mark (waiters of the dead holder still sleep); a re-entry keeps it too.
  //
  // Why a flag in the row and not a waiters count or table: the row is the one thing a release
  // and a miss both already lock, so the interest costs nothing when nobody waits (the uncontended
  // acquire and release send exactly the statements they sent before, the release minus NOTIFY),
  // a count would have to be decremented by waiters that give up or die (a flag over-reports at
  // most one NOTIFY per row, never under-reports), and a separate table would be read under the
  // release's snapshot, which can predate a waiter's insert (a missed wake-up).
  //
  // One clock reading (`now` = the inserted expiry - ttl, taken once in VALUES) decides every
  // column, so the CASEs cannot disagree with each other the way separate clock_timestamp() calls
  // a microsecond apart could.
  const std::string now = "(EXCLUDED.expires_at - $3::bigint * interval '1 millisecond')";
  const std::string live = "l.expires_at > " + now;
  const std::string grant = "(l.expires_at <= " + now + " OR l.owner = EXCLUDED.owner)";
  s.acquire = {{"WITH attempt AS (INSERT INTO " + tab +
                    " AS l (name, owner, hold_count, expires_at, fence)"
                    " VALUES ($1, $2, 1, " +
                    expiry + ", nextval('" + seq +
                    "'))"
                    " ON CONFLICT (name) DO UPDATE SET"
                    " hold_count = CASE WHEN NOT (" +
                    live +
                    ") THEN 1 WHEN l.owner = EXCLUDED.owner"
                    "   THEN l.hold_count + 1 ELSE l.hold_count END,"
                    " fence = CASE WHEN " +
                    live +
                    " THEN l.fence ELSE EXCLUDED.fence END,"
                    " owner = CASE WHEN " +
                    live +
                    " THEN l.owner ELSE EXCLUDED.owner END,"
                    " expires_at = CASE WHEN " +
                    grant +
                    " THEN EXCLUDED.expires_at ELSE l.expires_at END,"
                    " waiting = l.waiting OR NOT " +
                    grant + " WHERE " + grant +
                    " OR NOT l.waiting"
                    " RETURNING l.fence, l.hold_count, l.owner)"
                    " SELECT fence, hold_count FROM attempt WHERE owner = $2",
                {arg::name, arg::owner, arg::ttl_ms}}};
  // One hold less, the row deleted at the last one; the release NOTIFYs only when the deleted row
  // carries a waiter's mark (a transaction that never calls pg_notify skips PostgreSQL's commit-
  // time notify lock, which serialises the commits of all notifying transactions). Fair mode
  // notifies on every release: its waiters queue in the waiters table and, when not first in
  // line, do not touch the lock row, so they leave no mark to read.
  const std::string notify = "pg_notify($3, encode(name, 'hex'))";
  s.release = {
      {"WITH dec AS (UPDATE " + tab +
           " SET hold_count = hold_count - 1"
           "   WHERE name = $1 AND owner = $2 AND expires_at > clock_timestamp() AND hold_count > 1 RETURNING 1),"
           " del AS (DELETE FROM " +
           tab +
           "   WHERE name = $1 AND owner = $2 AND expires_at > clock_timestamp() AND hold_count <= 1"
           "   RETURNING " +
           (fair ? notify : "CASE WHEN waiting THEN " + notify + " END") +
           ")"
           " SELECT 1 FROM dec UNION ALL SELECT 1 FROM del",
       {arg::name, arg::owner, arg::channel}}};
  s.renew = {{"UPDATE " + tab + " SET expires_at = " + expiry +
                  " WHERE name = $1 AND owner = $2 AND expires_at > clock_timestamp()",
              {arg::name, arg::owner, arg::ttl_ms}}};
  s.sweep = {{"DELETE FROM " + tab + " WHERE expires_at <= clock_timestamp()", {}}};
  s.probe = {{"SELECT owner FROM " + tab + " WHERE name = $1 AND expires_at > clock_timestamp()", {arg::name}}};
  s.renew_many = [tab](std::size_t count) { return renew_many_statement(tab, count, false); };
  s.renew_many_returns_positions = true;
  const std::string grant_columns = std::string("SELECT owner, fence, ") + ms_left + " FROM " + tab +
                                    " WHERE name = $1 AND expires_at > clock_timestamp()";
  s.inspection.holders = {{grant_columns, {arg::name}}};
  s.inspection.list = {{"SELECT encode(name, 'hex') FROM " + tab + " WHERE " + in_prefix_range +
                            " AND expires_at > clock_timestamp() ORDER BY name",
                        {arg::name, arg::upper, arg::unbounded}}};
  s.inspection.lock_holders = {{grant_columns + " FOR UPDATE", {arg::name}}};
  // Waiters sleep until a release is notified: the removal notifies as a release does.
  s.inspection.remove = {{"DELETE FROM " + tab +
                              " WHERE name = $1 AND expires_at > clock_timestamp()"
                              " RETURNING pg_notify($2, encode(name, 'hex'))",
                          {arg::name, arg::channel}}};

  add_fair_statements(s, t);
  return s;
}

sql::forupdate_sql forupdate_statements(const sql::table_ref& t) {
  const auto tab = qualified(t), seq = qualified(t, "_fence");
  sql::forupdate_sql s;
  if (!t.schema.empty()) s.create.push_back("CREATE SCHEMA IF NOT EXISTS " + quote(t.schema));
  s.create.push_back("CREATE TABLE IF NOT EXISTS " + tab +
                     " (name bytea PRIMARY KEY, fence bigint NOT NULL DEFAULT 0)");
  s.create.push_back("CREATE SEQUENCE IF NOT EXISTS " + seq);
  s.ensure_row = {{"INSERT INTO " + tab + " (name) VALUES ($1) ON CONFLICT (name) DO NOTHING", {arg::name}}};
  // The fencing token comes from a sequence: nextval is not rolled back with the holder's
  // transaction (a counter in the row was: a killed holder's increment vanished and the next
  // holder got the same token). The materialized CTE locks the row first; nextval runs in the
  // outer SELECT, once the row lock is ours, so tokens are ordered like the grants. One round
  // trip; the row itself is not written.
  s.lock_wait = {{"WITH l AS MATERIALIZED (SELECT name FROM " + tab +
                      " WHERE name = $1 FOR UPDATE)"
                      " SELECT nextval('" +
                      seq + "') FROM l",
                  {arg::name}}};
  s.lock_nowait = {{"WITH l AS MATERIALIZED (SELECT name FROM " + tab +
                        " WHERE name = $1 FOR UPDATE NOWAIT)"
                        " SELECT nextval('" +
                        seq + "') FROM l",
                    {arg::name}}};
  s.probe = {{"SELECT 1 FROM " + tab + " WHERE name = $1 FOR UPDATE NOWAIT", {arg::name}}};
  // A row lock is recorded in the row itself: xmax names the locking transaction. The transaction
  // still holds the lock while it is open, and pg_locks shows the server process of every open
  // transaction (the ExclusiveLock each holds on its own id). The fencing token (nextval) is not
  // stored.
  const std::string held = "SELECT encode(t.name, 'hex'), l.pid FROM " + tab +
                           " t JOIN pg_locks l ON l.locktype = 'transactionid' AND l.transactionid = t.xmax"
                           " AND l.mode = 'ExclusiveLock' AND l.granted WHERE ";
  s.held_rows = [exact = held + "t.name = $1", range = held + "t.name >= $1 AND (t.name < $2 OR $3 = 1)"](
                    sql::connection& c, const sql::forupdate_sql::name_range& r,
                    std::vector<sql::forupdate_sql::held_row>& rows, sql::sql_error& err) {
    std::vector<sql::param> ps{sql::bytes{r.from}};
    if (!r.exact) {
      ps.emplace_back(sql::bytes{r.upper});
      ps.emplace_back(std::int64_t{r.bounded ? 0 : 1});
    }
    sql::result out;
    if (!c.execute(r.exact ? exact : range, ps, out, err)) return false;
    for (const auto& row : out.rows) {
      if (row.size() < 2 || !row[0] || !row[1]) continue;
      sql::forupdate_sql::held_row h;
      h.hex_name = *row[0];
      h.session = std::stoll(*row[1]);
      rows.push_back(std::move(h));
    }
    return true;
  };
  s.session_label = "pid ";
  s.end_session = [](std::int64_t pid) { return "SELECT pg_terminate_backend(" + std::to_string(pid) + ")"; };
  return s;
}

sql::version_sql version_statements(const sql::table_ref& t) {
  const auto tab = qualified(t);
  sql::version_sql s;
  if (!t.schema.empty()) s.create.push_back("CREATE SCHEMA IF NOT EXISTS " + quote(t.schema));
  s.create.push_back(
      "CREATE TABLE IF NOT EXISTS " + tab +
      " (name bytea PRIMARY KEY, owner text, version bigint NOT NULL DEFAULT 0, expires_at timestamptz)");
  s.ensure_row = {{"INSERT INTO " + tab + " (name) VALUES ($1) ON CONFLICT (name) DO NOTHING", {arg::name}}};
  s.read = {{"SELECT version, CASE WHEN owner IS NULL OR expires_at <= clock_timestamp() THEN 1 ELSE 0 END"
             " FROM " +
                 tab + " WHERE name = $1",
             {arg::name}}};
  s.acquire = {{"UPDATE " + tab +
                    " SET owner = $1, version = version + 1,"
                    " expires_at = clock_timestamp() + $2::bigint * interval '1 millisecond'"
                    " WHERE name = $3 AND version = $4 AND (owner IS NULL OR expires_at <= clock_timestamp())",
                {arg::owner, arg::ttl_ms, arg::name, arg::version}}};
  s.release = {{"UPDATE " + tab +
                    " SET owner = NULL, expires_at = NULL"
                    " WHERE name = $1 AND owner = $2 AND version = $3 AND expires_at > clock_timestamp()"
                    " RETURNING pg_notify($4, encode(name, 'hex'))",
                {arg::name, arg::owner, arg::version, arg::channel}}};
  s.renew = {{"UPDATE " + tab +
                  " SET expires_at = clock_timestamp() + $1::bigint * interval '1 millisecond'"
                  " WHERE name = $2 AND owner = $3 AND version = $4 AND expires_at > clock_timestamp()",
              {arg::ttl_ms, arg::name, arg::owner, arg::version}}};
  s.probe = {{"SELECT owner FROM " + tab + " WHERE name = $1 AND owner IS NOT NULL AND expires_at > clock_timestamp()",
              {arg::name}}};
  s.renew_many = [tab](std::size_t count) { return renew_many_statement(tab, count, true); };
  s.renew_many_returns_positions = true;
  const std::string live = " WHERE name = $1 AND owner IS NOT NULL AND expires_at > clock_timestamp()";
  const std::string grant_columns = std::string("SELECT owner, version, ") + ms_left + " FROM " + tab + live;
  s.inspection.holders = {{grant_columns, {arg::name}}};
  s.inspection.list = {{"SELECT encode(name, 'hex') FROM " + tab + " WHERE " + in_prefix_range +
                            " AND owner IS NOT NULL AND expires_at > clock_timestamp() ORDER BY name",
                        {arg::name, arg::upper, arg::unbounded}}};
  s.inspection.lock_holders = {{grant_columns + " FOR UPDATE", {arg::name}}};
  // Freed, not deleted: the version must never restart. Waiters are notified as on a release.
  s.inspection.remove = {{"UPDATE " + tab + " SET owner = NULL, expires_at = NULL" + live +
                              " RETURNING pg_notify($2, encode(name, 'hex'))",
                          {arg::name, arg::channel}}};
  // The sweeper frees expired grants but keeps the rows: the version must never restart.
  s.sweep = {{"UPDATE " + tab +
                  " SET owner = NULL, expires_at = NULL"
                  " WHERE owner IS NOT NULL AND expires_at <= clock_timestamp()",
              {}}};
  return s;
}

}  // namespace dlock::pg
