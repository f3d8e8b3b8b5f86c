#include "harness/case/atomic_file.h"

#include <cstdio>
#include <fstream>

namespace afz {

bool write_file_atomically(const std::string& path, const std::string& text, std::string* error) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    out.flush();
    if (!out) {
      *error = tmp + ": cannot write";
      return false;
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    *error = path + ": cannot rename the temporary file into place";
    return false;
  }
  return true;
}

}  // namespace afz
