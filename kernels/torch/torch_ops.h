// Calling torch operators through the dispatcher, by schema name.
//
// The plugin must build against libtorch 1.13 (Debian 12) and PyTorch 2.x
// alike, and the private attention operators changed their C++ declarations
// (and even their arguments) between versions.  Looking an operator up by its
// schema name and filling its boxed stack argument by argument NAME keeps one
// source for every version: an operator the installed torch lacks, or an
// argument its schema does not have, becomes a one-line reason at run time
// ("torch 1.13.0 has no aten::_scaled_dot_product_flash_attention") instead
// of a compile error.
#pragma once
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/ivalue.h>

#include <exception>
#include <optional>
#include <string>
#include <vector>

namespace afz::torchk {

// The libtorch version these adapters were compiled against ("2.11.0").
std::string torch_version();

// One argument, by its name in the operator's schema.
struct Arg {
  std::string name;
  c10::IValue value;
  // false: the argument only restates the schema's default behaviour (no
  // bias, enable_gqa=false, ...), so an older schema without it is fine.
  bool required = true;
};

// What came of a call.  Unsupported: the library refused the configuration
// (an `unsupported` verdict, never a failure); Failed: anything else.
struct CallResult {
  enum Status { Ok, Unsupported, Failed };
  Status status = Ok;
  std::string message;                // one line when not Ok
  std::vector<c10::IValue> outputs;   // the schema's returns, in order

  static CallResult unsupported(std::string why) { return {Unsupported, std::move(why), {}}; }
  static CallResult failed(std::string why) { return {Failed, std::move(why), {}}; }
};

// Sorts an exception thrown by torch: a c10::Error about shapes, dtypes or
// head dims is the library declining (Unsupported, first line of torch's
// message); a CUDA fault, an internal assert or a reshape that does not fit
// the operator's own intermediates, or anything else, is a failure.
CallResult classify_exception(const std::exception& e);

class Op {
 public:
  // "ns::name" or "ns::name.overload".  nullopt, and why, when the installed
  // torch has no such operator.
  static std::optional<Op> find(const std::string& qualified_name, std::string* why);

  const std::string& name() const { return name_; }
  const c10::FunctionSchema& schema() const { return handle_.schema(); }
  // The schema's argument of that name, or null.
  const c10::Argument* argument(const std::string& name) const;
  // "" when value can be passed as `arg` (Tensor, float, int/SymInt, bool,
  // str, None for optionals), else why not.
  static std::string type_mismatch(const c10::Argument& arg, const c10::IValue& value);

  // Builds the stack in schema order: the given arguments by name, schema
  // defaults for the rest.  Never throws: torch's exceptions are classified.
  CallResult call(const std::vector<Arg>& args) const;

 private:
  Op(c10::OperatorHandle handle, std::string name) : handle_(std::move(handle)), name_(std::move(name)) {}
  c10::OperatorHandle handle_;
  std::string name_;
};

// An operator the adapters call by name: looked up per call (the
// dispatcher's table is cheap to ask), every message prefixed with the name.
struct NamedOp {
  const char* name;
  // "" when the installed torch has it, else why not.
  std::string missing() const;
  CallResult call(const std::vector<Arg>& args) const;
  CallResult refuse(const std::string& why) const { return CallResult::unsupported(std::string(name) + ": " + why); }
  CallResult bad_output(const std::string& why) const { return CallResult::failed(std::string(name) + ": " + why); }
};

// A short rendering of an IValue for messages ("Tensor[2, 4, 64, 64] BFloat16", "0.125").
std::string describe(const c10::IValue& v);

}  // namespace afz::torchk
