#pragma once
// Small writers the reports share: a JSON string literal, a table as aligned text columns or as
// Markdown (the first row is the header).
#include <string>
#include <string_view>
#include <vector>

namespace dlock::compare {

using text_rows = std::vector<std::vector<std::string>>;

std::string json_string(std::string_view s);         // "..." with quotes, backslashes, controls escaped
std::string aligned_columns(const text_rows& rows);  // columns two spaces apart, no trailing blanks
std::string markdown_table(const text_rows& rows);   // '|' inside a cell escaped
// `text` broken at spaces into lines of at most `width` (a word longer than that alone on its
// line), every line but the first indented by `indent`; each line ends with a newline.
std::string wrapped_words(const std::string& text, std::size_t width, std::size_t indent);

}  // namespace dlock::compare
