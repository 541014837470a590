// dlock backends [--markdown]: the schemes built in and the plugins found through
// DLOCK_PLUGIN_PATH, with scope, one column per capability, example URI and summary, then what the
// reader-writer locks' and semaphores' leases can do where a scheme makes them, then each
// scheme's own URI parameters. The README's backend tables are generated with --markdown.
#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "args.hpp"
#include "commands.hpp"
#include "dlock/dlock.hpp"

namespace dlock::cli {
namespace {

// A primitive's capabilities as a cell: "blocking, fair, expiring", "none", or "-" when the
// scheme does not make it.
std::string primitive_cell(const std::optional<capabilities>& caps) {
  if (!caps) return "-";
  std::string cell;
  for (capability c : all_capabilities)
    if (caps->has(c)) cell += (cell.empty() ? "" : ", ") + std::string(to_string(c));
  return cell.empty() ? std::string("none") : cell;
}

// The second table: one row per scheme that makes a reader-writer lock or a semaphore.
std::vector<std::vector<std::string>> primitive_rows(const std::vector<backend_info>& infos) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& info : infos)
    if (info.primitives.rw_lock || info.primitives.semaphore)
      rows.push_back({info.scheme, primitive_cell(info.primitives.rw_lock), primitive_cell(info.primitives.semaphore)});
  return rows;
}

const std::vector<std::string> primitive_header = {"scheme", "read-write lock capabilities", "semaphore capabilities"};
// Columns padded to their widest cell, two spaces apart.
void print_aligned(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> width(header.size());
  for (std::size_t i = 0; i < header.size(); ++i) {
    width[i] = header[i].size();
    for (auto& row : rows) width[i] = std::max(width[i], row[i].size());
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string s;
    for (std::size_t i = 0; i < cells.size(); ++i) {
      s += cells[i];
      if (i + 1 < cells.size()) s += std::string(width[i] - cells[i].size() + 2, ' ');
    }
    std::puts(s.c_str());
  };
  line(header);
  for (auto& row : rows) line(row);
}

constexpr const char* primitive_title = "Reader-writer locks and semaphores";

}  // namespace

int cmd_backends(const arguments& argv) {
  const args a(argv, {}, {"help", "markdown"});
  if (a.flag("help")) {
    std::puts("usage: dlock backends [--markdown]\n"
              "lists the backends built in and those found through DLOCK_PLUGIN_PATH: scope and mutex\n"
              "capabilities, then the capabilities of the reader-writer locks and semaphores of the\n"
              "schemes that make them, then each scheme's URI parameters. --markdown: the README's tables");
    return 0;
  }
  if (!a.positional().empty()) throw usage_error("takes no arguments");
  auto& r = default_registry();
  r.load_all_plugins();

  std::vector<std::string> header = {"scheme", "scope"};
  for (capability c : all_capabilities) header.emplace_back(to_string(c));
  header.insert(header.end(), {"example", "summary"});
  std::vector<std::vector<std::string>> rows;
  for (const auto& info : r.list()) {
    std::vector<std::string> row = {info.scheme, std::string(to_string(info.scope))};
    for (capability c : all_capabilities) row.emplace_back(info.caps.has(c) ? "yes" : "-");
    row.insert(row.end(), {info.example_uri, info.summary});
    rows.push_back(std::move(row));
  }

  const auto infos = r.list();
  std::string common;
  for (const auto& key : common_parameters()) common += (common.empty() ? "" : ", ") + key;
  auto own_parameters = [](const backend_info& info) {
    std::string list;
    for (const auto& key : info.parameters) list += (list.empty() ? "" : ", ") + key;
    return list.empty() ? std::string("-") : list;
  };

  if (a.flag("markdown")) {
    auto line = [](const std::vector<std::string>& cells) {
      std::string s = "|";
      for (auto& c : cells) s += " " + (c.empty() ? std::string(" ") : c) + " |";
      std::puts(s.c_str());
    };
    line(header);
    line(std::vector<std::string>(header.size(), "---"));
    for (auto row : rows) {
      for (auto& cell : row) {  // a '|' inside a cell would end it
        std::string escaped;
        for (char ch : cell) {
          if (ch == '|') escaped += '\\';
          escaped += ch;
        }
        cell = std::move(escaped);
      }
      row[row.size() - 2] = "`" + row[row.size() - 2] + "`";
      line(row);
    }
    std::printf("\n%s: what the leases of each scheme's reader-writer lock and semaphore can do, for the\n"
                "schemes that make one (`-`: not made; the mutex's columns are above):\n\n",
                primitive_title);
    line(primitive_header);
    line({"---", "---", "---"});
    for (const auto& row : primitive_rows(infos)) line(row);
    std::printf("\nURI parameters of each scheme, besides those every scheme accepts (%s):\n\n", common.c_str());
    line({"scheme", "parameters"});
    line({"---", "---"});
    for (const auto& info : infos) line({info.scheme, own_parameters(info)});
    return 0;
  }
  print_aligned(header, rows);
  std::printf("\n%s (schemes that make one; '-': not made):\n", primitive_title);
  print_aligned(primitive_header, primitive_rows(infos));
  std::printf("\nparameters every scheme accepts: %s\n", common.c_str());
  for (const auto& info : infos) std::printf("%s: %s\n", info.scheme.c_str(), own_parameters(info).c_str());
  return 0;
}

}  // namespace dlock::cli
