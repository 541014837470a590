#pragma once
// The picture of a `dlock compare` run: one self-contained HTML page (inline CSS and SVG, no
// script, nothing fetched) with the matrix as a grid coloured by verdict, each row's verdict, each
// cell's details in its tooltip, the unsafe rows flagged, a legend, the run's settings, the ops/s bars and the latency
// distributions of each backend.
#include <string>

#include "dlock_compare/report.hpp"
#include "dlock_compare/verdict.hpp"

namespace dlock::compare {

struct run_context {
  std::string command_line;  // as typed, secrets already scrubbed
  std::string date_utc;      // when the run began, e.g. 2026-11-23 17:40:12 UTC
  unsigned host_cpus = 0;    // online CPUs
};

// Each cell is coloured by its verdict (verdict.hpp): green safe, blue safe with fencing, amber
// unavailable, red unsafe, grey not run.
const char* css_class_of(const cell_verdict& v) noexcept;

std::string to_html(const matrix& m, const run_context& context);

}  // namespace dlock::compare
