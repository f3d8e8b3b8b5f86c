// Text helpers shared by the case model (case.cpp) and the case text format
// (case_io.cpp): enum spellings, character classes, quoting input back in
// one-line messages.  Internal to those two files.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "harness/case/case.h"
#include "kernels/abi/dtype.h"

namespace afz::case_text {

// Input quoted back in a message is cut here, so an error stays one short line.
inline constexpr size_t kMaxQuoted = 40;
// Transform and parameter names: a short lowercase identifier.
inline constexpr size_t kMaxIdentifier = 64;

// How the format spells each enumerator.
template <typename E>
struct Spelling {
  E value;
  std::string_view name;
};
inline constexpr Spelling<Layout> kLayouts[] = {
    {Layout::BHSD, "bhsd"}, {Layout::BSHD, "bshd"}, {Layout::PackedQKV, "packed_qkv"}};
inline constexpr Spelling<KvBroadcast> kBroadcasts[] = {
    {KvBroadcast::None, "none"}, {KvBroadcast::Heads, "heads"}, {KvBroadcast::Batch, "batch"}};
inline constexpr Spelling<Pass> kPasses[] = {{Pass::Fwd, "fwd"}, {Pass::Bwd, "bwd"}, {Pass::Both, "both"}};
inline constexpr Spelling<Poison> kPoisons[] = {{Poison::NaN, "nan"}, {Poison::Inf, "inf"}, {Poison::None, "none"}};
inline constexpr Spelling<afz_align> kAligns[] = {
    {AFZ_ALIGN_TOP_LEFT, "top_left"}, {AFZ_ALIGN_BOTTOM_RIGHT, "bottom_right"}};
inline constexpr Spelling<AddValueKind> kAddValues[] = {
    {AddValueKind::NegInf, "-inf"}, {AddValueKind::Lowest, "lowest"}};
inline constexpr afz_dtype kValueDtypes[] = {AFZ_F32, AFZ_F16, AFZ_BF16, AFZ_F8E4M3};

template <typename E, size_t N>
std::optional<E> lookup(const Spelling<E> (&table)[N], std::string_view name) {
  for (const auto& s : table)
    if (s.name == name) return s.value;
  return std::nullopt;
}
template <typename E, size_t N>
std::string_view spell(const Spelling<E> (&table)[N], E value) {
  for (const auto& s : table)
    if (s.value == value) return s.name;
  return "?";  // only for cases that fail validate_case
}
template <typename E, size_t N>
std::string choices(const Spelling<E> (&table)[N]) {
  std::string out;
  for (const auto& s : table) out += (out.empty() ? "" : ", ") + std::string(s.name);
  return out;
}
template <typename E, size_t N>
bool known(const Spelling<E> (&table)[N], E value) {
  return spell(table, value) != "?";
}

// ------------------------------------------------------------- text bits --

inline bool is_blank_char(char ch) { return ch == ' ' || ch == '\t'; }
inline bool is_digit(char ch) { return ch >= '0' && ch <= '9'; }
inline bool is_hex_digit(char ch) { return is_digit(ch) || (ch >= 'a' && ch <= 'f') || (ch >= 'A' && ch <= 'F'); }
// Bytes a case file never holds: C0 controls but tab, and DEL.  A NUL or a
// stray CR usually means a binary or mangled file, and none of them could be
// written back inside a one-line value.
inline bool is_control(unsigned char ch) { return (ch < 0x20 && ch != '\t') || ch == 0x7f; }

inline std::string_view trim(std::string_view s) {
  while (!s.empty() && is_blank_char(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_blank_char(s.back())) s.remove_suffix(1);
  return s;
}

inline std::string hex_byte(unsigned char ch) {
  constexpr char kHex[] = "0123456789abcdef";
  return std::string("0x") + kHex[ch >> 4] + kHex[ch & 15];
}

// Input echoed in a message: printable ASCII as is, other bytes as \xNN, cut
// at kMaxQuoted characters.
inline std::string quote(std::string_view s) {
  std::string out;
  for (size_t n = 0; n < s.size(); ++n) {
    if (out.size() >= kMaxQuoted) return out + "...";
    const unsigned char ch = static_cast<unsigned char>(s[n]);
    if (ch >= 0x20 && ch < 0x7f) out += char(ch);
    else out += "\\x" + hex_byte(ch).substr(2);
  }
  return out;
}

inline bool is_identifier(std::string_view s) {
  if (s.empty() || s.size() > kMaxIdentifier) return false;
  if (!(s[0] >= 'a' && s[0] <= 'z') && s[0] != '_') return false;
  return std::all_of(s.begin(), s.end(), [](char ch) { return (ch >= 'a' && ch <= 'z') || is_digit(ch) || ch == '_'; });
}

inline std::string format_int(int64_t x) { return std::to_string(x); }

// Kernels take scale, softcap and the additive mask value in fp32: a double
// that rounds to fp32 infinity would turn every score into inf or NaN.
inline bool fp32_finite(double x) { return std::isfinite(x) && std::isfinite(round_to(AFZ_F32, x)); }

inline std::string in_range(std::string_view what, int64_t v, int64_t lo, int64_t hi) {
  if (v >= lo && v <= hi) return {};
  return std::string(what) + " must be in [" + format_int(lo) + ", " + format_int(hi) + "], got " + format_int(v);
}

}  // namespace afz::case_text
