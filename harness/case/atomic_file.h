// Writing a file so that a kill -9 at any moment leaves the old file or the
// new one, never half of either: write a temporary beside it, then rename
// (atomic within one file system).
#pragma once
#include <string>

namespace afz {

bool write_file_atomically(const std::string& path, const std::string& text, std::string* error);

}  // namespace afz
