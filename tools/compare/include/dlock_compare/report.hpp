#pragma once
// The matrix backend x scenario of a `dlock compare` run, and its writers: the text table (with
// its legend), Markdown, and JSON with every check_result.
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "dlock_compare/scenario.hpp"
#include "dlock_compare/speed_report.hpp"

namespace dlock::compare {

struct matrix_cell {
  std::string backend;  // the scheme, as --backends names it
  fault scenario = fault::healthy;
  std::string uri;  // redacted; empty when not run
  std::optional<scenario_result> result;
  std::string text;  // the observation, or "not run: why"
};

struct matrix {
  std::vector<std::string> backends;  // row order
  std::vector<fault> faults;          // column order
  std::vector<matrix_cell> cells;     // backends x faults, row by row
  std::chrono::milliseconds ttl{};
  std::chrono::milliseconds duration{};
  std::uint32_t clients = 0;
  std::vector<std::string> unsafe_backends;  // rows of the unsafe variants, flagged in the reports
  speed_table speed;                         // the speed columns; no rows with --no-speed

  const matrix_cell* find(const std::string& backend, fault f) const;
};

std::string legend(const matrix& m);
std::string to_text(const matrix& m);      // aligned columns, then the legend
std::string to_markdown(const matrix& m);  // a Markdown table, then the legend
std::string to_json(const matrix& m);      // every cell with its check_result

}  // namespace dlock::compare
