#pragma once
// The chat page `loom serve` answers at `/`: src/serve/ui/index.html, compiled into the binary.
#include <string_view>

namespace loom::serve {

std::string_view chat_page_html();

}  // namespace loom::serve
