// A corpus: a folder of case files, one minimized repro per failure
// signature, each naming its kernel and carrying "# provenance:" lines.
//
// The campaign saves a failure here (atomically: temporary file + rename)
// before it runs the next case, so a kill -9 loses nothing already found;
// reopening the folder indexes the saved signatures, so a restarted
// campaign resumes without minimizing the same bug again.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "harness/campaign/minimize.h"
#include "harness/case/case.h"

namespace afz {

inline constexpr std::string_view kCaseFileExtension = ".case";

// Provenance keys the campaign writes and the corpus reads back:
// "# provenance: signature KERNEL|VERDICT|FEATURES|SHAPE".
inline constexpr std::string_view kProvSignature = "signature ";
// A raw (pre-minimization) signature that minimized to this repro.
inline constexpr std::string_view kProvSeenAs = "seen-as ";
// How many more raw signatures minimized to this repro than are listed.
inline constexpr std::string_view kProvSeenAsMore = "seen-as-more ";
// A repro lists at most this many raw signatures as examples and counts the
// rest, so a case file stays a few lines however long the campaigns that
// keep meeting its bug run.  A raw signature not listed is minimized again
// when a restarted campaign meets it (and the repro kept if no larger).
inline constexpr int kSeenAsExamples = 4;

// The regular files ending in .case directly inside `dir`, sorted by name.
// nullopt and a one-line *error when the folder cannot be read.
std::optional<std::vector<std::string>> list_case_files(const std::string& dir, std::string* error);

// The value of the first provenance entry starting with `key`, or "".
std::string provenance_value(const Case& c, std::string_view key);

struct CorpusEntry {
  std::string path;
  Case c;
  std::string signature;
  CaseSize size;
};

class Corpus {
 public:
  // Indexes the case files in the folder (created on the first save).  Files
  // that do not load are listed in load_errors() and otherwise ignored.
  static std::optional<Corpus> open(const std::string& dir, std::string* error);

  const std::string& dir() const { return dir_; }
  size_t size() const { return entries_.size(); }
  const std::vector<std::string>& load_errors() const { return load_errors_; }
  std::vector<std::string> signatures() const;

  // The saved repro of a (minimized) signature, or null.
  const CorpusEntry* find(const std::string& signature) const;
  // The saved repro that a raw signature minimized to before, or null.
  const CorpusEntry* find_seen(const std::string& raw_signature) const;

  enum class Saved { New, Smaller, KeptExisting };
  // Saves `c` as the repro of `signature` unless the folder already holds a
  // repro of it that is no larger; records `raw_signature` as seen-as either
  // way (listed while fewer than kSeenAsExamples are, else counted).  The entry's path in *path.  nullopt and *error when writing fails.
  std::optional<Saved> save(const Case& c, const std::string& signature, const std::string& raw_signature,
                            std::string* path, std::string* error);

 private:
  std::string file_name(const Case& c, const std::string& signature) const;
  bool rewrite(CorpusEntry& e, std::string* error);

  std::string dir_;
  std::map<std::string, CorpusEntry> entries_;      // by signature
  std::map<std::string, std::string> seen_as_;      // raw signature -> signature
  std::vector<std::string> load_errors_;
};

}  // namespace afz
