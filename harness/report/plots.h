// Plots for report.html, drawn by gnuplot (Debian's gnuplot-nox) as SVG.
//
// gnuplot runs once per page as a subprocess: every curve goes to a data
// file, one script sets `set terminal svg` and an output file per plot, and
// the SVG text comes back for the page to embed inline.  Without gnuplot the
// caller gets the reason instead of plots and says so on the page.
#pragma once
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace afz {

struct PlotCurve {
  std::string title;  // "" for no legend entry
  std::vector<std::pair<double, double>> points;
  int color = 0;      // index into the palette: one colour per kernel on the whole page
  bool dashed = false;
};

struct Plot {
  std::string title, xlabel, ylabel;
  bool log_x = false, log_y = false;
  std::optional<double> x_marker;  // a vertical dashed line, e.g. at the bound
  std::string x_marker_label;
  std::optional<std::pair<double, double>> x_range;
  std::vector<PlotCurve> curves;

  // Points a log axis cannot show (<= 0, not finite) are dropped: true when
  // something is left to draw.
  bool drawable() const;
};

struct PlotSet {
  std::vector<std::string> svgs;  // per plot: inline <svg> text, "" where nothing was drawable
  std::string error;              // non-empty: no plots at all, and why (one line)
};

// The gnuplot to run: `requested` when given, else $ATTNFUZZ_GNUPLOT, else
// `gnuplot` on PATH; "" when none is executable.
std::string find_gnuplot(const std::string& requested);

// Renders every plot with one gnuplot run.  width x height in pixels.
PlotSet render_plots(const std::vector<Plot>& plots, const std::string& gnuplot, int width = 660, int height = 400);

// The page's palette (colour-blind-safe where it can be), as "#rrggbb".
const char* plot_color(int index);

}  // namespace afz
