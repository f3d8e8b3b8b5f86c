#include "harness/report/plots.h"

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <sstream>

#include "harness/process/child_process.h"

namespace afz {
namespace fs = std::filesystem;

namespace {

// Okabe-Ito, then a few more: distinguishable for most colour vision.
constexpr const char* kPalette[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9",
                                    "#000000", "#F0E442", "#8C564B", "#7F7F7F", "#17BECF", "#BCBD22"};
constexpr int kPaletteSize = int(sizeof kPalette / sizeof kPalette[0]);

bool executable(const fs::path& p) { return ::access(p.c_str(), X_OK) == 0 && !fs::is_directory(p); }

bool keep(const Plot& p, double x, double y) {
  if (!std::isfinite(x) || !std::isfinite(y)) return false;
  if (p.log_x && x <= 0) return false;
  if (p.log_y && y <= 0) return false;
  return true;
}

// A gnuplot single-quoted string: only '' needs escaping inside.
std::string quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') out += "''";
    else if (c == '\n' || c == '\r') out += ' ';
    else out += c;
  }
  return out + "'";
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// gnuplot writes a standalone SVG document.  Inline in HTML it must lose
// the XML prolog and doctype, and its ids (markers, canvas) must be unique
// on the page: every plot would otherwise define the same "#gpPt0".
std::string inline_svg(std::string svg, size_t n) {
  const size_t start = svg.find("<svg");
  if (start == std::string::npos) return "";
  svg.erase(0, start);
  const std::string prefix = fmt::format("p{}_", n);
  for (const char* id : {"gpPt", "gpDot", "gnuplot_", "gpBkgnd", "gpGrid", "gpKey", "textbox", "greybox"}) {
    const std::string from = id, to = prefix + id;
    size_t at = 0;
    while ((at = svg.find(from, at)) != std::string::npos) {
      // Only ids and references: the character before is ' " or #.
      const char before = at > 0 ? svg[at - 1] : ' ';
      if (before == '\'' || before == '"' || before == '#') {
        svg.replace(at, from.size(), to);
        at += to.size();
      } else {
        at += from.size();
      }
    }
  }
  return svg;
}

}  // namespace

bool Plot::drawable() const {
  for (const PlotCurve& c : curves)
    for (const auto& [x, y] : c.points)
      if (keep(*this, x, y)) return true;
  return false;
}

const char* plot_color(int index) { return kPalette[((index % kPaletteSize) + kPaletteSize) % kPaletteSize]; }

std::string find_gnuplot(const std::string& requested) {
  std::string want = requested;
  if (want.empty())
    if (const char* env = std::getenv("ATTNFUZZ_GNUPLOT")) want = env;
  if (want.empty()) want = "gnuplot";
  if (want.find('/') != std::string::npos) return executable(want) ? want : "";
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path ? path : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':'))
    if (!dir.empty() && executable(fs::path(dir) / want)) return (fs::path(dir) / want).string();
  return "";
}

PlotSet render_plots(const std::vector<Plot>& plots, const std::string& gnuplot, int width, int height) {
  PlotSet out;
  out.svgs.assign(plots.size(), "");
  bool any = false;
  for (const Plot& p : plots) any |= p.drawable();
  if (!any) return out;
  const std::string program = find_gnuplot(gnuplot);
  if (program.empty()) {
    out.error = "gnuplot was not found (install Debian's gnuplot-nox, or name it with ATTNFUZZ_GNUPLOT)";
    return out;
  }
  std::string tmpl = (fs::temp_directory_path() / "attnfuzz-plots-XXXXXX").string();
  if (!::mkdtemp(tmpl.data())) {
    out.error = "cannot create a temporary folder for gnuplot's files";
    return out;
  }
  const fs::path dir = tmpl;
  std::ostringstream script;
  script << "set encoding utf8\n";
  for (size_t n = 0; n < plots.size(); ++n) {
    const Plot& p = plots[n];
    if (!p.drawable()) continue;
    script << "reset session\n"
           << fmt::format("set terminal svg size {},{} font 'Helvetica,12' background rgb 'white'\n", width, height)
           // The key goes below the graph: curves of many kernels would hide under it.
           << "set grid xtics ytics lc rgb '#dddddd'\nset key below noenhanced samplen 2\n"
           << "set output " << quoted((dir / fmt::format("plot{}.svg", n)).string()) << "\n"
           << "set title " << quoted(p.title) << " noenhanced\n"
           << "set xlabel " << quoted(p.xlabel) << " noenhanced\n"
           << "set ylabel " << quoted(p.ylabel) << " noenhanced\n";
    // Log axes labelled 10^k (enhanced text renders the exponent raised).
    if (p.log_x) script << "set logscale x 10\nset format x '10^{%L}'\n";
    if (p.log_y) script << "set logscale y 10\nset format y '10^{%L}'\n";
    if (p.x_range) script << fmt::format("set xrange [{:.17g}:{:.17g}]\n", p.x_range->first, p.x_range->second);
    if (p.x_marker && (!p.log_x || *p.x_marker > 0)) {
      script << fmt::format("set arrow from {0:.17g}, graph 0 to {0:.17g}, graph 1 nohead dt 2 lw 1.5 lc rgb '#C00000'\n",
                            *p.x_marker);
      if (!p.x_marker_label.empty())
        script << fmt::format("set label {} at {:.17g}, graph 0.05 left offset 0.5,0 tc rgb '#C00000' noenhanced\n",
                              quoted(p.x_marker_label), *p.x_marker);
    }
    std::vector<std::string> terms;
    for (size_t c = 0; c < p.curves.size(); ++c) {
      const PlotCurve& curve = p.curves[c];
      const fs::path data = dir / fmt::format("d{}_{}.dat", n, c);
      std::ofstream f(data);
      size_t kept = 0;
      for (const auto& [x, y] : curve.points)
        if (keep(p, x, y)) {
          f << fmt::format("{:.17g} {:.17g}\n", x, y);
          ++kept;
        }
      if (kept == 0) continue;
      terms.push_back(fmt::format("{} using 1:2 with linespoints lw {} pt 7 ps 0.6 dt {} lc rgb '{}' {}",
                                  quoted(data.string()), curve.dashed ? 1.2 : 2, curve.dashed ? 2 : 1,
                                  plot_color(curve.color),
                                  curve.title.empty() ? "notitle" : "title " + quoted(curve.title) + " noenhanced"));
    }
    script << "plot ";
    for (size_t t = 0; t < terms.size(); ++t) script << (t ? ", \\\n     " : "") << terms[t];
    script << "\nunset output\n";
  }
  const fs::path script_path = dir / "plots.gp";
  std::ofstream(script_path) << script.str();
  const ChildRun run = run_child({program, script_path.string()}, 0);
  if (!run.started || run.exit_code != 0) {
    // gnuplot prints the offending line, a ^ under it, then the error: the
    // last line with more than blanks and carets says what went wrong.
    out.error = !run.started ? "gnuplot (" + program + ") could not be run"
                             : "gnuplot failed: " + last_line(run.output, " \t^");
  } else {
    for (size_t n = 0; n < plots.size(); ++n)
      if (plots[n].drawable()) out.svgs[n] = inline_svg(read_file(dir / fmt::format("plot{}.svg", n)), n);
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
  return out;
}

}  // namespace afz
