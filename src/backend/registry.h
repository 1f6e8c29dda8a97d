// Backends by name, for --backend flags: "cpu" is the fast CPU backend, "cpu-ref" the
// reference interpreter (the yardstick). An unknown name is an error listing the known ones.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace loom::backend {

std::unique_ptr<Backend> make_backend(const std::string& name);
std::vector<std::string> backend_names();

}  // namespace loom::backend
