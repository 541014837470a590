#include "dlock_compare/text_table.hpp"

#include <algorithm>
#include <cstdio>

namespace dlock::compare {

namespace {

std::string pad(const std::string& s, std::size_t width) {
  return s + std::string(width - std::min(width, s.size()), ' ');
}

std::string markdown_cell(const std::string& s) {
  std::string out;
  for (const char ch : s) out += ch == '|' ? std::string("\\|") : std::string(1, ch);
  return out;
}

}  // namespace

std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (const char ch : s) {
    const auto u = static_cast<unsigned char>(ch);
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += ch;
    } else if (u < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", u);
      out += buf;
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

std::string aligned_columns(const text_rows& rows) {
  if (rows.empty()) return {};
  std::vector<std::size_t> widths(rows.front().size(), 0);
  for (const auto& row : rows)
    for (std::size_t i = 0; i < row.size() && i < widths.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t i = 0; i < row.size(); ++i)
      line += (i ? "  " : "") + pad(row[i], i < widths.size() ? widths[i] : 0);
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

std::string wrapped_words(const std::string& text, std::size_t width, std::size_t indent) {
  std::string out, line;
  std::size_t from = 0;
  while (from < text.size()) {
    auto space = text.find(' ', from);
    if (space == std::string::npos) space = text.size();
    const auto word = text.substr(from, space - from);
    from = space + 1;
    if (word.empty()) continue;
    const bool first_of_line = line.empty() || line.find_first_not_of(' ') == std::string::npos;
    if (!first_of_line && line.size() + 1 + word.size() > width) {
      out += line + "\n";
      line = std::string(indent, ' ');
    }
    line += (line.empty() || line.find_first_not_of(' ') == std::string::npos ? "" : " ") + word;
  }
  return line.empty() ? out : out + line + "\n";
}

std::string markdown_table(const text_rows& rows) {
  std::string out;
  for (std::size_t r = 0; r < rows.size(); ++r) {
    out += "|";
    for (const auto& cell : rows[r]) out += " " + markdown_cell(cell) + " |";
    out += "\n";
    if (r == 0) {
      out += "|";
      for (std::size_t i = 0; i < rows[r].size(); ++i) out += "---|";
      out += "\n";
    }
  }
  return out;
}

}  // namespace dlock::compare
