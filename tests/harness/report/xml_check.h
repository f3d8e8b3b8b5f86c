// A strict XML 1.0 well-formedness reader for the report tests: elements
// nest and close in order, attribute values are quoted and unique per
// element, every '&' starts a known entity or a character reference, no
// raw '<' in text or attributes, no control characters XML forbids.  It
// builds a small tree so tests can also check junit.xml's structure.
#pragma once
#include <cctype>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace afz::testing {

struct XmlElement {
  std::string name;
  std::map<std::string, std::string> attributes;  // values with entities decoded
  std::vector<std::unique_ptr<XmlElement>> children;
  std::string text;                               // decoded character data, concatenated

  std::vector<const XmlElement*> all(const std::string& child) const {
    std::vector<const XmlElement*> out;
    for (const auto& c : children)
      if (c->name == child) out.push_back(c.get());
    return out;
  }
};

class XmlReader {
 public:
  // The root element, or nullopt with *error saying where and why.
  static std::unique_ptr<XmlElement> parse(const std::string& s, std::string* error) {
    XmlReader r(s);
    auto root = r.document();
    if (!root) *error = r.error_ + " at byte " + std::to_string(r.pos_);
    return root;
  }

 private:
  explicit XmlReader(const std::string& s) : s_(s) {}

  bool fail(const std::string& why) {
    if (error_.empty()) error_ = why;
    return false;
  }
  bool starts(const char* p) const { return s_.compare(pos_, std::char_traits<char>::length(p), p) == 0; }
  void spaces() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  static bool name_char(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.' || c == ':' ||
           static_cast<unsigned char>(c) >= 0x80;
  }
  bool name(std::string& out) {
    const size_t start = pos_;
    if (pos_ >= s_.size() || !(std::isalpha(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_' || s_[pos_] == ':'))
      return fail("expected a name");
    while (pos_ < s_.size() && name_char(s_[pos_])) ++pos_;
    out = s_.substr(start, pos_ - start);
    return true;
  }
  bool allowed(unsigned char c) { return c >= 0x20 || c == '\n' || c == '\t' || c == '\r'; }

  // Character data up to `stop`, entities decoded.
  bool chars(char stop, std::string& out) {
    while (pos_ < s_.size() && s_[pos_] != stop) {
      const char c = s_[pos_];
      if (c == '<') return stop == '<' ? true : fail("raw '<' in an attribute value");
      if (!allowed(static_cast<unsigned char>(c))) return fail("control character in text");
      if (c != '&') {
        out += c;
        ++pos_;
        continue;
      }
      const size_t semi = s_.find(';', pos_);
      if (semi == std::string::npos || semi - pos_ > 10) return fail("'&' without an entity");
      const std::string ent = s_.substr(pos_ + 1, semi - pos_ - 1);
      static const std::map<std::string, char> named = {{"amp", '&'}, {"lt", '<'}, {"gt", '>'}, {"quot", '"'}, {"apos", '\''}};
      if (auto it = named.find(ent); it != named.end()) {
        out += it->second;
      } else if (ent.size() > 1 && ent[0] == '#') {
        const bool hex = ent[1] == 'x';
        const std::string digits = ent.substr(hex ? 2 : 1);
        if (digits.empty()) return fail("empty character reference");
        for (char d : digits)
          if (!(hex ? std::isxdigit(static_cast<unsigned char>(d)) : std::isdigit(static_cast<unsigned char>(d))))
            return fail("bad character reference &" + ent + ";");
        const unsigned long code = std::stoul(digits, nullptr, hex ? 16 : 10);
        if (code < 0x80 && !allowed(static_cast<unsigned char>(code))) return fail("reference to a forbidden character");
        out += code < 0x80 ? char(code) : '?';
      } else {
        return fail("unknown entity &" + ent + ";");
      }
      pos_ = semi + 1;
    }
    return true;
  }

  bool skip_until(const char* end) {
    const size_t at = s_.find(end, pos_);
    if (at == std::string::npos) return fail(std::string("unterminated, expected ") + end);
    pos_ = at + std::char_traits<char>::length(end);
    return true;
  }

  std::unique_ptr<XmlElement> document() {
    if (starts("<?xml")) {
      if (!skip_until("?>")) return nullptr;
    }
    spaces();
    while (starts("<!--")) {
      if (!skip_until("-->")) return nullptr;
      spaces();
    }
    auto root = element();
    if (!root) return nullptr;
    spaces();
    if (pos_ != s_.size()) {
      fail("content after the root element");
      return nullptr;
    }
    return root;
  }

  std::unique_ptr<XmlElement> element() {
    if (pos_ >= s_.size() || s_[pos_] != '<') {
      fail("expected '<'");
      return nullptr;
    }
    ++pos_;
    auto e = std::make_unique<XmlElement>();
    if (!name(e->name)) return nullptr;
    for (;;) {
      spaces();
      if (starts("/>")) {
        pos_ += 2;
        return e;
      }
      if (starts(">")) {
        ++pos_;
        break;
      }
      std::string key, value;
      if (!name(key)) return nullptr;
      spaces();
      if (pos_ >= s_.size() || s_[pos_] != '=') {
        fail("attribute without '='");
        return nullptr;
      }
      ++pos_;
      spaces();
      if (pos_ >= s_.size() || (s_[pos_] != '"' && s_[pos_] != '\'')) {
        fail("unquoted attribute value");
        return nullptr;
      }
      const char quote = s_[pos_++];
      if (!chars(quote, value)) return nullptr;
      if (pos_ >= s_.size()) {
        fail("unterminated attribute value");
        return nullptr;
      }
      ++pos_;
      if (!e->attributes.emplace(key, value).second) {
        fail("duplicate attribute " + key);
        return nullptr;
      }
    }
    for (;;) {
      if (!chars('<', e->text)) return nullptr;
      if (pos_ >= s_.size()) {
        fail("unclosed element <" + e->name + ">");
        return nullptr;
      }
      if (starts("</")) {
        pos_ += 2;
        std::string closing;
        if (!name(closing)) return nullptr;
        if (closing != e->name) {
          fail("</" + closing + "> closes <" + e->name + ">");
          return nullptr;
        }
        spaces();
        if (!starts(">")) {
          fail("malformed end tag");
          return nullptr;
        }
        ++pos_;
        return e;
      }
      if (starts("<!--")) {
        if (!skip_until("-->")) return nullptr;
        continue;
      }
      if (starts("<![CDATA[")) {
        const size_t start = pos_ + 9;
        if (!skip_until("]]>")) return nullptr;
        e->text += s_.substr(start, pos_ - 3 - start);
        continue;
      }
      auto child = element();
      if (!child) return nullptr;
      e->children.push_back(std::move(child));
    }
  }

  const std::string& s_;
  size_t pos_ = 0;
  std::string error_;
};

}  // namespace afz::testing
