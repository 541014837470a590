#pragma once
// Running a server's command-line tool, for the connection kills each backend declares
// (family.hpp): dlock compare depends on no backend's client library.
#include <cstdint>
#include <string>
#include <vector>

#include "dlock/compare_spi/family.hpp"

namespace dlock::compare_spi {

struct tool_run {
  int exit_code = -1;  // -1: it could not be run
  std::string output;  // stdout and stderr
};

// Runs `argv` (looked up in PATH) with `extra_env` added to the environment, stdin /dev/null,
// stdout and stderr captured. The password travels in `extra_env`, never in argv (which `ps` shows).
tool_run run_tool(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env);

std::string first_line(const std::string& text);
std::vector<std::string> lines_of(const std::string& text);      // the non-empty lines
std::string port_list(const std::vector<std::uint16_t>& ports);  // "5001,5002"

// No connection ended, and why.
killed_connections no_kill(std::string why);

}  // namespace dlock::compare_spi
