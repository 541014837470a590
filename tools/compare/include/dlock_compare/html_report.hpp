#pragma once
// The picture of a `dlock compare` run: one self-contained HTML page (inline CSS and SVG, no
// script, nothing fetched) with the matrix as a coloured grid, each cell's details in its tooltip,
// the unsafe rows flagged, a legend, the run's settings, the ops/s bars and the latency
// distributions of each backend.
#include <string>

#include "dlock_compare/report.hpp"

namespace dlock::compare {

struct run_context {
  std::string command_line;  // as typed, secrets already scrubbed
  std::string date_utc;      // when the run began, e.g. 2026-11-23 17:40:12 UTC
  unsigned host_cpus = 0;    // online CPUs
};

// How a cell is coloured, from its result (not its text):
//   bad   overlaps, unnotified losses, or stale writes the fenced resource did not refuse
//   warn  stale writes refused only by the fence, no grant for over 2 ttls after the fault,
//         errors, or a fault that could not be injected
//   good  none of these
//   none  not run
enum class cell_verdict { good,
                          warn,
                          bad,
                          none };
cell_verdict verdict_of(const matrix_cell& cell, std::chrono::milliseconds ttl);

std::string to_html(const matrix& m, const run_context& context);

}  // namespace dlock::compare
