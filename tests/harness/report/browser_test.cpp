// report.html in a real browser: headless Chromium (Debian's `chromium`,
// installed by .ci/install-deps.sh) renders the page of a real campaign,
// dumps the DOM it built and takes a screenshot.  The DOM must show the
// verdict, the tables and the gnuplot plots; the screenshot must be a real
// picture, not a blank page.  Skipped, with the reason, without chromium.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "harness/report/plots.h"
#include "tests/harness/report/report_fixture.h"

namespace afz {
namespace {

namespace fs = std::filesystem;

constexpr int kWidth = 1400, kHeight = 2000;
// A blank 1400 x 2000 page compresses to a few kilobytes; text, coloured
// tables and plots take far more.
constexpr uintmax_t kMinScreenshotBytes = 40 * 1024;

std::string find_chromium() {
  for (const char* name : {"chromium", "chromium-browser"})
    if (std::system((std::string("command -v ") + name + " > /dev/null 2>&1").c_str()) == 0) return name;
  return "";
}

// The flags that keep a headless browser quiet, offline and alone.
std::string chromium_command(const std::string& chromium, const std::string& profile) {
  return chromium +
         " --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking"
         " --disable-component-update --disable-sync --disable-dev-shm-usage --hide-scrollbars --user-data-dir=" +
         profile + " --window-size=" + std::to_string(kWidth) + "," + std::to_string(kHeight);
}

// Runs a shell command with a time limit; stdout as text, exit status out.
std::string run(const std::string& command, int* status) {
  std::string out;
  FILE* p = ::popen(("timeout 90 " + command + " 2>/dev/null").c_str(), "r");
  if (!p) {
    *status = -1;
    return out;
  }
  std::array<char, 65536> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  const int rc = ::pclose(p);
  *status = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  return out;
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

// Width and height from a PNG's IHDR chunk (big-endian, bytes 16..23).
std::pair<uint32_t, uint32_t> png_size(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::array<unsigned char, 24> h{};
  in.read(reinterpret_cast<char*>(h.data()), h.size());
  static const unsigned char kSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (!in || !std::equal(kSignature, kSignature + 8, h.begin())) return {0, 0};
  auto be32 = [&](int at) { return uint32_t(h[at]) << 24 | uint32_t(h[at + 1]) << 16 | uint32_t(h[at + 2]) << 8 | h[at + 3]; };
  return {be32(16), be32(20)};
}

TEST(HtmlInBrowser, ChromiumRendersTablesAndPlots) {
  const std::string chromium = find_chromium();
  if (chromium.empty()) GTEST_SKIP() << "chromium is not installed (.ci/install-deps.sh installs it)";
  const bool have_gnuplot = !find_gnuplot("").empty();

  const std::string dir = testing::temp_folder("browser");
  const Report r = testing::run_quick_campaign(0, 12, 1, dir + "/corpus");
  ASSERT_FALSE(r.failures.empty());
  std::string error;
  ASSERT_TRUE(write_report_folder(r, dir, &error)) << error;
  const std::string url = "file://" + (fs::path(dir) / kReportHtmlFile).string();

  int status = 0;
  const std::string dom = run(chromium_command(chromium, dir + "/profile-dom") + " --dump-dom " + url, &status);
  ASSERT_EQ(status, 0) << "chromium --dump-dom failed";
  // The DOM chromium built (not our text): the verdict, the tables, a
  // failure with its command.
  EXPECT_NE(dom.find("id=\"verdict\""), std::string::npos);
  EXPECT_NE(dom.find("FAIL"), std::string::npos);
  EXPECT_NE(dom.find("<table class=\"kernels\""), std::string::npos);
  EXPECT_NE(dom.find("<table class=\"classes\""), std::string::npos);
  EXPECT_NE(dom.find("<table class=\"stats\""), std::string::npos);
  EXPECT_GE(count(dom, "<article class=\"failure\""), r.failures.size());
  EXPECT_NE(dom.find("attnfuzz repro "), std::string::npos);
  if (have_gnuplot) {
    // Four plots per output series, each an inline <svg> with drawn paths.
    const size_t svgs = count(dom, "<svg");
    EXPECT_GE(svgs, 4u);
    const std::regex plot_svg("<svg[^>]*>[\\s\\S]*?<path[\\s\\S]*?</svg>");
    EXPECT_GE(size_t(std::distance(std::sregex_iterator(dom.begin(), dom.end(), plot_svg), std::sregex_iterator())),
              4u);
    EXPECT_EQ(dom.find("id=\"no-plots\""), std::string::npos);
  } else {
    EXPECT_NE(dom.find("id=\"no-plots\""), std::string::npos);
  }

  const std::string png = (fs::path(dir) / "report.png").string();
  run(chromium_command(chromium, dir + "/profile-shot") + " --screenshot=" + png + " " + url, &status);
  ASSERT_EQ(status, 0) << "chromium --screenshot failed";
  ASSERT_TRUE(fs::exists(png));
  const auto [w, h] = png_size(png);
  EXPECT_EQ(w, uint32_t(kWidth));
  EXPECT_EQ(h, uint32_t(kHeight));
  EXPECT_GT(fs::file_size(png), kMinScreenshotBytes) << "the screenshot looks blank: " << png;
  // Kept for a person to look at when ATTNFUZZ_KEEP_SCREENSHOT names a path.
  if (const char* keep = std::getenv("ATTNFUZZ_KEEP_SCREENSHOT")) fs::copy_file(png, keep, fs::copy_options::overwrite_existing);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace afz
