#include "dialect.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace dlock::mysql {

using dlock::sql::arg;

std::string quoted_table(const dlock::sql::table_ref& t, const std::string& suffix) {
  std::string q;
  if (!t.schema.empty()) q += "`" + t.schema + "`.";
  return q + "`" + t.table + suffix + "`";
}

namespace {
// expiry on the server's clock: NOW(6) + ttl (milliseconds, bound)
constexpr const char* expiry_from_now = "TIMESTAMPADD(MICROSECOND, ? * 1000, NOW(6))";
// Milliseconds from now (the server's clock) to expires_at.
constexpr const char* ms_left = "TIMESTAMPDIFF(MICROSECOND, NOW(6), expires_at) DIV 1000";
// backend::list's range on the primary key (dialect.hpp: arg::upper, arg::unbounded): the prefix's
// bytes are compared as they are, never as a LIKE pattern.
constexpr const char* in_prefix_range = "name >= ? AND (name < ? OR ? = 1)";

// The fencing sequence <table>_fence, created only when information_schema (which takes no
// metadata lock) does not list it: CREATE SEQUENCE IF NOT EXISTS on an existing sequence waits
// for every open transaction that drew from it, and stalls every NEXTVAL behind it (dialect.hpp).
dlock::sql::ddl_statement create_fence_sequence(const dlock::sql::table_ref& t) {
  return {"CREATE SEQUENCE IF NOT EXISTS " + quoted_table(t, "_fence") + " ENGINE=InnoDB",
          "SELECT 1 FROM information_schema.TABLES WHERE TABLE_SCHEMA = COALESCE(NULLIF(?, ''), DATABASE())"
          " AND TABLE_NAME = ?",
          {t.schema, t.table + "_fence"}};
}

// Fair mode (fair=true only): the waiters table, arrival order from AUTO_INCREMENT. The queue is
// read by a plain SELECT (a consistent read, no locks), never inside an INSERT ... SELECT: that
// would take shared next-key locks on the waiters index, whose gaps span neighbouring names, and
// attempts on unrelated names would deadlock each other (measured: try_acquire of a free name
// refused, and joining the queue failing, with 12 threads waiting on two names). Exclusion does not depend
// on the queue: the attempt itself is `acquire`, the lock row's primary key.
void add_fair_sql(dlock::sql::index_sql& s, const dlock::sql::table_ref& t) {
  const std::string tbl = quoted_table(t);
  const std::string waiters = quoted_table(t, "_waiters");
  s.create_fair = {
      "CREATE TABLE IF NOT EXISTS " + waiters +
          " (seq BIGINT NOT NULL AUTO_INCREMENT, name VARBINARY(512) NOT NULL, owner VARBINARY(255) NOT NULL,"
          " expires_at DATETIME(6) NOT NULL, PRIMARY KEY (seq), UNIQUE KEY (name, owner), KEY (name, seq))"
          " ENGINE=InnoDB",
  };
  // Join once (a new row takes the next seq) or refresh our expiry keeping our seq.
  const dlock::sql::statement join_or_refresh = {"INSERT INTO " + waiters +
                                                     " (name, owner, expires_at) VALUES (?, ?, " + expiry_from_now +
                                                     ") ON DUPLICATE KEY UPDATE expires_at = VALUES(expires_at)",
                                                 {arg::name, arg::owner, arg::ttl_ms}};
  // Joining also clears other owners' expired rows of the name (waiters that died queued).
  s.enqueue = {
      {"DELETE FROM " + waiters + " WHERE name = ? AND owner <> ? AND expires_at <= NOW(6)", {arg::name, arg::owner}},
      join_or_refresh,
  };
  s.fair_refresh = {join_or_refresh};
  s.dequeue = {{"DELETE FROM " + waiters + " WHERE name = ? AND owner = ?", {arg::name, arg::owner}}};
  // The sweeper's part for fair=true: waiters that died without leaving the queue.
  s.sweep_waiters = {{"DELETE FROM " + waiters + " WHERE expires_at <= NOW(6)", {}}};
  s.inspection.waiters = {
      {"SELECT owner FROM " + waiters + " WHERE name = ? AND expires_at > NOW(6) ORDER BY seq", {arg::name}}};
  s.fair_gate = {
      {"SELECT 1 FROM DUAL WHERE NOT EXISTS (SELECT 1 FROM " + tbl +
           " h WHERE h.name = ? AND h.owner = ? AND h.expires_at > NOW(6))"
           " AND EXISTS (SELECT 1 FROM " +
           waiters +
           " w WHERE w.name = ? AND w.owner <> ? AND w.expires_at > NOW(6)"
           "   AND w.seq < COALESCE((SELECT m.seq FROM " +
           waiters + " m WHERE m.name = ? AND m.owner = ?), 9223372036854775807))",
       {arg::name, arg::owner, arg::name, arg::owner, arg::name, arg::owner}},
  };
}
// The watchdog's batched renewal (index_sql::renew_many, version_sql::renew_many): one UPDATE of
// the rows named by `count` (name, owner[, version]) tuples that are still ours and live. No
// RETURNING on UPDATE in MariaDB: rows_affected (the rows matched: CLIENT_FOUND_ROWS) says
// whether every one was. The row constructor IN is a range on the primary key.
std::string renew_many_statement(const std::string& tbl, std::size_t count, bool with_version) {
  const std::string tuple = with_version ? "(?, ?, ?)" : "(?, ?)";
  std::string rows;
  rows.reserve(count * (tuple.size() + 2));
  for (std::size_t k = 0; k < count; ++k) rows += (k == 0 ? "" : ", ") + tuple;
  return "UPDATE " + tbl + " SET expires_at = " + expiry_from_now + " WHERE " +
         (with_version ? "(name, owner, version)" : "(name, owner)") + " IN (" + rows + ") AND expires_at > NOW(6)";
}

}  // namespace

dlock::sql::index_sql index_dialect(const dlock::sql::table_ref& t) {
  const std::string tbl = quoted_table(t);
  const std::string seq = quoted_table(t, "_fence");
  const std::string holders = quoted_table(t, "_holders");
  dlock::sql::index_sql s;
  s.create = {
      "CREATE TABLE IF NOT EXISTS " + tbl +
          " (name VARBINARY(512) NOT NULL, owner VARBINARY(255) NOT NULL, hold_count INT NOT NULL,"
          " fence BIGINT NOT NULL, expires_at DATETIME(6) NOT NULL, PRIMARY KEY (name), KEY (expires_at))"
          " ENGINE=InnoDB",
      // One strictly increasing source of fencing tokens: a released row is deleted, so the fence
      // cannot live in it alone.
      create_fence_sequence(t),
  };
  // Insert; on a duplicate key, in the same statement: take over an expired row (new fence,
  // count 1), or count a re-entry of our own live row; another owner's live row is left alone.
  // MariaDB evaluates the assignments left to right, each seeing the previous ones, so the
  // conditions come first and `owner`/`expires_at` are assigned last. NOW(6) is one instant
  // per statement. RETURNING reads the row as this statement left it, under its row lock: its
  // fence when the row is ours now (inserted, taken over or re-entered), NULL when another
  // owner's live row was left alone. One autocommitted statement, one round trip.
  // One name, one lock: the row is offered (FROM DUAL WHERE) only while the name's reader-writer
  // lock and semaphore have no live holder row (<table>_holders, units.hpp); with one, nothing is
  // inserted or changed and nothing is returned (units_in_use then says which kind holds it).
  // INSERT ... SELECT reads <table>_holders with shared next-key locks (REPEATABLE READ, which
  // every connection sets), and the units' grant reads this table the same way before it inserts
  // its holder row: two racing grants of the two kinds wait for each other, and InnoDB rolls one
  // back as a deadlock; its retry finds the other's row.
  s.acquire = {
      {"INSERT INTO " + tbl + " (name, owner, hold_count, fence, expires_at) SELECT ?, ?, 1, NEXTVAL(" + seq + "), " +
           expiry_from_now + " FROM DUAL WHERE NOT EXISTS (SELECT 1 FROM " + holders +
           " u WHERE u.name = ? AND u.expires_at > NOW(6))"
           " ON DUPLICATE KEY UPDATE"
           " hold_count = IF(expires_at <= NOW(6), 1, IF(owner = VALUES(owner), hold_count + 1, hold_count)),"
           " fence = IF(expires_at <= NOW(6), VALUES(fence), fence),"
           " owner = IF(expires_at <= NOW(6), VALUES(owner), owner),"
           " expires_at = IF(expires_at <= NOW(6) OR owner = VALUES(owner), VALUES(expires_at), expires_at)"
           " RETURNING IF(owner = ?, fence, NULL), hold_count",
       {arg::name, arg::owner, arg::ttl_ms, arg::name, arg::owner}},
  };
  s.units_in_use = {
      {"SELECT kind, SUM(units) FROM " + holders + " WHERE name = ? AND expires_at > NOW(6) GROUP BY kind",
       {arg::name}}};
  // The common case, the last hold, is one statement: our live row with hold_count 1 is deleted
  // (the fence lives in the SEQUENCE, so nothing is lost). Only when that matched no row does the
  // strategy run release_reentered: one hold fewer of our live re-entered row. No row matched by
  // either -> not_owner (expired, maybe taken over, or deleted by an operator).
  s.release = {{"DELETE FROM " + tbl + " WHERE name = ? AND owner = ? AND hold_count = 1 AND expires_at > NOW(6)",
                {arg::name, arg::owner}}};
  s.release_reentered = {{"UPDATE " + tbl +
                              " SET hold_count = hold_count - 1"
                              " WHERE name = ? AND owner = ? AND hold_count > 1 AND expires_at > NOW(6)",
                          {arg::name, arg::owner}}};
  s.renew = {{"UPDATE " + tbl + " SET expires_at = " + expiry_from_now +
                  " WHERE name = ? AND owner = ? AND expires_at > NOW(6)",
              {arg::ttl_ms, arg::name, arg::owner}}};
  s.sweep = {{"DELETE FROM " + tbl + " WHERE expires_at <= NOW(6)", {}}};
  s.probe = {{"SELECT owner FROM " + tbl + " WHERE name = ? AND expires_at > NOW(6)", {arg::name}}};
  s.renew_many = [tbl](std::size_t count) { return renew_many_statement(tbl, count, false); };
  const std::string grant_columns =
      std::string("SELECT owner, fence, ") + ms_left + " FROM " + tbl + " WHERE name = ? AND expires_at > NOW(6)";
  s.inspection.holders = {{grant_columns, {arg::name}}};
  s.inspection.list = {
      {"SELECT HEX(name) FROM " + tbl + " WHERE " + in_prefix_range + " AND expires_at > NOW(6) ORDER BY name",
       {arg::name, arg::upper, arg::unbounded}}};
  s.inspection.lock_holders = {{grant_columns + " FOR UPDATE", {arg::name}}};
  s.inspection.remove = {{"DELETE FROM " + tbl + " WHERE name = ? AND expires_at > NOW(6)", {arg::name}}};
  add_fair_sql(s, t);
  return s;
}

dlock::sql::units_sql units_dialect(const dlock::sql::table_ref& t) {
  const std::string anchors = quoted_table(t, "_units");
  const std::string holders = quoted_table(t, "_holders");
  const std::string seq = quoted_table(t, "_fence");
  const std::string live_units = "(SELECT COALESCE(SUM(h.units), 0) FROM " + holders +
                                 " h WHERE h.name = a.name AND h.kind = a.kind AND h.expires_at > NOW(6))";
  // One name, one lock: the mutex's live row (the lock table itself) counts as a writer of the
  // reader-writer lock, and refuses the semaphore; the other pool of the name (a semaphore beside
  // a reader-writer lock) refuses this one. Read with shared locks (INSERT ... SELECT at
  // REPEATABLE READ), as the mutex's statement reads the holders: see index_dialect.
  const std::string mutex_live =
      "(SELECT 1 FROM " + quoted_table(t) + " m WHERE m.name = a.name AND m.expires_at > NOW(6))";
  const std::string other_kind_live =
      "(SELECT 1 FROM " + holders + " o WHERE o.name = a.name AND o.kind <> a.kind AND o.expires_at > NOW(6))";
  dlock::sql::units_sql s;
  s.create = {
      "CREATE TABLE IF NOT EXISTS " + anchors +
          " (name VARBINARY(512) NOT NULL, kind TINYINT NOT NULL, max_count BIGINT NOT NULL,"
          " writer_waiting_until DATETIME(6) NULL, writer_waiting VARBINARY(255) NULL, PRIMARY KEY (name, kind))"
          " ENGINE=InnoDB",
      "CREATE TABLE IF NOT EXISTS " + holders +
          " (name VARBINARY(512) NOT NULL, kind TINYINT NOT NULL, grant_id VARBINARY(320) NOT NULL,"
          " units BIGINT NOT NULL, fence BIGINT NOT NULL, expires_at DATETIME(6) NOT NULL,"
          " PRIMARY KEY (name, kind, grant_id), KEY (expires_at)) ENGINE=InnoDB",
      // The mutex's source of fencing tokens, shared: one strictly increasing order for every grant.
      create_fence_sequence(t),
  };
  // The anchor row is read FOR UPDATE, so grants of one pool are serialized on it: the sum of the
  // live holders' units and the insert of ours cannot interleave with another grant. Expired rows
  // count for nothing. RETURNING (MariaDB >= 10.5) gives the fence in the same round trip; no row
  // inserted = not granted.
  s.grant = "INSERT INTO " + holders +
            " (name, kind, grant_id, units, fence, expires_at) SELECT a.name, a.kind, ?, ?, NEXTVAL(" + seq + "), " +
            expiry_from_now + " FROM " + anchors +
            " a WHERE a.kind = ? AND a.name = ? AND a.max_count = ?"
            " AND (? = 0 OR a.writer_waiting_until IS NULL OR a.writer_waiting_until <= NOW(6))"
            " AND ? + " +
            live_units + " <= a.max_count AND NOT EXISTS " + mutex_live + " AND NOT EXISTS " + other_kind_live +
            " FOR UPDATE RETURNING fence";
  s.inspect = "SELECT a.max_count, " + live_units + ", (SELECT COUNT(*) FROM " + holders +
              " x WHERE x.name = a.name AND x.kind = a.kind AND x.expires_at <= NOW(6)), EXISTS " + mutex_live +
              ", (SELECT COALESCE(SUM(o.units), 0) FROM " + holders +
              " o WHERE o.name = a.name AND o.kind <> a.kind AND o.expires_at > NOW(6)) FROM " + anchors +
              " a WHERE a.kind = ? AND a.name = ?";
  s.create_anchor = "INSERT IGNORE INTO " + anchors + " (kind, name, max_count) VALUES (?, ?, ?)";
  s.reset_max_count = "UPDATE " + anchors +
                      " SET max_count = ? WHERE kind = ? AND name = ? AND NOT EXISTS (SELECT 1 FROM " + holders +
                      " h WHERE h.kind = ? AND h.name = ? AND h.expires_at > NOW(6))";
  s.delete_expired = "DELETE FROM " + holders + " WHERE kind = ? AND name = ? AND expires_at <= NOW(6)";
  s.mark_writer = "UPDATE " + anchors + " SET writer_waiting_until = " + expiry_from_now +
                  ", writer_waiting = ? WHERE kind = ? AND name = ?";
  s.clear_writer =
      "UPDATE " + anchors +
      " SET writer_waiting_until = NULL, writer_waiting = NULL WHERE kind = ? AND name = ? AND writer_waiting = ?";
  // Our row goes whether live or not (nothing left behind); RETURNING says which it was.
  s.release = "DELETE FROM " + holders + " WHERE name = ? AND kind = ? AND grant_id = ? RETURNING expires_at > NOW(6)";
  s.renew = {{"UPDATE " + holders + " SET expires_at = " + expiry_from_now +
                  " WHERE name = ? AND grant_id = ? AND expires_at > NOW(6)",
              {arg::ttl_ms, arg::name, arg::owner}}};
  s.renew_many = [holders](std::size_t count) {
    std::string rows;
    for (std::size_t k = 0; k < count; ++k) rows += k == 0 ? "(?, ?)" : ", (?, ?)";
    return "UPDATE " + holders + " SET expires_at = " + expiry_from_now + " WHERE (name, grant_id) IN (" + rows +
           ") AND expires_at > NOW(6)";
  };
  s.sweep = {{"DELETE FROM " + holders + " WHERE expires_at <= NOW(6)", {}}};
  s.sweep_anchors = {{"DELETE FROM " + anchors +
                          " WHERE (writer_waiting_until IS NULL OR writer_waiting_until <= NOW(6)) AND NOT EXISTS"
                          " (SELECT 1 FROM " +
                          holders + " h WHERE h.name = " + anchors + ".name AND h.kind = " + anchors + ".kind)",
                      {}}};
  return s;
}

dlock::sql::forupdate_sql forupdate_dialect(const dlock::sql::table_ref& t) {
  const std::string tbl = quoted_table(t);
  const std::string seq = quoted_table(t, "_fence");
  dlock::sql::forupdate_sql s;
  s.create = {"CREATE TABLE IF NOT EXISTS " + tbl +
                  " (name VARBINARY(512) NOT NULL PRIMARY KEY, fence BIGINT NOT NULL DEFAULT 0, holder BIGINT NULL)"
                  " ENGINE=InnoDB",
              // The source of fencing tokens: NEXTVAL is not undone by a rollback (see bump_fence).
              create_fence_sequence(t)};
  // Run only after a locking read found no row. InnoDB's duplicate-key check takes a shared lock
  // on an existing record, and an insert waits for gap locks of concurrent FOR UPDATE reads of
  // absent names, so in a race with another inserter this INSERT could queue behind a holder
  // for the holder's whole lease. It is bounded to 1 s instead; a lock wait timeout then counts
  // as "held" (a try returns empty, a timed wait tries again).
  s.ensure_row = {
      {"SET STATEMENT innodb_lock_wait_timeout = 1 FOR INSERT IGNORE INTO " + tbl + " (name, fence) VALUES (?, 0)",
       {arg::name}}};
  s.lock_nowait = {{"SELECT fence FROM " + tbl + " WHERE name = ? FOR UPDATE NOWAIT", {arg::name}}};
  // Bounded by the session's innodb_lock_wait_timeout (whole seconds, set by the strategy).
  s.lock_wait = {{"SELECT fence FROM " + tbl + " WHERE name = ? FOR UPDATE", {arg::name}}};
  // Run once the row lock is ours, in the same transaction. The token is NEXTVAL of a sequence,
  // which a rollback does not undo: a counter in the row was rolled back with a killed holder's
  // transaction, and the next holder got the same token. Read while the row lock is held, so
  // tokens are ordered like the grants. `holder` (uncommitted while held, so visible only to READ
  // UNCOMMITTED readers) names the holding connection for operators and the tests' KILL.
  s.bump_fence = {{"INSERT INTO " + tbl + " (name, fence) VALUES (?, NEXTVAL(" + seq +
                       ")) ON DUPLICATE KEY UPDATE fence = VALUES(fence), holder = CONNECTION_ID() RETURNING fence",
                   {arg::name}}};
  s.probe = {{"SELECT fence FROM " + tbl + " WHERE name = ? FOR UPDATE NOWAIT", {arg::name}}};
  // Who holds a row: its holder's transaction has written `holder` and a new `fence` (bump_fence)
  // and not committed them. A dirty read (READ UNCOMMITTED) sees them, a consistent read sees the
  // committed row; where the two fences differ, an open transaction holds the row, and the dirty
  // read names it. Read dirty first: a holder that commits in between leaves the two equal (not
  // held), and a row locked but not yet bumped reads as not held, never as its previous holder.
  s.held_rows = [tbl](dlock::sql::connection& c, const dlock::sql::forupdate_sql::name_range& r,
                      std::vector<dlock::sql::forupdate_sql::held_row>& rows, dlock::sql::sql_error& err) {
    const std::string where = r.exact ? " WHERE name = ?" : std::string(" WHERE ") + in_prefix_range;
    std::vector<dlock::sql::param> ps{dlock::sql::bytes{r.from}};
    if (!r.exact) ps = {dlock::sql::bytes{r.from}, dlock::sql::bytes{r.upper}, std::int64_t{r.bounded ? 0 : 1}};
    dlock::sql::result dirty, committed;
    if (!c.execute("SET TRANSACTION ISOLATION LEVEL READ UNCOMMITTED", {}, dirty, err)) return false;
    if (!c.begin(err)) {  // the level set must not reach the next transaction on this pooled connection
      dlock::sql::sql_error ignored;
      if (c.usable()) c.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ", {}, dirty, ignored);
      return false;
    }
    if (!c.execute("SELECT HEX(name), holder, fence FROM " + tbl + where, ps, dirty, err) || !c.commit(err)) {
      if (c.usable()) {
        dlock::sql::sql_error ignored;
        c.rollback(ignored);
      }
      return false;
    }
    if (!c.execute("SELECT HEX(name), fence FROM " + tbl + where, ps, committed, err)) return false;
    std::map<std::string, std::optional<std::string>> fence_of;
    for (const auto& row : committed.rows)
      if (row.size() == 2 && row[0]) fence_of[*row[0]] = row[1];
    for (const auto& row : dirty.rows) {
      if (row.size() != 3 || !row[0] || !row[1] || !row[2]) continue;
      const auto was = fence_of.find(*row[0]);
      if (was == fence_of.end() || was->second == row[2]) continue;  // not written by an open transaction
      dlock::sql::forupdate_sql::held_row h;
      h.hex_name = *row[0];
      h.session = std::stoll(*row[1]);
      h.fence = std::stoll(*row[2]);
      rows.push_back(std::move(h));
    }
    return true;
  };
  s.session_label = "connection ";
  s.end_session = [](std::int64_t id) { return "KILL CONNECTION " + std::to_string(id); };
  return s;
}

dlock::sql::version_sql version_dialect(const dlock::sql::table_ref& t) {
  const std::string tbl = quoted_table(t);
  dlock::sql::version_sql s;
  s.create = {"CREATE TABLE IF NOT EXISTS " + tbl +
              " (name VARBINARY(512) NOT NULL PRIMARY KEY, version BIGINT NOT NULL, owner VARBINARY(255) NULL,"
              " expires_at DATETIME(6) NULL) ENGINE=InnoDB"};
  s.ensure_row = {
      {"INSERT IGNORE INTO " + tbl + " (name, version, owner, expires_at) VALUES (?, 0, NULL, NULL)", {arg::name}}};
  s.read = {{"SELECT version, (owner IS NULL OR expires_at <= NOW(6)) FROM " + tbl + " WHERE name = ?", {arg::name}}};
  s.acquire = {{"UPDATE " + tbl + " SET owner = ?, expires_at = " + expiry_from_now +
                    ", version = version + 1"
                    " WHERE name = ? AND version = ? AND (owner IS NULL OR expires_at <= NOW(6))",
                {arg::owner, arg::ttl_ms, arg::name, arg::version}}};
  s.release = {{"UPDATE " + tbl +
                    " SET owner = NULL, expires_at = NULL"
                    " WHERE name = ? AND owner = ? AND version = ? AND expires_at > NOW(6)",
                {arg::name, arg::owner, arg::version}}};
  s.renew = {{"UPDATE " + tbl + " SET expires_at = " + expiry_from_now +
                  " WHERE name = ? AND owner = ? AND version = ? AND expires_at > NOW(6)",
              {arg::ttl_ms, arg::name, arg::owner, arg::version}}};
  s.probe = {
      {"SELECT owner FROM " + tbl + " WHERE name = ? AND owner IS NOT NULL AND expires_at > NOW(6)", {arg::name}}};
  s.renew_many = [tbl](std::size_t count) { return renew_many_statement(tbl, count, true); };
  const std::string live = " WHERE name = ? AND owner IS NOT NULL AND expires_at > NOW(6)";
  const std::string grant_columns = std::string("SELECT owner, version, ") + ms_left + " FROM " + tbl + live;
  s.inspection.holders = {{grant_columns, {arg::name}}};
  s.inspection.list = {{"SELECT HEX(name) FROM " + tbl + " WHERE " + in_prefix_range +
                            " AND owner IS NOT NULL AND expires_at > NOW(6) ORDER BY name",
                        {arg::name, arg::upper, arg::unbounded}}};
  s.inspection.lock_holders = {{grant_columns + " FOR UPDATE", {arg::name}}};
  // Freed, not deleted: the version must never restart.
  s.inspection.remove = {{"UPDATE " + tbl + " SET owner = NULL, expires_at = NULL" + live, {arg::name}}};
  // The sweeper frees expired grants but keeps the rows: the version must never restart.
  s.sweep = {
      {"UPDATE " + tbl + " SET owner = NULL, expires_at = NULL WHERE owner IS NOT NULL AND expires_at <= NOW(6)", {}}};
  return s;
}

}  // namespace dlock::mysql
