// Report folders: the four files written together, read back, re-rendered.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "harness/case/atomic_file.h"
#include "harness/report/report_views.h"

namespace afz {
namespace fs = std::filesystem;

namespace {

// Write to a temporary name and rename: a reader (or a kill -9) never sees
// half a file.
bool write_atomically(const fs::path& path, const std::string& text, std::string* error) {
  return write_file_atomically(path.string(), text, error);
}

bool write_views(const Report& r, const fs::path& dir, std::string* error, const HtmlOptions& options) {
  return write_atomically(dir / kReportHtmlFile, report_to_html(r, options), error) &&
         write_atomically(dir / kJunitFile, report_to_junit(r), error) &&
         write_atomically(dir / kSarifFile, report_to_sarif(r), error);
}

}  // namespace

bool write_report_folder(const Report& r, const std::string& dir, std::string* error, const HtmlOptions& options) {
  // report.json first: it creates the folder, and the data outlives a
  // failure to render.
  return write_report_json(r, dir, error) && write_views(r, dir, error, options);
}

std::optional<Report> read_report_folder(const std::string& dir, std::string* error) {
  const fs::path path = fs::path(dir) / kReportJsonFile;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *error = path.string() + ": cannot read (not a report folder?)";
    return std::nullopt;
  }
  std::stringstream text;
  text << in.rdbuf();
  std::optional<Report> r = report_from_json(text.str(), error);
  if (!r) {
    const std::string own = "report.json: ";  // report_from_json's prefix, replaced by the full path
    *error = path.string() + ": " + (error->starts_with(own) ? error->substr(own.size()) : *error);
  }
  return r;
}

bool render_report_folder(const std::string& dir, std::string* error, const HtmlOptions& options) {
  std::optional<Report> r = read_report_folder(dir, error);
  return r && write_views(*r, dir, error, options);
}

}  // namespace afz
