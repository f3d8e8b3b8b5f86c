#include "op_kernels.h"

#include <dlfcn.h>

#include <algorithm>
#include <sstream>

#include "messages.h"
#include "problem_run.h"
#include "torch_ops.h"
#include "torch_views.h"

namespace afz::torchk {

namespace {

// The schema type of an argument without its '?' and whether it had one.
struct SchemaType {
  std::string name;  // "Tensor", "float", "int", "SymInt", "bool", "str", ...
  bool optional = false;
};
SchemaType schema_type(const c10::Argument& a) {
  c10::TypePtr t = a.type();
  SchemaType st;
  if (t->kind() == c10::TypeKind::OptionalType) {
    st.optional = true;
    t = t->cast<c10::OptionalType>()->getElementType();
  }
  st.name = t->str();
  return st;
}

bool is_tensor_source(Source s) {
  switch (s) {
    case Source::Q: case Source::K: case Source::V: case Source::Bias: case Source::BiasF32: case Source::Mask:
    case Source::CuSeqlensQ: case Source::CuSeqlensK:
      return true;
    default:
      return false;
  }
}

// The schema types a source can feed.
std::vector<std::string> accepted_types(Source s) {
  if (is_tensor_source(s)) return {"Tensor"};
  switch (s) {
    case Source::Scale: case Source::Softcap: return {"float"};
    case Source::IsCausal: case Source::EnableGqa: return {"bool"};
    case Source::WindowLeft: case Source::WindowRight: case Source::MaxSeqlenQ: case Source::MaxSeqlenK:
      return {"int", "SymInt"};
    default: return {};
  }
}

// A literal as the IValue its schema type wants; "" or why not.
std::string literal_value(const std::string& lit, const SchemaType& t, c10::IValue* out) {
  if (lit == "none") {
    if (!t.optional) return "none for a non-optional " + t.name;
    *out = c10::IValue();
    return "";
  }
  const bool boolean = lit == "true" || lit == "false";
  if (t.name == "bool") {
    if (!boolean) return "'" + lit + "' is not true or false";
    *out = c10::IValue(lit == "true");
    return "";
  }
  if (boolean) return lit + " for a " + t.name;
  std::istringstream in(lit);
  if (t.name == "int" || t.name == "SymInt") {
    int64_t v = 0;
    if (!(in >> v) || !in.eof()) return "'" + lit + "' is not an integer";
    *out = c10::IValue(v);
    return "";
  }
  if (t.name == "float") {
    double v = 0;
    if (!(in >> v) || !in.eof()) return "'" + lit + "' is not a number";
    *out = c10::IValue(v);
    return "";
  }
  return "a literal cannot feed a " + t.name;
}

}  // namespace

class OpKernel final : public Backend {
 public:
  struct Bound {
    std::string name;
    Source source;
    bool optional;          // the schema takes None (masks absent: None)
    c10::IValue constant;   // Source::Const
  };

  OpKernel(OpSpec spec, Op op, std::vector<Bound> args)
      : spec_(std::move(spec)), op_(std::move(op)), args_(std::move(args)) {}

  const OpSpec& spec() const { return spec_; }
  bool on_cuda() const override { return spec_.cuda; }
  bool packed() const override { return spec_.layout == TensorLayout::Packed; }
  bool returns_lse() const override { return spec_.lse.index >= 0; }
  std::string missing() const override { return ""; }  // checked when the kernel was built

  CallResult run_slice(const ProblemTensors& t, const SliceTensors& in, SliceOutputs* out) const override {
    const afz_problem& p = *t.p;
    auto lay = [&](const at::Tensor& x) {
      at::Tensor y = spec_.layout == TensorLayout::BSHD ? x.transpose(1, 2) : x;
      return spec_.contiguous ? y.contiguous() : y;
    };
    const bool mask_separate = mapped(Source::Mask);
    Tensors x{lay(in.q), lay(in.k), lay(in.v), {}, {}, {}, {}};
    // The additive bias holds the boolean mask too unless a separate
    // argument takes it.
    const at::Tensor& bool_for_bias = mask_separate ? at::Tensor() : in.bool_mask;
    for (const Bound& b : args_) {
      if (b.source != Source::Bias && b.source != Source::BiasF32) continue;
      const at::ScalarType dt = b.source == Source::Bias ? in.q.scalar_type() : at::kFloat;
      Bias bias = additive_bias(bool_for_bias, in.add_mask, p.heads_q, dt, /*key_pad=*/1);
      if (!bias.inexact.empty()) return CallResult::unsupported(op_.name() + ": " + bias.inexact);
      if (!bias.bias.defined() && !b.optional)
        bias.bias = at::zeros({in.q.size(0), p.heads_q, in.sq, in.sk}, in.q.options().dtype(dt));
      x.bias = bias.bias;
    }
    if (mask_separate) {
      if (in.bool_mask.defined())
        x.mask = in.bool_mask.expand({in.q.size(0), p.heads_q, in.sq, in.sk}).ne(0);
      else if (!bound(Source::Mask)->optional)
        x.mask = at::ones({in.q.size(0), p.heads_q, in.sq, in.sk}, in.q.options().dtype(at::kBool));
    }
    CallResult r = call(p, x, nullptr);
    if (r.status != CallResult::Ok) return r;
    at::Tensor o, lse;
    if (std::string e = tensor_output(r, size_t(spec_.out.index), "O", &o); !e.empty()) return failed(e);
    out->o = spec_.layout == TensorLayout::BSHD ? o.transpose(1, 2) : o;
    if (in.want_lse) {
      if (std::string e = tensor_output(r, size_t(spec_.lse.index), "LSE", &lse); !e.empty()) return failed(e);
      out->lse = spec_.lse.lse_layout == LseLayout::BSH ? lse.transpose(1, 2) : lse;
    }
    return r;
  }

  CallResult run_packed(const ProblemTensors& t, const PackedTensors& in, PackedOutputs* out) const override {
    Tensors x{in.q, in.k, in.v, {}, {}, in.cu_seqlens_q, in.cu_seqlens_k};
    if (spec_.contiguous) {
      x.q = x.q.contiguous();
      x.k = x.k.contiguous();
      x.v = x.v.contiguous();
    }
    CallResult r = call(*t.p, x, &in);
    if (r.status != CallResult::Ok) return r;
    if (std::string e = tensor_output(r, size_t(spec_.out.index), "O", &out->o); !e.empty()) return failed(e);
    if (in.want_lse) {
      if (std::string e = tensor_output(r, size_t(spec_.lse.index), "LSE", &out->lse); !e.empty()) return failed(e);
      out->lse_layout = spec_.lse.lse_layout == LseLayout::HS   ? PackedLse::HeadsByTokens
                        : spec_.lse.lse_layout == LseLayout::SH ? PackedLse::TokensByHeads
                                                                : PackedLse::BatchHeadsPadded;
    }
    return r;
  }

 private:
  struct Tensors {
    at::Tensor q, k, v, bias, mask, cu_q, cu_k;
  };

  bool mapped(Source s) const { return bound(s) != nullptr; }
  const Bound* bound(Source s) const {
    for (const Bound& b : args_)
      if (b.source == s) return &b;
    return nullptr;
  }
  CallResult failed(const std::string& why) const { return CallResult::failed(op_.name() + ": " + why); }

  CallResult call(const afz_problem& p, const Tensors& x, const PackedTensors* packed) const {
    // FlashAttention's convention for a window side: -1 is unbounded.
    const bool band = has_band_mask(p);
    const int64_t left = band && p.window_left >= 0 ? p.window_left : -1;
    const int64_t right = band && p.window_right >= 0 ? p.window_right : -1;
    auto tensor_or_none = [](const at::Tensor& t) { return t.defined() ? c10::IValue(t) : c10::IValue(); };
    std::vector<Arg> args;
    for (const Bound& b : args_) {
      c10::IValue v;
      switch (b.source) {
        case Source::Q: v = x.q; break;
        case Source::K: v = x.k; break;
        case Source::V: v = x.v; break;
        case Source::Scale: v = double(p.scale); break;
        case Source::Softcap: v = double(p.softcap); break;
        case Source::IsCausal: v = is_causal_band(p); break;
        case Source::WindowLeft: v = left; break;
        case Source::WindowRight: v = right; break;
        case Source::Bias: case Source::BiasF32: v = tensor_or_none(x.bias); break;
        case Source::Mask: v = tensor_or_none(x.mask); break;
        case Source::CuSeqlensQ: v = x.cu_q; break;
        case Source::CuSeqlensK: v = x.cu_k; break;
        case Source::MaxSeqlenQ: v = packed ? packed->max_q : int64_t(0); break;
        case Source::MaxSeqlenK: v = packed ? packed->max_k : int64_t(0); break;
        case Source::EnableGqa: v = p.heads_q != p.heads_kv; break;
        case Source::Const: v = b.constant; break;
      }
      args.push_back({b.name, v});
    }
    CallResult r = op_.call(args);
    if (r.status != CallResult::Ok) r.message = op_.name() + ": " + r.message;
    return r;
  }

  OpSpec spec_;
  Op op_;
  std::vector<Bound> args_;
};

namespace {

int op_supports(const afz_kernel* self, const afz_problem* p, char* reason, size_t len) {
  const auto& k = *static_cast<const OpKernel*>(self->user);
  if (std::string why = dtype_agreement(*p, k.spec().out_same); !why.empty()) {
    write_message(reason, len, why);
    return 1;
  }
  return 0;
}

int op_run(const afz_kernel* self, const afz_problem* p, char* error, size_t len) {
  return run_backend(*static_cast<const OpKernel*>(self->user), p, error, len);
}

std::string where(const std::string& file, int line) { return file + ":" + std::to_string(line) + ": "; }

std::unique_ptr<OpKernel> bind(const OpSpec& spec, std::string* error) {
  std::string why;
  const std::optional<Op> op = Op::find(spec.op, &why);
  if (!op) {
    *error = where(spec.file, spec.op_line) + why + " (a custom operator's library must be loaded first: 'library PATH')";
    return nullptr;
  }
  std::ostringstream schema;
  schema << op->schema();
  std::vector<OpKernel::Bound> bound;
  for (const ArgSpec& a : spec.args) {
    const c10::Argument* s = op->argument(a.name);
    if (!s) {
      *error = where(spec.file, a.line) + spec.op + " has no argument '" + a.name + "' (schema: " + schema.str() + ")";
      return nullptr;
    }
    const SchemaType st = schema_type(*s);
    OpKernel::Bound b{a.name, a.source, st.optional, c10::IValue()};
    if (a.source == Source::Const) {
      if (std::string e = literal_value(a.literal, st, &b.constant); !e.empty()) {
        *error = where(spec.file, a.line) + "argument '" + a.name + "' is " + s->type()->str() + ": " + e;
        return nullptr;
      }
    } else {
      const std::vector<std::string> ok = accepted_types(a.source);
      if (std::find(ok.begin(), ok.end(), st.name) == ok.end()) {
        *error = where(spec.file, a.line) + "argument '" + a.name + "' is " + s->type()->str() +
                 ", which this source cannot feed (it gives " + ok.front() + ")";
        return nullptr;
      }
    }
    bound.push_back(std::move(b));
  }
  for (const c10::Argument& s : op->schema().arguments()) {
    bool given = false;
    for (const ArgSpec& a : spec.args) given = given || a.name == s.name();
    if (!given && !s.default_value()) {
      *error = where(spec.file, spec.line) + "argument '" + s.name() + "' of " + spec.op +
               " has no default: map it with 'arg " + s.name() + " = ...' (schema: " + schema.str() + ")";
      return nullptr;
    }
  }
  const size_t returns = op->schema().returns().size();
  for (const ReturnSpec* r : {&spec.out, &spec.lse}) {
    if (r->index < 0) continue;
    if (size_t(r->index) >= returns) {
      *error = where(spec.file, r->line) + spec.op + " returns " + std::to_string(returns) + " value(s); index " +
               std::to_string(r->index) + " is out of range";
      return nullptr;
    }
    c10::TypePtr t = op->schema().returns()[size_t(r->index)].type();
    if (t->str() != "Tensor") {
      *error = where(spec.file, r->line) + spec.op + "'s return " + std::to_string(r->index) + " is " + t->str() +
               ", not a Tensor";
      return nullptr;
    }
  }
  return std::make_unique<OpKernel>(spec, *op, std::move(bound));
}

}  // namespace

OpKernelSet::OpKernelSet() = default;
OpKernelSet::OpKernelSet(OpKernelSet&&) noexcept = default;
OpKernelSet& OpKernelSet::operator=(OpKernelSet&&) noexcept = default;
OpKernelSet::~OpKernelSet() = default;

void OpKernelSet::absorb(OpKernelSet&& other) {
  for (std::unique_ptr<OpKernel>& b : other.backends) backends.push_back(std::move(b));
  kernels.insert(kernels.end(), other.kernels.begin(), other.kernels.end());
  other.backends.clear();
  other.kernels.clear();
}

bool build_op_kernels(const OpsFile& file, OpKernelSet* out, std::string* error) {
  for (size_t i = 0; i < file.libraries.size(); ++i) {
    // RTLD_GLOBAL: an operator library may need symbols of the ones before
    // it (libpython before a Python extension's _C.so, say).  Never closed:
    // the dispatcher keeps pointers into it.
    if (!dlopen(file.libraries[i].c_str(), RTLD_NOW | RTLD_GLOBAL)) {
      const char* e = dlerror();
      *error = where(file.file, file.library_lines[i]) + "cannot load library " + file.libraries[i] + ": " +
               first_line(e ? e : "unknown error");
      return false;
    }
  }
  for (const OpSpec& spec : file.kernels) {
    std::unique_ptr<OpKernel> k = bind(spec, error);
    if (!k) return false;
    out->backends.push_back(std::move(k));
  }
  for (const std::unique_ptr<OpKernel>& b : out->backends) {
    const OpSpec& s = b->spec();
    afz_kernel k{};
    k.name = s.name.c_str();
    k.description = s.description.c_str();
    k.caps = {s.flags | (s.cuda ? uint32_t(AFZ_CAP_GPU) : 0u), s.in_dtypes, s.out_dtypes, s.min_head_dim,
              s.max_head_dim, s.head_dim_multiple, s.max_seqlen};
    k.precision = s.precision;
    k.conventions = s.conventions;
    k.supports = &op_supports;
    k.run = &op_run;
    k.user = b.get();
    out->kernels.push_back(k);
  }
  return true;
}

}  // namespace afz::torchk
