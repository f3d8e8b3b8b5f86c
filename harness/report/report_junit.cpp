// junit.xml: the report as CI test results.  One <testsuite> per kernel and
// one <testcase> per kernel x generator class that ran; a testcase fails
// when any of its cases failed, and its <failure> carries each failure
// signature's detail, worst element and repro command.  A class the kernel
// declined entirely is <skipped>.  Harness errors are one more testcase with
// an <error>, so a broken run never reads as green.
#include <fmt/format.h>
#include <sstream>

#include "harness/report/report_views.h"

namespace afz {
namespace {

// XML 1.0 text and attribute values: the five specials escaped, and control
// characters (which XML 1.0 forbids even as references) replaced.
std::string xml(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      case '\n': out += "&#10;"; break;
      case '\t': out += "&#9;"; break;
      case '\r': out += "&#13;"; break;
      default: out += (c < 0x20 || c == 0x7f) ? '?' : ch;
    }
  }
  return out;
}

// Text content keeps its line breaks literally.
std::string xml_text(std::string_view s) {
  std::string out = xml(s);
  for (size_t at = out.find("&#10;"); at != std::string::npos; at = out.find("&#10;", at + 1)) out.replace(at, 5, "\n");
  return out;
}

std::string failure_text(const ReportFailure& f) {
  std::string s = fmt::format("{} {} [{}]: {}\n  signature: {}\n  found in {} case(s); repro from case {} (seed {})\n",
                              f.kernel, verdict_name(f.verdict), f.status, f.detail, f.signature, f.occurrences,
                              f.case_index, f.seed);
  if (!f.pass.empty()) s += "  pass: " + f.pass + (f.gradient.empty() ? "" : ", gradient " + f.gradient) + "\n";
  if (f.worst.valid) s += "  worst: " + f.worst.format() + "\n";
  s += "  repro: " + (f.repro.empty() ? std::string("(no case file saved; the case text is in report.json)") : f.repro) + "\n";
  if (!f.alone.outcome.empty()) s += "  alone: " + alone_summary(f.alone) + "\n";
  return s;
}

// A mutant run inverts the meaning of a failure: a kill is the test passing,
// a survivor is the failure (the generators have a blind spot), a mutant
// that declined every case (a GPU mutant without a GPU) is skipped.
std::string mutants_to_junit(const Report& r) {
  std::ostringstream cases;
  int64_t failures = 0, skipped = 0;
  for (const ReportMutant& m : r.mutants) {
    cases << fmt::format("    <testcase classname=\"attnfuzz.mutants\" name=\"{}\" assertions=\"{}\">\n",
                         xml(m.kernel), m.cases);
    if (m.killed) {
      cases << fmt::format("      <system-out>{}</system-out>\n",
                           xml_text(fmt::format("killed after {} cases ({:.3f} s): {} {}", m.cases_to_kill,
                                                m.seconds_to_kill, verdict_name(m.verdict), m.signature)));
    } else if (m.cases == 0) {
      ++skipped;
      cases << "      <skipped message=\"the mutant declined every case (unsupported here)\"/>\n";
    } else {
      ++failures;
      cases << fmt::format("      <failure message=\"{}\" type=\"survived\"/>\n",
                           xml(fmt::format("survived {} cases: the generators have a blind spot", m.cases)));
    }
    cases << "    </testcase>\n";
  }
  const int64_t tests = int64_t(r.mutants.size()), errors = r.errors.empty() ? 0 : 1;
  std::ostringstream out;
  out << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      << fmt::format("<testsuites name=\"attnfuzz mutants\" tests=\"{}\" failures=\"{}\" errors=\"{}\" "
                     "skipped=\"{}\" time=\"{:.6f}\">\n",
                     tests, failures, errors, skipped, r.run.wall_s)
      << fmt::format("  <testsuite name=\"mutant gate\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\" "
                     "time=\"{:.6f}\" timestamp=\"{}\">\n",
                     tests, failures, errors, skipped, r.run.wall_s, xml(r.run.started_utc))
      << cases.str() << "  </testsuite>\n</testsuites>\n";
  return out.str();
}

}  // namespace

std::string report_to_junit(const Report& r) {
  if (r.run.kind == "mutants") return mutants_to_junit(r);
  std::ostringstream body;
  int64_t tests = 0, failures = 0, skipped = 0;
  for (const ReportKernel& k : r.kernels) {
    std::ostringstream cases;
    int64_t k_tests = 0, k_failures = 0, k_skipped = 0;
    for (const ReportCell& c : r.cells) {
      if (c.kernel != k.name) continue;
      ++k_tests;
      const int64_t ran = c.cases - c.count(VerdictClass::Unsupported);
      cases << fmt::format("    <testcase classname=\"attnfuzz.{}\" name=\"{}\" assertions=\"{}\">\n", xml(k.name),
                           xml(c.generator), ran);
      if (c.failed() > 0) {
        ++k_failures;
        std::string verdicts, text, first_repro;
        for (int v = 0; v < kVerdictClassCount; ++v)
          if (is_failure(VerdictClass(v)) && c.by_verdict[size_t(v)])
            verdicts += fmt::format("{}{} {}", verdicts.empty() ? "" : ", ", verdict_name(VerdictClass(v)),
                                    c.by_verdict[size_t(v)]);
        // The signatures found in this class; one found first in another
        // class (deduplicated there) is listed under the kernel's others.
        for (const ReportFailure& f : r.failures)
          if (f.kernel == k.name && f.generator == c.generator) {
            text += failure_text(f);
            if (first_repro.empty()) first_repro = f.repro;
          }
        if (text.empty())
          for (const ReportFailure& f : r.failures)
            if (f.kernel == k.name && c.by_verdict[size_t(f.verdict)] > 0) {
              text += failure_text(f);
              if (first_repro.empty()) first_repro = f.repro;
            }
        std::string message = fmt::format("{} of {} cases failed ({})", c.failed(), ran, verdicts);
        if (!first_repro.empty()) message += "; repro: " + first_repro;
        cases << fmt::format("      <failure message=\"{}\" type=\"{}\">{}</failure>\n", xml(message),
                             xml(verdicts.substr(0, verdicts.find(' '))), xml_text(text));
      } else if (ran == 0) {
        ++k_skipped;
        cases << fmt::format("      <skipped message=\"{}\"/>\n",
                             xml(fmt::format("all {} cases unsupported by the kernel", c.cases)));
      }
      cases << "    </testcase>\n";
    }
    body << fmt::format("  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"0\" skipped=\"{}\" time=\"{:.6f}\""
                        " timestamp=\"{}\">\n",
                        xml(k.name), k_tests, k_failures, k_skipped, k.kernel_s, xml(r.run.started_utc))
         << cases.str() << "  </testsuite>\n";
    tests += k_tests;
    failures += k_failures;
    skipped += k_skipped;
  }
  // One testcase per distinct defect (findings.h), its variants in the text.
  const std::vector<ReportFinding> findings = group_findings(r.failures);
  if (!findings.empty()) {
    body << fmt::format("  <testsuite name=\"attnfuzz.findings\" tests=\"{}\" failures=\"{}\" errors=\"0\" "
                        "skipped=\"0\">\n",
                        findings.size(), findings.size());
    for (const ReportFinding& g : findings) {
      const ReportFailure& rep = r.failures[g.representative];
      std::string text;
      for (size_t i : g.failures) text += failure_text(r.failures[i]);
      body << fmt::format("    <testcase classname=\"attnfuzz.findings\" name=\"{}\">\n", xml(g.id + " " + g.kernel))
           << fmt::format("      <failure message=\"{}\" type=\"finding\">{}</failure>\n",
                          xml(finding_line(g) + (rep.repro.empty() ? "" : "; repro: " + rep.repro)), xml_text(text))
           << "    </testcase>\n";
    }
    body << "  </testsuite>\n";
    tests += int64_t(findings.size());
    failures += int64_t(findings.size());
  }
  const int64_t errors = r.errors.empty() ? 0 : 1;
  if (errors) {
    std::string text;
    for (const std::string& e : r.errors) text += e + "\n";
    body << "  <testsuite name=\"attnfuzz.harness\" tests=\"1\" failures=\"0\" errors=\"1\" skipped=\"0\">\n"
         << "    <testcase classname=\"attnfuzz.harness\" name=\"cases that could not be generated or run\">\n"
         << fmt::format("      <error message=\"{}\" type=\"harness\">{}</error>\n",
                        xml(fmt::format("{} case(s) could not be generated or run", r.errors.size())), xml_text(text))
         << "    </testcase>\n  </testsuite>\n";
    ++tests;
  }
  std::ostringstream out;
  out << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      << fmt::format("<testsuites name=\"attnfuzz {}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\" "
                     "time=\"{:.6f}\">\n",
                     xml(r.run.kind), tests, failures, errors, skipped, r.run.wall_s)
      << body.str() << "</testsuites>\n";
  return out.str();
}

}  // namespace afz
