#pragma once
// MariaDB's SQL for the three table strategies of backends/sql_common (dialect.hpp there fixes
// what each script returns). The only text pasted into SQL is the table (and schema) name, which
// sql_common validated as a plain identifier; it is quoted with backticks here. Lock names,
// owners and every value are bound parameters.
#include <string>

#include "dlock_sql/dialect.hpp"
#include "dlock_sql/params.hpp"
#include "dlock_sql/units.hpp"

namespace dlock::mysql {

// `schema`.`table` (or `table`), plus a suffix on the table part (the fence sequence).
std::string quoted_table(const dlock::sql::table_ref& t, const std::string& suffix = "");

dlock::sql::index_sql index_dialect(const dlock::sql::table_ref& t);
dlock::sql::forupdate_sql forupdate_dialect(const dlock::sql::table_ref& t);
dlock::sql::version_sql version_dialect(const dlock::sql::table_ref& t);
// mysql+index's reader-writer locks and semaphores: `table`_units (anchors) and `table`_holders.
dlock::sql::units_sql units_dialect(const dlock::sql::table_ref& t);

// The width of the name column (VARBINARY(512)): InnoDB keys hold up to 3072 bytes.
inline constexpr std::size_t max_name_bytes = 512;

}  // namespace dlock::mysql
