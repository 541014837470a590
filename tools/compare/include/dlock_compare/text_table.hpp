#pragma once
// Small writers the reports share: a JSON string literal, a table as aligned text columns or as
// Markdown (the first row is the header).
#include <string>
#include <vector>

namespace dlock::compare {

using text_rows = std::vector<std::vector<std::string>>;

std::string json_string(const std::string& s);       // "..." with quotes, backslashes, controls escaped
std::string aligned_columns(const text_rows& rows);  // columns two spaces apart, no trailing blanks
std::string markdown_table(const text_rows& rows);   // '|' inside a cell escaped

}  // namespace dlock::compare
