#pragma once
// The speed columns of `dlock compare`: one row per backend, measured in the same run as the
// fault matrix (see speed.hpp), and their writers: the text table printed after the matrix,
// Markdown, JSON.
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "dlock_compare/speed.hpp"
#include "dlock_compare/text_table.hpp"

namespace dlock::compare {

struct speed_row {
  std::string backend;  // the scheme
  bool unsafe = false;  // an unsafe variant: measured as the baseline such recipes claim, flagged
  std::string uri;      // redacted; empty when not run
  std::optional<backend_speed> measured;
  std::string not_run_because;  // when not measured
  std::string errors;           // "" or the redacted first error of each point that had one
};

struct speed_table {
  std::vector<speed_row> rows;  // empty: not measured (--no-speed)
  std::chrono::milliseconds duration_per_point{};
  std::string cpu_placement;
};

// The column headers, then a row per backend (in `rows` order): the cells every writer shows.
text_rows speed_rows(const speed_table& t);

// The text and Markdown writers print nothing for an empty table; JSON prints null. The text's
// lines fit `columns`: a note that does not is written under the table, wrapped.
std::string speed_text(const speed_table& t, std::size_t columns = 160);
std::string speed_markdown(const speed_table& t);
std::string speed_json(const speed_table& t);

// "12.3us", "4.56ms", "1.02s": three significant digits, for tables and the HTML report.
std::string latency_text(std::chrono::nanoseconds d);
// "123456/s", "1234/s", "12.3/s".
std::string rate_text(double per_second);

}  // namespace dlock::compare
