// engine/core/json_key.h — the line of a JSON document's key, for messages (nlohmann's parser keeps no positions).
#pragma once

#include <cstddef>
#include <string_view>

namespace ns {

// The line of JSON `text` that holds key "<key>" (its quoted name), when the text holds that quoted name exactly once
// (then it is the key's own line: a flat object, or a top-level key no nested object or string repeats); 0 otherwise,
// where a wrong line would be worse than the file alone. Defined in core/text.cpp.
size_t text_json_key_line(std::string_view text, std::string_view key);

}  // namespace ns
