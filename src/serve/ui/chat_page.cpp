#include "serve/ui/chat_page.h"

#include "index_html.inc"  // generated from index.html at build time (embed.cmake)

namespace loom::serve {

std::string_view chat_page_html() {
  return {reinterpret_cast<const char*>(loom_chat_page_html), size_t(loom_chat_page_html_size)};
}

}  // namespace loom::serve
