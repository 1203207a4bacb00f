// engine/core/json_key.h — the line of a JSON document's key, for messages (nlohmann's parser keeps no positions).
#pragma once

#include <cstddef>
#include <string_view>

namespace ns {

// The line of JSON `text` that holds key "<key>" (its quoted name), when the text holds that quoted name exactly once
// (then it is the key's own line: a flat object, or a top-level key no nested object or string repeats); 0 otherwise,
// where a wrong line would be worse than the file alone. Defined in core/text.cpp.
size_t text_json_key_line(std::string_view text, std::string_view key);
// The line of the n-th object key (0-based, in text order: a parser's key events' order) of a valid JSON text; 0 when
// it holds fewer. What names a key that has no line of its own by name (one given twice).
size_t text_json_nth_key_line(std::string_view text, size_t n);

}  // namespace ns
