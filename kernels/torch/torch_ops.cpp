#include "torch_ops.h"

#include <c10/util/Exception.h>
#include <torch/version.h>

#include <set>
#include <sstream>

#include "messages.h"

namespace afz::torchk {

std::string torch_version() { return TORCH_VERSION; }

namespace {

// Markers of a device fault in torch's error text: after one of these the
// CUDA context is unusable, so it is a crash, never a polite refusal.  The
// error classes differ between versions (c10::CUDAError, AcceleratorError),
// the message prefixes do not.
constexpr const char* kDeviceFaultMarkers[] = {
    "CUDA error", "CUDA driver error", "illegal memory access", "illegal address", "misaligned address",
    "device-side assert", "unspecified launch failure", "EXECUTION_FAILED",
};

// Errors that are no refusal either: a reshape inside the operator that
// does not fit its own intermediate tensors, or an internal assert, is the
// library failing on an input it accepted (FlashAttention-2's varlen GQA
// decode path with an empty sequence raises "shape '[3, 2, 4, 64]' is
// invalid for input of size 1024").
constexpr const char* kInternalErrorMarkers[] = {
    "is invalid for input of size", "INTERNAL ASSERT FAILED",
};

bool contains_any(const std::string& msg, const auto& markers) {
  for (const char* m : markers)
    if (msg.find(m) != std::string::npos) return true;
  return false;
}

}  // namespace

CallResult classify_exception(const std::exception& e) {
  if (const auto* oom = dynamic_cast<const c10::OutOfMemoryError*>(&e))
    return CallResult::unsupported("out of memory: " + first_line(oom->what_without_backtrace()));
  if (const auto* err = dynamic_cast<const c10::Error*>(&e)) {
    std::string msg = first_line(err->what_without_backtrace());
    if (msg.empty()) msg = "torch raised an error without a message";
    const bool failure = contains_any(msg, kDeviceFaultMarkers) || contains_any(msg, kInternalErrorMarkers);
    return failure ? CallResult::failed(msg) : CallResult::unsupported(msg);
  }
  return CallResult::failed(first_line(e.what()));
}

std::optional<Op> Op::find(const std::string& qualified_name, std::string* why) {
  // "ns::name.overload": operator names never hold a '.', overload names follow it.
  const size_t ns = qualified_name.find("::");
  if (ns == std::string::npos || ns == 0 || ns + 2 >= qualified_name.size()) {
    if (why) *why = "'" + qualified_name + "' is not an operator name of the form namespace::name[.overload]";
    return std::nullopt;
  }
  const size_t dot = qualified_name.find('.', ns + 2);
  const std::string base = qualified_name.substr(0, dot);
  const std::string overload = dot == std::string::npos ? "" : qualified_name.substr(dot + 1);
  auto handle = c10::Dispatcher::singleton().findSchema({base, overload});
  if (!handle) {
    if (why) *why = "torch " + torch_version() + " has no " + qualified_name;
    return std::nullopt;
  }
  return Op(*handle, qualified_name);
}

const c10::Argument* Op::argument(const std::string& name) const {
  for (const c10::Argument& a : schema().arguments())
    if (a.name() == name) return &a;
  return nullptr;
}

std::string Op::type_mismatch(const c10::Argument& arg, const c10::IValue& value) {
  c10::TypePtr type = arg.type();
  const bool optional = type->kind() == c10::TypeKind::OptionalType;
  if (optional) type = type->cast<c10::OptionalType>()->getElementType();
  const std::string want = type->str();
  auto refuse = [&](const std::string& got) {
    return "argument '" + arg.name() + "' is " + arg.type()->str() + ", not " + got;
  };
  if (value.isNone()) return optional ? "" : refuse("None");
  // By the type's name: the TypeKind enumerators differ between versions
  // (SymInt is a kind of its own in 2.x), the printed names do not.
  if (value.isTensor()) return want == "Tensor" ? "" : refuse("a tensor");
  if (value.isDouble()) return want == "float" ? "" : refuse("a float");
  if (value.isBool()) return want == "bool" ? "" : refuse("a bool");
  if (value.isInt()) return want == "int" || want == "SymInt" ? "" : refuse("an int");
  if (value.isString()) return want == "str" ? "" : refuse("a string");
  // bool[4] prints as "bool[]" or "bool[4]" depending on the version.
  if (value.isBoolList()) return want.rfind("bool[", 0) == 0 ? "" : refuse("a bool list");
  return refuse("a " + value.tagKind());
}

CallResult Op::call(const std::vector<Arg>& args) const {
  std::set<std::string> used;
  for (const Arg& a : args) {
    if (argument(a.name)) continue;
    if (a.required)
      return CallResult::unsupported("torch " + torch_version() + "'s " + name_ + " has no argument '" + a.name +
                                     "'");
  }
  torch::jit::Stack stack;
  for (const c10::Argument& s : schema().arguments()) {
    const Arg* given = nullptr;
    for (const Arg& a : args)
      if (a.name == s.name()) given = &a;
    if (given) {
      if (std::string why = type_mismatch(s, given->value); !why.empty())
        return CallResult::failed(name_ + ": " + why);
      stack.push_back(given->value);
    } else if (s.default_value()) {
      stack.push_back(*s.default_value());
    } else {
      return CallResult::failed(name_ + ": no value for argument '" + s.name() + "', which has no default");
    }
  }
  try {
    handle_.callBoxed(&stack);
  } catch (const std::exception& e) {
    return classify_exception(e);
  }
  CallResult r;
  r.outputs.assign(stack.begin(), stack.end());
  return r;
}

std::string describe(const c10::IValue& v) {
  std::ostringstream out;
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    if (!t.defined()) return "undefined tensor";
    out << "Tensor" << t.sizes() << ' ' << t.scalar_type();
  } else if (v.isNone()) {
    out << "None";
  } else {
    out << v;
  }
  return out.str();
}

std::string NamedOp::missing() const {
  std::string why;
  return Op::find(name, &why) ? "" : why;
}

CallResult NamedOp::call(const std::vector<Arg>& args) const {
  std::string why;
  const std::optional<Op> op = Op::find(name, &why);
  if (!op) return CallResult::unsupported(why);
  CallResult r = op->call(args);
  if (r.status != CallResult::Ok) r.message = std::string(name) + ": " + r.message;
  return r;
}

}  // namespace afz::torchk
