// The reports of dlock compare on a hand-made matrix: the terminal's table fits 160 columns with
// every fault and the longest scheme names, one short verdict per cell; the Markdown and JSON
// carry each cell's verdict and each row's; the workers' log is named, never printed.
#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "dlock/dlock.hpp"
#include "dlock_compare/html_report.hpp"
#include "dlock_compare/report.hpp"
#include "dlock_compare/verdict.hpp"

namespace dlock::compare::testing {
namespace {

using namespace std::chrono_literals;

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// A cell of each verdict, its short text as wide as it gets ("gap123s", "UNSAFE", "fenced").
matrix_cell widest_cell(const std::string& backend, fault f, std::size_t which) {
  matrix_cell c;
  c.backend = backend;
  c.scenario = f;
  if (which % 5 == 4) {
    c.text = "not run: DLOCK_SOMETHING_URI unset";
    return c;
  }
  c.text = "observed";
  c.result.emplace();
  c.result->check.totals.grants = 10;
  c.result->recovered_after = 500ms;  // safe unless made otherwise below: granted during a pause
  c.result->paused_for = 2500ms;
  if (which % 5 == 0) {  // unsafe: an overlap without tokens
    c.result->check.overlaps.push_back({});
    c.result->check.unfenced_overlaps = 1;
  } else if (which % 5 == 1) {  // safe with fencing
    overlap o;
    o.fenced = true;
    c.result->check.overlaps.push_back(o);
  } else if (which % 5 == 2) {  // unavailable for 123 s
    c.result->victim = 1;
    c.result->paused_for = 0ms;
    c.result->recovered_after = 123456ms;
    c.result->check.longest_unavailable = 123456ms;
  }
  return c;
}

// Every fault of dlock compare, every scheme this build knows and one as long as the longest
// there is (25 characters), whatever this build has.
matrix every_fault_matrix() {
  matrix m;
  m.ttl = 1s;
  m.duration = 2s;
  m.clients = 3;
  m.faults = every_fault();
  for (const auto& info : default_registry().list()) m.backends.push_back(info.scheme);
  std::size_t longest = 0;
  for (const auto& b : m.backends) longest = std::max(longest, b.size());
  m.backends.push_back(std::string(std::max<std::size_t>(longest, 25), 'x'));
  std::size_t which = 0;
  for (const auto& b : m.backends)
    for (const auto f : m.faults) m.cells.push_back(widest_cell(b, f, which++));
  m.worker_log = "/tmp/dlock-compare-12345-workers.log";
  m.worker_log_lines = 42;
  return m;
}

TEST(TerminalTable, EveryFaultAndTheLongestSchemesFitOneHundredSixtyColumns) {
  const auto m = every_fault_matrix();
  ASSERT_EQ(m.faults.size(), 16u) << "dlock compare's fault list changed: the 160 columns are counted for 16";
  const auto text = to_text(m);
  for (const auto& line : lines_of(text)) EXPECT_LE(line.size(), terminal_columns) << "too wide: " << line;

  const auto table = lines_of(terminal_table(m));
  ASSERT_EQ(table.size(), m.backends.size() + 1) << "a header, then one line per backend";
  std::istringstream header(table.front());
  std::vector<std::string> headings{std::istream_iterator<std::string>(header), {}};
  ASSERT_EQ(headings.size(), m.faults.size() + 2) << "backend, a column per fault, worst";
  for (std::size_t i = 0; i < m.faults.size(); ++i) EXPECT_EQ(headings[i + 1], short_name(m.faults[i]));
  EXPECT_EQ(headings.back(), "worst");
  for (std::size_t row = 1; row < table.size(); ++row) {
    std::istringstream fields(table[row]);
    std::vector<std::string> words{std::istream_iterator<std::string>(fields), {}};
    ASSERT_EQ(words.size(), m.faults.size() + 2) << "one short word per cell: " << table[row];
    EXPECT_EQ(words.front(), m.backends[row - 1]);
    for (std::size_t i = 1; i + 1 < words.size(); ++i) {
      const auto& w = words[i];
      EXPECT_TRUE(w == "UNSAFE" || w == "fenced" || w == "gap123s" || w == "safe" || w == "-") << w;
    }
  }
  EXPECT_NE(text.find(m.worker_log), std::string::npos) << "the workers' log is named";
}

TEST(TerminalTable, TheSpeedTableFitsTooItsLongNotesWrittenBelow) {
  auto m = every_fault_matrix();
  m.speed.duration_per_point = 1s;
  m.speed.cpu_placement =
      "client threads on CPUs 0-3,8-11,16-19,24-27,32-35,40-43,48-51,56-59 of 64 online (this process's "
      "affinity; threads not pinned further); the servers run on the same host";
  for (const auto& b : m.backends) {
    speed_row row;
    row.backend = b;
    row.unsafe = true;
    row.not_run_because = "DLOCK_X_SENTINEL_URI unset";
    m.speed.rows.push_back(row);
  }
  speed_row failing;
  failing.backend = m.backends.back();
  failing.measured.emplace();
  failing.errors = "1 client: 1 client(s) stopped by an error (x://127.0.0.1:6379: connection refused while "
                   "connecting to the server, after 3 attempts over 5 s; is it running?)";
  m.speed.rows.push_back(failing);
  const auto text = to_text(m);
  for (const auto& line : lines_of(text)) EXPECT_LE(line.size(), terminal_columns) << "too wide: " << line;
  EXPECT_NE(text.find("not run: DLOCK_X_SENTINEL_URI unset"), std::string::npos) << "a long note is written below";
  EXPECT_NE(text.find("is it running?"), std::string::npos) << "an error is written whole";
}

TEST(TerminalTable, ShortFaultNamesAreUniqueAndAtMostSevenCharacters) {
  std::vector<std::string_view> seen;
  for (const auto f : every_fault()) {
    EXPECT_LE(short_name(f).size(), 7u) << to_string(f);
    EXPECT_EQ(std::ranges::count(seen, short_name(f)), 0) << short_name(f) << " twice";
    seen.push_back(short_name(f));
  }
}

TEST(Reports, MarkdownAndJsonCarryEachCellsVerdictAndEachRows) {
  const auto m = every_fault_matrix();
  const auto& b = m.backends.front();
  const auto markdown = to_markdown(m);
  EXPECT_NE(markdown.find("| backend | verdict | healthy | holder-kill |"), std::string::npos);
  const std::string first_cells =
      "| **unsafe**: observed | **safe with fencing**: observed | **unavailable for 123.46s**: observed | "
      "**safe**: observed | not run: DLOCK_SOMETHING_URI unset |";
  EXPECT_NE(markdown.find("| " + b + " | " + row_verdict_of(m, b).text() + " " + first_cells), std::string::npos)
      << markdown.substr(0, 2000);
  EXPECT_NE(markdown.find("safe with fencing  writes overlapped"), std::string::npos)
      << "the legend defines the verdicts";
  EXPECT_NE(markdown.find(m.worker_log), std::string::npos);

  const auto json = to_json(m);
  for (const char* part :
       {"\"verdict\": \"safe with fencing\", \"verdict_kind\": \"safe_with_fencing\"",
        "\"verdict\": \"unavailable for 123.46s\", \"verdict_kind\": \"unavailable\", \"unavailable_for_ms\": 123456",
        "\"verdict\": \"not run: DLOCK_SOMETHING_URI unset\", \"verdict_kind\": \"not_run\"",
        "\"unavailable_beyond_ms\": 3000", "\"worker_log\": \"/tmp/dlock-compare-12345-workers.log\"",
        "\"worker_log_lines\": 42", "\"worst\": \"unsafe\"", "\"counts\": {\"not_run\": "})
    EXPECT_NE(json.find(part), std::string::npos) << "missing " << part;
}

TEST(Reports, TheHtmlColoursEachCellByItsVerdict) {
  const auto m = every_fault_matrix();
  const auto html = to_html(m, run_context{});
  for (const char* cls : {"cell unsafe", "cell fenced", "cell unavailable", "cell safe", "cell none"})
    EXPECT_NE(html.find(std::string("<td class=\"") + cls + "\""), std::string::npos) << cls;
  EXPECT_NE(html.find("<td class=\"verdict unsafe\">"), std::string::npos) << "each row's verdict, coloured";
}

}  // namespace
}  // namespace dlock::compare::testing
