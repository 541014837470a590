#pragma once
// The matrix backend x scenario of a `dlock compare` run, and its writers: the terminal's compact
// table (one short verdict per cell, 160 columns), Markdown (verdict and observation per cell, the
// legend), and JSON with every verdict and check_result. The verdicts: verdict.hpp.
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
  std::string text;                          // the observation, or "not run: why"
  std::vector<std::string> worker_messages;  // what its workers wrote on stderr, line by line
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
  // The file holding every line the workers (and dlock compare's own background errors) wrote on
  // stderr, each after its cell's name; empty: nothing was written, so no file.
  std::string worker_log;
  std::uint64_t worker_log_lines = 0;

  const matrix_cell* find(const std::string& backend, fault f) const;
};

// The width the terminal's table and its key are kept within, whatever the faults and schemes.
inline constexpr std::size_t terminal_columns = 160;

std::string legend(const matrix& m);          // the settings, the verdicts' definitions, the observations' words
std::string terminal_table(const matrix& m);  // backend, one short verdict per fault, the row's worst
std::string to_text(const matrix& m);         // the terminal's table, its key, the speed table
std::string to_markdown(const matrix& m);  // backend, the row's verdict, verdict and observation per cell; the legend
std::string to_json(const matrix& m);      // every cell with its verdict and check_result; each row's verdict
std::string worker_log_text(const matrix& m);  // "The workers wrote N lines on stderr ...: PATH"

}  // namespace dlock::compare
