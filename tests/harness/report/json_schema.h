// A validator for the subset of JSON Schema (draft 2020-12) that
// reports/schema/report.schema.json uses.  Keywords it does not implement
// make validation fail loudly instead of being skipped, so the schema can
// only say what is really checked.
#pragma once
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <string>
#include <vector>

namespace afz::testing {

class SchemaValidator {
 public:
  using Json = nlohmann::json;
  explicit SchemaValidator(Json schema) : root_(std::move(schema)) {}

  // Every violation as "path: what"; empty when the document is valid.
  std::vector<std::string> validate(const Json& doc) {
    problems_.clear();
    check(root_, doc, "$");
    return problems_;
  }

 private:
  void fail(const std::string& path, const std::string& what) { problems_.push_back(path + ": " + what); }

  static bool is_type(const Json& v, const std::string& type) {
    if (type == "object") return v.is_object();
    if (type == "array") return v.is_array();
    if (type == "string") return v.is_string();
    if (type == "boolean") return v.is_boolean();
    if (type == "null") return v.is_null();
    if (type == "number") return v.is_number();
    // JSON Schema: 1.0 is an integer too.
    if (type == "integer") return v.is_number_integer() || (v.is_number_float() && v.get<double>() == double(int64_t(v.get<double>())));
    return false;
  }

  const Json& resolve(const std::string& ref) {
    static const std::string prefix = "#/$defs/";
    if (ref.rfind(prefix, 0) != 0 || !root_["$defs"].contains(ref.substr(prefix.size()))) {
      static const Json nothing = Json{{"not-a-keyword", true}};
      return nothing;
    }
    return root_["$defs"][ref.substr(prefix.size())];
  }

  // True when v is valid; problems go to problems_ only when `record`.
  bool matches(const Json& schema, const Json& v, const std::string& path) {
    const size_t before = problems_.size();
    check(schema, v, path);
    const bool ok = problems_.size() == before;
    problems_.resize(before);
    return ok;
  }

  void check(const Json& schema, const Json& v, const std::string& path) {
    static const std::set<std::string> annotations = {"$schema", "$id", "title", "description"};
    if (!schema.is_object()) return fail(path, "schema is not an object");
    for (auto it = schema.begin(); it != schema.end(); ++it) {
      const std::string& key = it.key();
      const Json& s = it.value();
      if (annotations.count(key) || key == "$defs" || key == "then") continue;
      if (key == "$ref") {
        check(resolve(s.get<std::string>()), v, path);
      } else if (key == "type") {
        bool ok = false;
        if (s.is_string()) ok = is_type(v, s.get<std::string>());
        else
          for (const Json& t : s) ok |= is_type(v, t.get<std::string>());
        if (!ok) fail(path, "expected type " + s.dump() + ", got " + v.dump().substr(0, 60));
      } else if (key == "const") {
        if (v != s) fail(path, "expected " + s.dump());
      } else if (key == "enum") {
        bool ok = false;
        for (const Json& e : s) ok |= v == e;
        if (!ok) fail(path, v.dump().substr(0, 60) + " is not one of " + s.dump());
      } else if (key == "required") {
        if (v.is_object())
          for (const Json& k : s)
            if (!v.contains(k.get<std::string>())) fail(path, "missing required key '" + k.get<std::string>() + "'");
      } else if (key == "properties") {
        if (v.is_object())
          for (auto p = s.begin(); p != s.end(); ++p)
            if (v.contains(p.key())) check(p.value(), v[p.key()], path + "." + p.key());
      } else if (key == "additionalProperties") {
        if (!v.is_object()) continue;
        const Json props = schema.value("properties", Json::object());
        for (auto p = v.begin(); p != v.end(); ++p) {
          if (props.contains(p.key())) continue;
          if (s.is_boolean()) {
            if (!s.get<bool>()) fail(path, "unexpected key '" + p.key() + "'");
          } else {
            check(s, p.value(), path + "." + p.key());
          }
        }
      } else if (key == "propertyNames") {
        if (v.is_object())
          for (auto p = v.begin(); p != v.end(); ++p) check(s, Json(p.key()), path + "{" + p.key() + "}");
      } else if (key == "items") {
        if (!v.is_array()) continue;
        const size_t first = schema.contains("prefixItems") ? schema["prefixItems"].size() : 0;
        for (size_t i = first; i < v.size(); ++i) check(s, v[i], path + "[" + std::to_string(i) + "]");
      } else if (key == "prefixItems") {
        if (v.is_array())
          for (size_t i = 0; i < s.size() && i < v.size(); ++i) check(s[i], v[i], path + "[" + std::to_string(i) + "]");
      } else if (key == "minItems") {
        if (v.is_array() && v.size() < s.get<size_t>()) fail(path, "fewer than " + s.dump() + " items");
      } else if (key == "maxItems") {
        if (v.is_array() && v.size() > s.get<size_t>()) fail(path, "more than " + s.dump() + " items");
      } else if (key == "minimum") {
        if (v.is_number() && v.get<double>() < s.get<double>()) fail(path, v.dump() + " < minimum " + s.dump());
      } else if (key == "minLength") {
        if (v.is_string() && v.get<std::string>().size() < s.get<size_t>()) fail(path, "shorter than " + s.dump());
      } else if (key == "pattern") {
        if (v.is_string() && !std::regex_search(v.get<std::string>(), std::regex(s.get<std::string>())))
          fail(path, v.dump() + " does not match " + s.dump());
      } else if (key == "anyOf") {
        bool ok = false;
        for (const Json& alt : s) ok |= matches(alt, v, path);
        if (!ok) fail(path, v.dump().substr(0, 60) + " matches none of anyOf");
      } else if (key == "if") {
        if (matches(s, v, path) && schema.contains("then")) check(schema["then"], v, path);
      } else {
        fail(path, "schema keyword '" + key + "' is not implemented by this validator");
      }
    }
  }

  Json root_;
  std::vector<std::string> problems_;
};

}  // namespace afz::testing
