#include "harness/campaign/corpus.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fmt/format.h>
#include <filesystem>
#include <system_error>

#include "harness/case/case_file.h"
#include "harness/judge/signature.h"

namespace afz {

namespace fs = std::filesystem;

std::optional<std::vector<std::string>> list_case_files(const std::string& dir, std::string* error) {
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) {
    *error = dir + ": cannot read the folder (" + ec.message() + ")";
    return std::nullopt;
  }
  std::vector<std::string> files;
  for (const fs::directory_entry& e : it) {
    const std::string name = e.path().filename().string();
    if (e.is_regular_file(ec) && name.ends_with(kCaseFileExtension)) files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::string provenance_value(const Case& c, std::string_view key) {
  for (const std::string& p : c.provenance)
    if (p.starts_with(key)) return p.substr(key.size());
  return {};
}

std::optional<Corpus> Corpus::open(const std::string& dir, std::string* error) {
  // A folder that does not exist yet is an empty corpus; save() creates it,
  // so a campaign that finds nothing leaves nothing behind.
  std::error_code ec;
  if (!fs::exists(dir, ec)) {
    Corpus corpus;
    corpus.dir_ = dir;
    return corpus;
  }
  auto files = list_case_files(dir, error);
  if (!files) return std::nullopt;
  Corpus corpus;
  corpus.dir_ = dir;
  for (const std::string& path : *files) {
    std::string why;
    std::optional<Case> c = load_case_file(path, &why);
    if (!c) {
      corpus.load_errors_.push_back(why);
      continue;
    }
    const std::string sig = provenance_value(*c, kProvSignature);
    if (sig.empty()) continue;  // a hand-written or seed case: replayed, not indexed
    CorpusEntry e{path, *c, sig, case_size(*c)};
    for (const std::string& p : c->provenance)
      if (p.starts_with(kProvSeenAs)) corpus.seen_as_[p.substr(kProvSeenAs.size())] = sig;
    // Two files of one signature (copied in by hand): the smaller one counts.
    auto it = corpus.entries_.find(sig);
    if (it == corpus.entries_.end() || e.size < it->second.size) corpus.entries_[sig] = std::move(e);
  }
  return corpus;
}

std::vector<std::string> Corpus::signatures() const {
  std::vector<std::string> out;
  for (const auto& [sig, e] : entries_) out.push_back(sig);
  return out;
}

const CorpusEntry* Corpus::find(const std::string& signature) const {
  auto it = entries_.find(signature);
  return it == entries_.end() ? nullptr : &it->second;
}

const CorpusEntry* Corpus::find_seen(const std::string& raw_signature) const {
  auto it = seen_as_.find(raw_signature);
  return it == seen_as_.end() ? find(raw_signature) : find(it->second);
}

std::string Corpus::file_name(const Case& c, const std::string& signature) const {
  // Kernel names are printable ASCII without blanks but may hold '/' or
  // other characters a file name should not.
  std::string kernel = c.kernel.empty() ? "case" : c.kernel;
  for (char& ch : kernel)
    if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_' || ch == '.')) ch = '_';
  // The verdict is the signature's second field: "kernel|verdict|...".
  const size_t bar = signature.find('|');
  const std::string verdict = bar == std::string::npos ? "fail" : signature.substr(bar + 1, signature.find('|', bar + 1) - bar - 1);
  const std::string hash = fmt::format("{:016x}", fnv1a64(signature));
  return (fs::path(dir_) / (kernel + "-" + verdict + "-" + hash + std::string(kCaseFileExtension))).string();
}

bool Corpus::rewrite(CorpusEntry& e, std::string* error) {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) {
    *error = dir_ + ": cannot create the corpus folder (" + ec.message() + ")";
    return false;
  }
  return save_case_file(e.path, e.c, error);
}

namespace {

// The seen-as provenance of a case: the listed raw signatures and the count
// of those left out.
struct SeenAs {
  std::vector<std::string> listed;
  int64_t more = 0;

  static SeenAs of(const Case& c) {
    SeenAs s;
    for (const std::string& p : c.provenance) {
      if (p.starts_with(kProvSeenAsMore)) s.more += std::strtoll(p.c_str() + kProvSeenAsMore.size(), nullptr, 10);
      else if (p.starts_with(kProvSeenAs)) s.listed.push_back(p.substr(kProvSeenAs.size()));
    }
    return s;
  }
  bool has(const std::string& raw) const { return std::find(listed.begin(), listed.end(), raw) != listed.end(); }
  void add(const std::string& raw) {
    if (has(raw)) return;
    if (int(listed.size()) < kSeenAsExamples) listed.push_back(raw);
    else ++more;
  }
  // Replaces c's seen-as lines with these, after its other provenance.
  void write_to(Case& c) const {
    std::erase_if(c.provenance,
                  [](const std::string& p) { return p.starts_with(kProvSeenAs) || p.starts_with(kProvSeenAsMore); });
    for (const std::string& raw : listed) c.provenance.push_back(std::string(kProvSeenAs) + raw);
    if (more) c.provenance.push_back(std::string(kProvSeenAsMore) + std::to_string(more));
  }
};

}  // namespace

std::optional<Corpus::Saved> Corpus::save(const Case& c, const std::string& signature,
                                          const std::string& raw_signature, std::string* path, std::string* error) {
  auto it = entries_.find(signature);
  if (it != entries_.end() && !(case_size(c) < it->second.size)) {
    CorpusEntry& e = it->second;
    *path = e.path;
    if (!seen_as_.count(raw_signature) && raw_signature != signature) {
      SeenAs seen = SeenAs::of(e.c);
      seen.add(raw_signature);
      seen.write_to(e.c);
      if (!rewrite(e, error)) return std::nullopt;
    }
    seen_as_[raw_signature] = signature;
    return Saved::KeptExisting;
  }
  const bool replacing = it != entries_.end();
  CorpusEntry e{replacing ? it->second.path : file_name(c, signature), c, signature, case_size(c)};
  if (provenance_value(e.c, kProvSignature) != signature) e.c.provenance.push_back(std::string(kProvSignature) + signature);
  // The new repro inherits the raw signatures that led to the old one.
  SeenAs seen = SeenAs::of(e.c);
  if (replacing) {
    const SeenAs old = SeenAs::of(it->second.c);
    for (const std::string& raw : old.listed) seen.add(raw);
    seen.more += old.more;
  }
  if (raw_signature != signature) seen.add(raw_signature);
  seen.write_to(e.c);
  if (!rewrite(e, error)) return std::nullopt;
  *path = e.path;
  seen_as_[raw_signature] = signature;
  entries_[signature] = std::move(e);
  return replacing ? Saved::Smaller : Saved::New;
}

}  // namespace afz
