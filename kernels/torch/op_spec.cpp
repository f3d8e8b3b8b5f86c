#include "op_spec.h"

#include <charconv>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>

namespace afz::torchk {
namespace {

// Declared limits are int32 in the ABI; "no limit" is the largest of them.
constexpr int32_t kInt32Max = std::numeric_limits<int32_t>::max();

const std::map<std::string, afz_dtype>& dtype_names() {
  static const std::map<std::string, afz_dtype> m = {
      {"f32", AFZ_F32}, {"fp32", AFZ_F32}, {"float32", AFZ_F32},   {"f16", AFZ_F16},
      {"fp16", AFZ_F16}, {"float16", AFZ_F16}, {"bf16", AFZ_BF16}, {"bfloat16", AFZ_BF16},
  };
  return m;
}

const std::map<std::string, uint32_t>& cap_names() {
  static const std::map<std::string, uint32_t> m = {
      {"causal_top_left", AFZ_CAP_CAUSAL_TOP_LEFT},
      {"causal_bottom_right", AFZ_CAP_CAUSAL_BOTTOM_RIGHT},
      {"window", AFZ_CAP_WINDOW},
      {"bool_mask", AFZ_CAP_BOOL_MASK},
      {"add_mask", AFZ_CAP_ADD_MASK},
      {"varlen", AFZ_CAP_VARLEN},
      {"gqa", AFZ_CAP_GQA},
      {"softcap", AFZ_CAP_SOFTCAP},
      {"lse", AFZ_CAP_LSE},
      {"strided", AFZ_CAP_STRIDED},
      {"dv_ne_d", AFZ_CAP_DV_NE_D},
      {"nondeterministic", AFZ_CAP_NONDETERMINISTIC},
  };
  return m;
}

const std::map<std::string, Source>& source_names() {
  static const std::map<std::string, Source> m = {
      {"q", Source::Q},
      {"k", Source::K},
      {"v", Source::V},
      {"scale", Source::Scale},
      {"softcap", Source::Softcap},
      {"is_causal", Source::IsCausal},
      {"window_left", Source::WindowLeft},
      {"window_right", Source::WindowRight},
      {"bias", Source::Bias},
      {"bias_f32", Source::BiasF32},
      {"mask", Source::Mask},
      {"cu_seqlens_q", Source::CuSeqlensQ},
      {"cu_seqlens_k", Source::CuSeqlensK},
      {"max_seqlen_q", Source::MaxSeqlenQ},
      {"max_seqlen_k", Source::MaxSeqlenK},
      {"enable_gqa", Source::EnableGqa},
  };
  return m;
}

std::string joined_keys(const auto& m) {
  std::string s;
  for (const auto& [k, v] : m) s += (s.empty() ? "" : ", ") + k;
  return s;
}

// Splits a line into whitespace-separated words; '#' starts a comment.
std::vector<std::string> words_of(const std::string& line) {
  std::vector<std::string> w;
  std::istringstream in(line.substr(0, line.find('#')));
  for (std::string s; in >> s;) w.push_back(s);
  return w;
}

bool parse_int(const std::string& s, int64_t* v) {
  const char* end = s.data() + s.size();
  auto [p, ec] = std::from_chars(s.data(), end, *v);
  return ec == std::errc() && p == end;
}

// "key=value" words into a map, each key once, each from `allowed`.
bool key_values(const std::vector<std::string>& w, size_t first, const std::set<std::string>& allowed,
                std::map<std::string, std::string>* out, std::string* why) {
  for (size_t i = first; i < w.size(); ++i) {
    const size_t eq = w[i].find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == w[i].size()) {
      *why = "expected key=value, got '" + w[i] + "'";
      return false;
    }
    const std::string key = w[i].substr(0, eq);
    if (!allowed.count(key)) {
      std::string list;
      for (const std::string& a : allowed) list += (list.empty() ? "" : ", ") + a;
      *why = "unknown key '" + key + "' (expected " + list + ")";
      return false;
    }
    if (!out->emplace(key, w[i].substr(eq + 1)).second) {
      *why = "key '" + key + "' given twice";
      return false;
    }
  }
  for (const std::string& a : allowed)
    if (!out->count(a)) {
      *why = "missing " + a + "=";
      return false;
    }
  return true;
}

bool is_literal(const std::string& s) {
  if (s == "none" || s == "true" || s == "false") return true;
  int64_t i;
  if (parse_int(s, &i)) return true;
  std::istringstream in(s);
  double d;
  return (in >> d) && in.eof();
}

class Parser {
 public:
  Parser(std::string file, std::string base_dir) : file_(std::move(file)), base_dir_(std::move(base_dir)) {}

  bool parse(const std::string& text, OpsFile* out, std::string* error) {
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
      ++line_no_;
      if (!line_(line, out)) {
        *error = file_ + ":" + std::to_string(line_no_) + ": " + why_;
        return false;
      }
    }
    if (open_) {
      *error = file_ + ":" + std::to_string(line_no_) + ": kernel '" + cur_.name + "' (line " +
               std::to_string(cur_.line) + ") has no 'end'";
      return false;
    }
    return true;
  }

 private:
  bool fail(std::string why) {
    why_ = std::move(why);
    return false;
  }

  bool line_(const std::string& raw, OpsFile* out) {
    const std::vector<std::string> w = words_of(raw);
    if (w.empty()) return true;
    const std::string& d = w[0];
    if (!open_) {
      if (d == "library") {
        if (w.size() != 2) return fail("library takes one path");
        out->libraries.push_back(!w[1].empty() && w[1][0] == '/' ? w[1] : base_dir_ + "/" + w[1]);
        out->library_lines.push_back(line_no_);
        return true;
      }
      if (d == "kernel") {
        if (w.size() != 2) return fail("kernel takes one name");
        if (!names_.insert(w[1]).second) return fail("kernel '" + w[1] + "' is declared twice");
        cur_ = OpSpec{};
        cur_.file = file_;
        cur_.line = line_no_;
        cur_.name = w[1];
        seen_.clear();
        open_ = true;
        return true;
      }
      if (d == "end") return fail("'end' without a 'kernel'");
      return fail("unknown directive '" + d + "' outside a kernel entry (expected library or kernel)");
    }
    if (d == "end") {
      if (w.size() != 1) return fail("'end' takes nothing");
      if (!finish()) return false;
      out->kernels.push_back(cur_);
      open_ = false;
      return true;
    }
    if (d == "kernel") return fail("kernel '" + cur_.name + "' (line " + std::to_string(cur_.line) + ") has no 'end'");
    if (d == "library") return fail("'library' inside kernel '" + cur_.name + "': put it before the entries");
    // Repeatable directives; the rest once per entry.
    if (d != "caps" && d != "arg" && d != "return" && !seen_.insert(d).second)
      return fail("'" + d + "' given twice in kernel '" + cur_.name + "'");
    if (d == "op") return op(w);
    if (d == "device") return device(w);
    if (d == "description") return description(raw);
    if (d == "dtypes") return dtypes(w, &cur_.in_dtypes, false);
    if (d == "out_dtypes") return dtypes(w, &cur_.out_dtypes, true);
    if (d == "head_dim") return head_dim(w);
    if (d == "max_seqlen") return max_seqlen(w);
    if (d == "caps") return caps(w);
    if (d == "precision") return precision(w);
    if (d == "conventions") return conventions(w);
    if (d == "layout") return layout(w);
    if (d == "arg") return arg(w);
    if (d == "return") return ret(w);
    return fail("unknown directive '" + d +
                "' (expected op, device, description, dtypes, out_dtypes, head_dim, max_seqlen, caps, precision, "
                "conventions, layout, arg, return or end)");
  }

  bool op(const std::vector<std::string>& w) {
    if (w.size() != 2 || w[1].find("::") == std::string::npos || w[1].find("::") == 0)
      return fail("op takes one operator name, namespace::name[.overload]");
    cur_.op = w[1];
    cur_.op_line = line_no_;
    return true;
  }

  bool device(const std::vector<std::string>& w) {
    if (w.size() != 2 || (w[1] != "cpu" && w[1] != "cuda")) return fail("device takes cpu or cuda");
    cur_.cuda = w[1] == "cuda";
    return true;
  }

  bool description(const std::string& raw) {
    const size_t at = raw.find("description");
    std::string text = raw.substr(at + std::string("description").size());
    const size_t first = text.find_first_not_of(" \t");
    const size_t last = text.find_last_not_of(" \t\r");
    if (first == std::string::npos) return fail("description is empty");
    cur_.description = text.substr(first, last - first + 1);
    return true;
  }

  bool dtypes(const std::vector<std::string>& w, uint32_t* mask, bool out) {
    if (w.size() < 2) return fail(w[0] + " takes at least one dtype");
    if (out && w.size() == 2 && w[1] == "same") {
      cur_.out_same = true;
      return true;
    }
    if (out) cur_.out_same = false;
    for (size_t i = 1; i < w.size(); ++i) {
      auto it = dtype_names().find(w[i]);
      if (it == dtype_names().end())
        return fail("unknown dtype '" + w[i] + "' (expected " + joined_keys(dtype_names()) + (out ? ", or same" : "") +
                    ")");
      *mask |= 1u << it->second;
    }
    return true;
  }

  bool head_dim(const std::vector<std::string>& w) {
    int64_t v[3] = {0, 0, 1};
    if (w.size() < 3 || w.size() > 4) return fail("head_dim takes MIN MAX [MULTIPLE]");
    for (size_t i = 1; i < w.size(); ++i)
      if (!parse_int(w[i], &v[i - 1]) || v[i - 1] < 1 || v[i - 1] > kInt32Max)
        return fail("head_dim: '" + w[i] + "' is not a positive integer");
    if (v[0] > v[1]) return fail("head_dim: MIN above MAX");
    cur_.min_head_dim = int32_t(v[0]);
    cur_.max_head_dim = int32_t(v[1]);
    cur_.head_dim_multiple = int32_t(v[2]);
    return true;
  }

  bool max_seqlen(const std::vector<std::string>& w) {
    int64_t v = 0;
    if (w.size() != 2 || !parse_int(w[1], &v) || v < 1 || v > kInt32Max)
      return fail("max_seqlen takes one positive integer");
    cur_.max_seqlen = int32_t(v);
    return true;
  }

  bool caps(const std::vector<std::string>& w) {
    if (w.size() < 2) return fail("caps takes at least one capability");
    for (size_t i = 1; i < w.size(); ++i) {
      if (w[i] == "gpu") return fail("'gpu' is not a capability here: say 'device cuda'");
      auto it = cap_names().find(w[i]);
      if (it == cap_names().end())
        return fail("unknown capability '" + w[i] + "' (expected " + joined_keys(cap_names()) + ")");
      cur_.flags |= it->second;
    }
    return true;
  }

  bool precision(const std::vector<std::string>& w) {
    std::map<std::string, std::string> kv;
    std::string why;
    if (!key_values(w, 1, {"score", "p", "acc", "exp_ulps", "flush", "l_from_unrounded_p"}, &kv, &why))
      return fail("precision: " + why);
    auto dtype = [&](const std::string& key, afz_dtype* out, bool allow_v) {
      if (allow_v && kv[key] == "v") {
        *out = AFZ_P_DTYPE_OF_V;
        return true;
      }
      auto it = dtype_names().find(kv[key]);
      if (it == dtype_names().end())
        return fail("precision: " + key + "=" + kv[key] + " is no dtype (expected " + joined_keys(dtype_names()) +
                    (allow_v ? ", or v: the dtype of V" : "") + ")");
      *out = it->second;
      return true;
    };
    afz_precision& p = cur_.precision;
    if (!dtype("score", &p.score_dtype, false) || !dtype("p", &p.p_dtype, true) || !dtype("acc", &p.acc_dtype, false))
      return false;
    std::istringstream ulps(kv["exp_ulps"]);
    double e = -1;
    if (!(ulps >> e) || !ulps.eof() || e < 0) return fail("precision: exp_ulps=" + kv["exp_ulps"] + " is not >= 0");
    p.exp_ulps = float(e);
    for (const char* key : {"flush", "l_from_unrounded_p"})
      if (kv[key] != "0" && kv[key] != "1") return fail(std::string("precision: ") + key + "= takes 0 or 1");
    p.flush_subnormals = kv["flush"] == "1";
    p.l_from_unrounded_p = kv["l_from_unrounded_p"] == "1";
    return true;
  }

  bool conventions(const std::vector<std::string>& w) {
    std::map<std::string, std::string> kv;
    std::string why;
    if (!key_values(w, 1, {"masked_row", "empty_lse"}, &kv, &why)) return fail("conventions: " + why);
    if (kv["masked_row"] == "zero") cur_.conventions.masked_row_output = AFZ_MASKED_ROW_ZERO;
    else if (kv["masked_row"] == "nan") cur_.conventions.masked_row_output = AFZ_MASKED_ROW_NAN;
    else return fail("conventions: masked_row= takes zero or nan");
    if (kv["empty_lse"] == "neg_inf") cur_.conventions.empty_lse = AFZ_EMPTY_LSE_NEG_INF;
    else if (kv["empty_lse"] == "pos_inf") cur_.conventions.empty_lse = AFZ_EMPTY_LSE_POS_INF;
    else if (kv["empty_lse"] == "nan") cur_.conventions.empty_lse = AFZ_EMPTY_LSE_NAN;
    else if (kv["empty_lse"] == "zero") cur_.conventions.empty_lse = AFZ_EMPTY_LSE_ZERO;
    else return fail("conventions: empty_lse= takes neg_inf, pos_inf, nan or zero");
    return true;
  }

  bool layout(const std::vector<std::string>& w) {
    if (w.size() < 2 || w.size() > 3 || (w.size() == 3 && w[2] != "contiguous"))
      return fail("layout takes bhsd, bshd or packed, then optionally 'contiguous'");
    if (w[1] == "bhsd") cur_.layout = TensorLayout::BHSD;
    else if (w[1] == "bshd") cur_.layout = TensorLayout::BSHD;
    else if (w[1] == "packed") cur_.layout = TensorLayout::Packed;
    else return fail("unknown layout '" + w[1] + "' (expected bhsd, bshd or packed)");
    cur_.contiguous = w.size() == 3;
    return true;
  }

  bool arg(const std::vector<std::string>& w) {
    // arg NAME = SOURCE   |   arg NAME = const LITERAL
    if (w.size() < 4 || w[2] != "=" || (w[3] == "const" ? w.size() != 5 : w.size() != 4))
      return fail("expected 'arg NAME = SOURCE' or 'arg NAME = const LITERAL'");
    for (const ArgSpec& a : cur_.args)
      if (a.name == w[1]) return fail("argument '" + w[1] + "' mapped twice (line " + std::to_string(a.line) + ")");
    ArgSpec a;
    a.name = w[1];
    a.line = line_no_;
    if (w[3] == "const") {
      if (!is_literal(w[4]))
        return fail("'" + w[4] + "' is not a literal (expected none, true, false, an integer or a float)");
      a.source = Source::Const;
      a.literal = w[4];
    } else {
      auto it = source_names().find(w[3]);
      if (it == source_names().end())
        return fail("unknown source '" + w[3] + "' for argument '" + w[1] + "' (expected " +
                    joined_keys(source_names()) + ", or const LITERAL)");
      for (const ArgSpec& b : cur_.args)
        if (b.source == it->second)
          return fail("source '" + w[3] + "' already goes to argument '" + b.name + "' (line " +
                      std::to_string(b.line) + ")");
      a.source = it->second;
    }
    cur_.args.push_back(a);
    return true;
  }

  bool ret(const std::vector<std::string>& w) {
    // return o INDEX   |   return lse INDEX [LAYOUT]
    int64_t index = -1;
    if (w.size() < 3 || (w[1] != "o" && w[1] != "lse") || (w[1] == "o" && w.size() != 3) || w.size() > 4)
      return fail("expected 'return o INDEX' or 'return lse INDEX [bhs|bsh|hs|sh]'");
    if (!parse_int(w[2], &index) || index < 0) return fail("return: '" + w[2] + "' is not an index >= 0");
    ReturnSpec& r = w[1] == "o" ? cur_.out : cur_.lse;
    if (r.index >= 0) return fail("return " + w[1] + " given twice (line " + std::to_string(r.line) + ")");
    r.index = int(index);
    r.line = line_no_;
    if (w.size() == 4) {
      if (w[3] == "bhs") r.lse_layout = LseLayout::BHS;
      else if (w[3] == "bsh") r.lse_layout = LseLayout::BSH;
      else if (w[3] == "hs") r.lse_layout = LseLayout::HS;
      else if (w[3] == "sh") r.lse_layout = LseLayout::SH;
      else return fail("unknown LSE layout '" + w[3] + "' (expected bhs, bsh, hs or sh)");
    } else if (w[1] == "lse") {
      r.lse_layout = LseLayout::BHS;
    }
    return true;
  }

  bool mapped(Source s) const {
    for (const ArgSpec& a : cur_.args)
      if (a.source == s) return true;
    return false;
  }

  // Cross-checks at 'end': what the entry declares must be expressible.
  bool finish() {
    const uint32_t f = cur_.flags;
    if (cur_.op.empty()) return fail("kernel '" + cur_.name + "' has no 'op'");
    if (!seen_.count("device")) return fail("kernel '" + cur_.name + "' has no 'device' (cpu or cuda)");
    if (!cur_.in_dtypes) return fail("kernel '" + cur_.name + "' has no 'dtypes'");
    if (!seen_.count("precision")) return fail("kernel '" + cur_.name + "' has no 'precision': declare what it computes");
    if (cur_.out.index < 0) return fail("kernel '" + cur_.name + "' has no 'return o INDEX'");
    for (Source s : {Source::Q, Source::K, Source::V})
      if (!mapped(s)) return fail("kernel '" + cur_.name + "' maps no argument to q, k and v");
    if (cur_.out_same) cur_.out_dtypes = cur_.in_dtypes;
    if (!seen_.count("head_dim")) {
      cur_.min_head_dim = 1;
      cur_.max_head_dim = kInt32Max;
    }
    if (cur_.description.empty()) cur_.description = "torch operator " + cur_.op + " (declared in " + file_ + ")";
    const bool packed = cur_.layout == TensorLayout::Packed;
    if ((f & AFZ_CAP_LSE) && cur_.lse.index < 0) return fail("caps lse needs 'return lse INDEX'");
    if (!(f & AFZ_CAP_LSE) && cur_.lse.index >= 0) return fail("'return lse' needs caps lse");
    if (cur_.lse.index >= 0) {
      const LseLayout l = cur_.lse.lse_layout;
      if (!packed && (l == LseLayout::HS || l == LseLayout::SH))
        return fail("LSE layouts hs and sh are for layout packed");
      if (packed && l == LseLayout::BSH) return fail("LSE layout bsh is for layouts bhsd and bshd");
    }
    if ((f & (AFZ_CAP_CAUSAL_TOP_LEFT | AFZ_CAP_CAUSAL_BOTTOM_RIGHT)) && !mapped(Source::IsCausal) &&
        !(mapped(Source::WindowLeft) && mapped(Source::WindowRight)))
      return fail("a causal capability needs an argument mapped to is_causal (or window_left and window_right)");
    if ((f & AFZ_CAP_WINDOW) && !(mapped(Source::WindowLeft) && mapped(Source::WindowRight)))
      return fail("caps window needs arguments mapped to window_left and window_right");
    if ((f & AFZ_CAP_WINDOW) && !(f & (AFZ_CAP_CAUSAL_TOP_LEFT | AFZ_CAP_CAUSAL_BOTTOM_RIGHT)))
      return fail("caps window needs the alignment it uses: causal_top_left or causal_bottom_right");
    if (mapped(Source::Bias) && mapped(Source::BiasF32)) return fail("map bias or bias_f32, not both");
    const bool bias = mapped(Source::Bias) || mapped(Source::BiasF32);
    if ((f & AFZ_CAP_ADD_MASK) && !bias) return fail("caps add_mask needs an argument mapped to bias or bias_f32");
    if ((f & AFZ_CAP_BOOL_MASK) && !bias && !mapped(Source::Mask))
      return fail("caps bool_mask needs an argument mapped to mask, bias or bias_f32");
    if ((f & AFZ_CAP_SOFTCAP) && !mapped(Source::Softcap)) return fail("caps softcap needs an argument mapped to softcap");
    if (packed) {
      for (Source s : {Source::CuSeqlensQ, Source::CuSeqlensK, Source::MaxSeqlenQ, Source::MaxSeqlenK})
        if (!mapped(s)) return fail("layout packed needs arguments mapped to cu_seqlens_q, cu_seqlens_k, max_seqlen_q and max_seqlen_k");
      if (bias || mapped(Source::Mask)) return fail("masks need layout bhsd or bshd (a packed batch has no [B][H][Sq][Sk] mask)");
    } else {
      for (Source s : {Source::CuSeqlensQ, Source::CuSeqlensK, Source::MaxSeqlenQ, Source::MaxSeqlenK})
        if (mapped(s)) return fail("cu_seqlens_* and max_seqlen_* are for layout packed");
    }
    return true;
  }

  std::string file_, base_dir_, why_;
  int line_no_ = 0;
  bool open_ = false;
  OpSpec cur_;
  std::set<std::string> names_, seen_;
};

}  // namespace

bool parse_ops(const std::string& text, const std::string& file, const std::string& base_dir, OpsFile* out,
               std::string* error) {
  *out = OpsFile{};
  out->file = file;
  return Parser(file, base_dir).parse(text, out, error);
}

bool read_ops_file(const std::string& path, OpsFile* out, std::string* error) {
  std::ifstream in(path);
  if (!in) {
    *error = path + ": cannot read the file";
    return false;
  }
  std::ostringstream text;
  text << in.rdbuf();
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash == 0 ? 1 : slash);
  return parse_ops(text.str(), path, dir, out, error);
}

}  // namespace afz::torchk
