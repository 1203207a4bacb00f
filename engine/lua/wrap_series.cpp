// engine/lua/wrap_series.cpp — numeric primitives over long series for scripts/neusight/parallel: a pipeline
// schedule's ops compiled into its program (schedule.lua shape_of's turns) and the program walked with per-stage
// seconds (schedule.lua walk), a device's ops folded into sums and
// its gradient buckets queued through its data-parallel link (timeline.lua). A deep pipeline has 10⁵ ops per layout and a search forecasts thousands of layouts: the scripts
// say what to compute (the program, which per-stage values go into which sum), these run the loops.
//
// Numbers keep Lua's semantics bit for bit: an integer stays an integer while only integers meet (wrapping), an
// integer meeting a float becomes that float ((double) i), comparisons between the two are exact — so a result is the
// one the same loop written in Lua gives, value and subtype.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "lua/wrap.h"

namespace ns {

namespace {

constexpr const char* ints_meta = "neusight.int64s";

// A Lua number as the loops need it: nil (absent: an error once used), an integer or a float.
struct lnum {
  enum : uint8_t { nil, integer, number } type = nil;
  lua_Integer i = 0;
  double f = 0;
};

inline double as_float(const lnum& a) { return a.type == lnum::integer ? double(a.i) : a.f; }

[[noreturn]] void nil_arith(lua_State* L, const char* what) {
  luaL_error(L, "attempt to perform arithmetic on a nil value (%s)", what);
  std::abort();  // not reached: luaL_error does not return
}

inline lnum add(const lnum& a, const lnum& b) {
  lnum r;
  if (a.type == lnum::integer && b.type == lnum::integer) {
    r.type = lnum::integer, r.i = lua_Integer(lua_Unsigned(a.i) + lua_Unsigned(b.i));
  } else {
    r.type = lnum::number, r.f = as_float(a) + as_float(b);
  }
  return r;
}
inline lnum sub(const lnum& a, const lnum& b) {
  lnum r;
  if (a.type == lnum::integer && b.type == lnum::integer) {
    r.type = lnum::integer, r.i = lua_Integer(lua_Unsigned(a.i) - lua_Unsigned(b.i));
  } else {
    r.type = lnum::number, r.f = as_float(a) - as_float(b);
  }
  return r;
}
// a < b as Lua compares numbers: exact between an integer and a float (long double holds every int64 and double).
inline bool less(const lnum& a, const lnum& b) {
  if (a.type == lnum::integer && b.type == lnum::integer) return a.i < b.i;
  if (a.type == lnum::number && b.type == lnum::number) return a.f < b.f;
  const long double x = a.type == lnum::integer ? (long double)a.i : (long double)a.f;
  const long double y = b.type == lnum::integer ? (long double)b.i : (long double)b.f;
  return x < y;
}

// The loops below in the number type N: double where every value they meet gives the same bits so (their callers
// check), lnum otherwise.
template <class N>
struct arith;
template <>
struct arith<double> {
  static double of(const lnum& a) { return as_float(a); }
  static bool lt(double a, double b) { return a < b; }
  static double plus(double a, double b) { return a + b; }
};
template <>
struct arith<lnum> {
  static lnum of(const lnum& a) { return a; }
  static bool lt(const lnum& a, const lnum& b) { return less(a, b); }
  static lnum plus(const lnum& a, const lnum& b) { return add(a, b); }
};

void lnum_push(lua_State* L, const lnum& a) {
  if (a.type == lnum::integer) lua_pushinteger(L, a.i);
  else if (a.type == lnum::number) lua_pushnumber(L, a.f);
  else lua_pushnil(L);
}

// The value at `idx` as a number: nil stays nil (an error where it is used), any other non-number is an error now.
lnum lnum_at(lua_State* L, int idx, const char* what) {
  lnum r;
  switch (lua_type(L, idx)) {
    case LUA_TNIL: break;
    case LUA_TNUMBER:
      if (lua_isinteger(L, idx)) r.type = lnum::integer, r.i = lua_tointeger(L, idx);
      else r.type = lnum::number, r.f = lua_tonumber(L, idx);
      break;
    default: luaL_error(L, "%s: expected numbers, got a %s", what, luaL_typename(L, idx));
  }
  return r;
}

// t[1..n] of the array at `idx` (absent entries nil).
// A count no series of these loops comes near (2^24 values: a pipeline's stages, a device's bucket runs); beyond it
// a count must be the table's own length, so that a stray count is an error here, not a huge allocation.
constexpr lua_Integer max_count = lua_Integer(1) << 24;
// What a series read from a table reserves at first (it grows as read beyond): a count is checked entry by entry, so
// a huge one allocates no more than the entries read before a wrong one.
constexpr lua_Integer reserve_max = 4096;

std::vector<lnum> lnums_at(lua_State* L, int idx, lua_Integer n, const char* what) {
  luaL_checktype(L, idx, LUA_TTABLE);
  if (n > max_count && n > lua_Integer(lua_rawlen(L, idx)))
    luaL_error(L, "%s: %I values asked of a table of %I", what, n, lua_Integer(lua_rawlen(L, idx)));
  // grown as read, not sized by `n` first: a wrong entry is an error before n values (up to 2^24 × 24 B, outside the
  // script's memory cap) are allocated
  std::vector<lnum> out(1);
  out.reserve(size_t(std::clamp<lua_Integer>(n, 0, reserve_max)) + 1);
  for (lua_Integer k = 1; k <= n; ++k) {
    lua_rawgeti(L, idx, k);
    out.push_back(lnum_at(L, -1, what));
    lua_pop(L, 1);
  }
  return out;
}

// An integer series: a packed one (C.pack_integers) or an array of integers, its first `n`.
struct int_series {
  const int64_t* data = nullptr;
  std::vector<int64_t> own;
};
int_series ints_at(lua_State* L, int idx, lua_Integer n, const char* what) {
  int_series s;
  if (void* p = luaL_testudata(L, idx, ints_meta)) {
    if (lua_Integer(lua_rawlen(L, idx) / sizeof(int64_t)) < n)
      luaL_error(L, "%s: a series of fewer than %I values", what, n);
    s.data = static_cast<const int64_t*>(p);
    return s;
  }
  luaL_checktype(L, idx, LUA_TTABLE);
  // grown entry by entry, not sized by `n` first: a count beyond the table's entries stops at the first missing one
  // (an error naming it) instead of allocating n values (2^61 threw std::length_error past the script's memory cap)
  for (lua_Integer k = 1; k <= n; ++k) {
    lua_rawgeti(L, idx, k);
    int ok = 0;
    const lua_Integer v = lua_tointegerx(L, -1, &ok);
    if (!ok || lua_type(L, -1) != LUA_TNUMBER) luaL_error(L, "%s: entry %I is not an integer", what, k);
    s.own.push_back(v);
    lua_pop(L, 1);
  }
  s.data = s.own.data();
  return s;
}

// pack_integers(t, n) -> series: t[1..n] (integers) packed for the primitives below (read-only, opaque).
// [-2, +1, e]
int pack_integers_body(lua_State* L) {
  const lua_Integer n = luaL_checkinteger(L, 2);
  if (n < 0) luaL_error(L, "pack_integers: a negative count");
  const int_series s = ints_at(L, 1, n, "pack_integers");
  void* p = lua_newuserdatauv(L, size_t(n) * sizeof(int64_t), 0);
  if (n > 0) std::memcpy(p, s.data, size_t(n) * sizeof(int64_t));
  luaL_setmetatable(L, ints_meta);
  return 1;
}

// The walk of schedule.lua's program, in the number type N (double: every stage's seconds a float >= 0; lnum: any).
// done[k] = max(done[prev], done[dep]) + seconds of op k's stage (the max: the first unless it is less); last_bw[c] =
// the latest start of virtual stage c's backward ops, the first of equal ones; starts[k] when asked for.
template <class N>
void walk(lua_State* L, const int64_t* program, lua_Integer total, const std::vector<lnum>& fw,
          const std::vector<lnum>& bw, std::vector<N>& done, std::vector<N>& last_bw, std::vector<bool>& has_bw,
          std::vector<bool>& last_bw_int0, std::vector<N>* starts) {
  using W = arith<N>;
  const size_t V = fw.size() - 1;
  std::vector<N> dfw(V + 1), dbw(V + 1);
  std::vector<bool> fw_nil(V + 1), bw_nil(V + 1);
  for (size_t c = 1; c <= V; ++c) {
    dfw[c] = W::of(fw[c]), dbw[c] = W::of(bw[c]);
    fw_nil[c] = fw[c].type == lnum::nil, bw_nil[c] = bw[c].type == lnum::nil;
  }
  done.assign(size_t(total) + 1, N{});
  lnum zero;
  zero.type = lnum::integer;
  done[0] = W::of(zero);
  last_bw.assign(V + 1, N{});
  has_bw.assign(V + 1, false);
  last_bw_int0.assign(V + 1, false);  // in doubles: the start kept is done[0], the integer 0
  if (starts) starts->assign(size_t(total) + 1, N{});
  for (lua_Integer k = 1; k <= total; ++k) {
    const int64_t x = program[k - 1];
    const uint64_t prev = uint64_t(x) >> 40, dep = (uint64_t(x) >> 16) & 0xFFFFFF;
    if (prev >= uint64_t(k) || dep >= uint64_t(k)) luaL_error(L, "walk: op %d waits for a later op", int(k));
    const N& a = done[prev];
    const N& b = done[dep];
    const bool later = W::lt(a, b);
    const N start = later ? b : a;
    const int64_t c = (x & 0xFFFF) - 0x8000;
    if (c > 0) {
      if (size_t(c) > V) luaL_error(L, "walk: op %d of stage %d beyond the %d stages", int(k), int(c), int(V));
      if (fw_nil[c]) nil_arith(L, "a stage's forward seconds");
      done[k] = W::plus(start, dfw[c]);
    } else {
      const size_t s = size_t(-c);
      if (s == 0 || s > V) luaL_error(L, "walk: op %d of stage %d beyond the %d stages", int(k), int(-c), int(V));
      if (bw_nil[s]) nil_arith(L, "a stage's backward seconds");
      done[k] = W::plus(start, dbw[s]);
      if (!has_bw[s] || W::lt(last_bw[s], start))
        last_bw[s] = start, has_bw[s] = true, last_bw_int0[s] = later ? dep == 0 : prev == 0;
    }
    if (starts) (*starts)[size_t(k)] = start;
  }
}

void push_num(lua_State* L, double v) { lua_pushnumber(L, v); }
void push_num(lua_State* L, const lnum& v) { lnum_push(L, v); }

template <class N>
int walk_push(lua_State* L, const int64_t* program, lua_Integer total, const std::vector<lnum>& fw,
              const std::vector<lnum>& bw, bool all) {
  std::vector<N> done, last_bw, starts;
  std::vector<bool> has_bw, last_bw_int0;
  walk<N>(L, program, total, fw, bw, done, last_bw, has_bw, last_bw_int0, all ? &starts : nullptr);
  // finishes[d] = done[last[d]]
  const lua_Integer P = lua_Integer(lua_rawlen(L, 6));
  lua_createtable(L, int(P), 0);
  for (lua_Integer d = 1; d <= P; ++d) {
    lua_rawgeti(L, 6, d);
    int ok = 0;
    const lua_Integer at = lua_tointegerx(L, -1, &ok);
    lua_pop(L, 1);
    if (!ok || at < 0 || at > total) luaL_error(L, "walk: last[%d] is not an op position", int(d));
    if (at == 0) lua_pushinteger(L, 0);  // done[0]: the integer 0
    else push_num(L, done[size_t(at)]);
    lua_rawseti(L, -2, d);
  }
  lua_createtable(L, 0, 0);
  for (size_t c = 1; c < last_bw.size(); ++c)
    if (has_bw[c]) {
      if (std::is_same_v<N, double> && last_bw_int0[c]) lua_pushinteger(L, 0);  // a double walk's done[0]
      else push_num(L, last_bw[c]);
      lua_rawseti(L, -2, lua_Integer(c));
    }
  if (!all) return 2;
  lua_createtable(L, int(total), 1);
  lua_pushinteger(L, 0), lua_rawseti(L, -2, 0);
  for (lua_Integer k = 1; k <= total; ++k) push_num(L, done[size_t(k)]), lua_rawseti(L, -2, k);
  lua_createtable(L, int(total), 0);
  for (lua_Integer k = 1; k <= total; ++k) push_num(L, starts[size_t(k)]), lua_rawseti(L, -2, k);
  return 4;
}

// walk(program, total, dur_fw, dur_bw, V, last, all) -> finishes, last_bw[, done, starts]: see schedule.lua. [-7, +2|4, e]
int walk_body(lua_State* L) {
  const lua_Integer total = luaL_checkinteger(L, 2);
  const lua_Integer V = luaL_checkinteger(L, 5);
  luaL_checktype(L, 6, LUA_TTABLE);
  const bool all = lua_toboolean(L, 7);
  if (total < 0 || V < 0) luaL_error(L, "walk: negative counts");
  const int_series program = ints_at(L, 1, total, "walk: program");
  const std::vector<lnum> fw = lnums_at(L, 3, V, "walk: forward seconds");
  const std::vector<lnum> bw = lnums_at(L, 4, V, "walk: backward seconds");
  bool plain = !all;
  for (lua_Integer c = 1; c <= V && plain; ++c)
    plain = fw[size_t(c)].type == lnum::number && fw[size_t(c)].f >= 0 && bw[size_t(c)].type == lnum::number &&
            bw[size_t(c)].f >= 0;
  lua_settop(L, 7);
  if (plain) return walk_push<double>(L, program.data, total, fw, bw, false);
  return walk_push<lnum>(L, program.data, total, fw, bw, all);
}

// fold(series, counts, fw_terms, bw_terms, watch) -> { { sum_1, …, sum_J, peak }, … }: per device d, its ops
// series[d][1..counts[d]] (codes) folded in order into sums that start at the integer 0. An op with code k > 0 applies
// fw_terms, one with k < 0 bw_terms (at −k): each term { j, values, sign } adds values[k] to sum j (sign -1:
// subtracts), in the list's order. `peak`: the largest value sum `watch` took after an op (`if s > peak then peak = s
// end`, from the integer 0). J: the largest j of the terms. [-5, +1, e]
struct term {
  size_t j = 0;
  bool minus = false;
  std::vector<lnum> values;
};

std::vector<term> terms_at(lua_State* L, int idx, size_t& J, const char* what) {
  luaL_checktype(L, idx, LUA_TTABLE);
  std::vector<term> out;
  const lua_Integer n = lua_Integer(lua_rawlen(L, idx));
  for (lua_Integer i = 1; i <= n; ++i) {
    lua_rawgeti(L, idx, i);  // stack: … t
    if (!lua_istable(L, -1)) luaL_error(L, "fold: %s[%d] must be a table { sum, values[, -1] }", what, int(i));
    term t;
    lua_rawgeti(L, -1, 1);
    const lua_Integer j = lua_tointeger(L, -1);
    lua_pop(L, 1);
    if (j < 1 || j > (1 << 16))
      luaL_error(L, "fold: %s[%d]: the sum's index must be an integer of 1 to 65536", what, int(i));
    t.j = size_t(j);
    lua_rawgeti(L, -1, 3);  // the sign: nil (adds) or -1 (subtracts); anything else is a mistake, not an add
    if (!lua_isnil(L, -1) && !(lua_isinteger(L, -1) && lua_tointeger(L, -1) == -1))
      luaL_error(L, "fold: %s[%d]: the sign (third entry) must be nil or the integer -1", what, int(i));
    t.minus = !lua_isnil(L, -1);
    lua_pop(L, 1);
    lua_rawgeti(L, -1, 2);  // stack: … t values
    const lua_Integer len = lua_Integer(lua_rawlen(L, -1));
    t.values = lnums_at(L, lua_gettop(L), len, "fold: values");
    lua_pop(L, 2);
    if (t.j > J) J = t.j;
    out.push_back(std::move(t));
  }
  return out;
}

// A sum whose values are floats, or integers that are 0, is the same bits folded as doubles from 0.0: it stays the
// integer 0 until its first float (where 0 + x is 0.0 + x) and a float plus or minus the integer 0 is x ± 0.0. Such a
// sum runs in doubles (`floated`: it met a float, else it is still the integer 0); any other, as Lua numbers.
// Such sums' terms of one direction (fw or bw), T of them, as a matrix: row k holds each term's values[k] (as a
// double, negated for a term that subtracts: s - x is s + (-x), the same bits in IEEE arithmetic, signed zeros
// included; and whether it was a float, is_float), in the terms' order; rows: the codes every term has a value for.
// all_float[k]: every value of row k is a float (an op of that row makes each of the direction's sums a float:
// `any_float`). A row keeps only its values that are not zeros (nz[k] of them, at k·T in nz_j, the sum each adds to,
// and nz_values, in the terms' order): a double sum starts at +0.0 and x + y is −0.0 only where both are −0.0, so it is
// never −0.0, and s + (±0.0) is s, bit for bit (infinities and NaNs too); whether a zero made its sum a float is still
// told (is_float, all_float). (A timeline's expert all-to-all terms are zeros for a dense model, a last stage's send.)
struct fast_terms {
  size_t T = 0, rows = 0;
  std::vector<size_t> j;
  std::vector<uint8_t> is_float, all_float;
  std::vector<uint32_t> nz;
  std::vector<size_t> nz_j;
  std::vector<double> nz_values;
  bool any_float = false;   // an op of an all-float row ran (per device)
  bool has_watch = false;   // one of the terms adds to the watched sum
};

int fold_body(lua_State* L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  luaL_checktype(L, 2, LUA_TTABLE);
  size_t J = 0;
  const std::vector<term> fw = terms_at(L, 3, J, "fw_terms");
  const std::vector<term> bw = terms_at(L, 4, J, "bw_terms");
  const lua_Integer watch = luaL_optinteger(L, 5, 0);
  if (watch != 0 && (watch < 1 || size_t(watch) > J))  // a peak of a sum no term adds to would be the integer 0
    luaL_error(L, "fold: watch must be 0 (none) or the index of a sum the terms name (1 to %d)", int(J));
  const size_t w = watch >= 1 ? size_t(watch) : 0;
  // which sums run in doubles
  std::vector<uint8_t> fast(J + 1, 1);
  for (const auto* ts : {&fw, &bw})
    for (const term& t : *ts)
      for (size_t k = 1; k < t.values.size(); ++k) {
        const lnum& x = t.values[k];
        if (x.type == lnum::nil || (x.type == lnum::integer && x.i != 0)) fast[t.j] = 0;
      }
  fast_terms ffw, fbw;
  std::vector<term> sfw, sbw;
  for (int dir = 0; dir < 2; ++dir) {
    const std::vector<term>& ts = dir == 0 ? fw : bw;
    fast_terms& fo = dir == 0 ? ffw : fbw;
    std::vector<term>& so = dir == 0 ? sfw : sbw;
    std::vector<const term*> fast_ones;
    for (const term& t : ts) {
      if (!fast[t.j]) {
        so.push_back(t);
        continue;
      }
      fast_ones.push_back(&t);
    }
    // row k of the matrix: values[k] of each fast term in the terms' order (a stage's code k reads one row); `rows`:
    // the codes every fast term has a value for (values[0] is nil, as in Lua)
    const size_t T = fast_ones.size();
    size_t rows = T > 0 ? SIZE_MAX : 0;
    for (const term* t : fast_ones) rows = std::min(rows, t->values.size());
    fo.T = T, fo.rows = rows;
    for (const term* t : fast_ones) fo.j.push_back(t->j), fo.has_watch = fo.has_watch || (w && t->j == w);
    fo.is_float.assign(rows * T, 0), fo.all_float.assign(rows, 0);
    fo.nz.assign(rows, 0), fo.nz_j.assign(rows * T, 0), fo.nz_values.assign(rows * T, 0.0);
    for (size_t k = 1; k < rows; ++k) {
      bool all = true;
      uint32_t m = 0;
      for (size_t x = 0; x < T; ++x) {
        const lnum& v = fast_ones[x]->values[k];
        const double d = as_float(v);
        const double signed_d = fast_ones[x]->minus ? -d : d;
        fo.is_float[k * T + x] = v.type == lnum::number;
        all = all && v.type == lnum::number;
        if (signed_d != 0.0 || signed_d != signed_d) {  // (NaN: not a zero)
          fo.nz_j[k * T + m] = fo.j[x], fo.nz_values[k * T + m] = signed_d;
          ++m;
        }
      }
      fo.all_float[k] = all, fo.nz[k] = m;
    }
  }
  lnum zero;
  zero.type = lnum::integer;
  const lua_Integer D = lua_Integer(lua_rawlen(L, 1));
  lua_createtable(L, int(D), 0);  // stack: … results
  const int results = lua_gettop(L);
  std::vector<lnum> sums(J + 1);
  std::vector<double> dsums(J + 1);
  std::vector<uint8_t> floated(J + 1);
  for (lua_Integer d = 1; d <= D; ++d) {
    lua_rawgeti(L, 2, d);
    int ok = 0;
    const lua_Integer n = lua_tointegerx(L, -1, &ok);
    lua_pop(L, 1);
    if (!ok || n < 0) luaL_error(L, "fold: counts[%d] must be an integer >= 0", int(d));
    lua_rawgeti(L, 1, d);  // stack: … results codes
    const int_series codes = ints_at(L, lua_gettop(L), n, "fold: codes");
    std::fill(sums.begin(), sums.end(), zero);
    std::fill(dsums.begin(), dsums.end(), 0.0);
    std::fill(floated.begin(), floated.end(), 0);
    ffw.any_float = fbw.any_float = false;
    lnum peak = zero;
    double dpeak = 0;
    bool dpeaked = false;  // the peak of a double sum: a float once taken (else the integer 0)
    for (lua_Integer i = 0; i < n; ++i) {
      const int64_t c = codes.data[i];
      const uint64_t k = c > 0 ? uint64_t(c) : uint64_t(0) - uint64_t(c);  // |c|, INT64_MIN too
      fast_terms& ft = c > 0 ? ffw : fbw;
      if (ft.T > 0) {
        // a code some fast term has no value for: nil, as in Lua (values[0] too); the error ends the fold, so
        // whether the terms before it added is never seen
        if (k == 0 || k >= ft.rows) nil_arith(L, "a stage's value");
        const double* row = ft.nz_values.data() + k * ft.T;
        const size_t* nz_j = ft.nz_j.data() + k * ft.T;
        for (size_t x = 0, m = ft.nz[k]; x < m; ++x) dsums[nz_j[x]] += row[x];
        if (ft.all_float[k]) {
          ft.any_float = true;
        } else {
          const uint8_t* row_float = ft.is_float.data() + k * ft.T;
          const size_t* js = ft.j.data();
          for (size_t x = 0; x < ft.T; ++x) floated[js[x]] |= row_float[x];
        }
      }
      for (const term& t : c > 0 ? sfw : sbw) {
        if (k >= t.values.size() || t.values[k].type == lnum::nil) nil_arith(L, "a stage's value");
        sums[t.j] = t.minus ? sub(sums[t.j], t.values[k]) : add(sums[t.j], t.values[k]);
      }
      if (w) {
        if (!fast[w]) {
          if (less(peak, sums[w])) peak = sums[w];
        } else if (dpeak < dsums[w] &&  // the integer 0 (not floated) is never above the peak
                   (floated[w] || (ffw.any_float && ffw.has_watch) || (fbw.any_float && fbw.has_watch))) {
          dpeak = dsums[w], dpeaked = true;
        }
      }
    }
    lua_pop(L, 1);  // stack: … results
    for (const fast_terms* ft : {&ffw, &fbw})  // an all-float row's op made each of its sums a float
      if (ft->any_float)
        for (const size_t j : ft->j) floated[j] = 1;
    lua_createtable(L, int(J) + 1, 0);
    for (size_t j = 1; j <= J; ++j) {
      if (!fast[j]) lnum_push(L, sums[j]);
      else if (floated[j]) lua_pushnumber(L, dsums[j]);
      else lua_pushinteger(L, 0);
      lua_rawseti(L, -2, lua_Integer(j));
    }
    if (w && fast[w]) {
      if (dpeaked) lua_pushnumber(L, dpeak);
      else lua_pushinteger(L, 0);
    } else {
      lnum_push(L, peak);
    }
    lua_rawseti(L, -2, lua_Integer(J) + 1);
    lua_rawseti(L, results, d);
  }
  return 1;
}

// queue(at, n, dt, len, free, sum) -> free, sum: runs k = 1..len of n[k] transfers each ready at at[k] and lasting
// dt[k] through one link, in order: each starts at max(at, free) (`at < free and free or at`) and frees the link at
// start + dt; `sum` adds up their dt. Returns the link's last free time and the sum. [-6, +2, e]
template <class N>
void queue_run(lua_State* L, const std::vector<lnum>& at, const std::vector<lua_Integer>& n, const std::vector<lnum>& dt,
               const lnum& free0, const lnum& sum0) {
  using Q = arith<N>;
  N free = Q::of(free0), sum = Q::of(sum0);
  bool any = false;
  for (size_t k = 1; k < at.size(); ++k) {
    if (n[k] <= 0) continue;
    if (at[k].type == lnum::nil || dt[k].type == lnum::nil) nil_arith(L, "a transfer's time");
    const N a = Q::of(at[k]), d = Q::of(dt[k]);
    for (lua_Integer i = 0; i < n[k]; ++i) {
      const N start = Q::lt(a, free) ? free : a;
      free = Q::plus(start, d);
      sum = Q::plus(sum, d);
    }
    any = true;
  }
  if (!any) {  // as given: no transfer ran
    lnum_push(L, free0), lnum_push(L, sum0);
    return;
  }
  push_num(L, free), push_num(L, sum);
}

int queue_body(lua_State* L) {
  const lua_Integer len = luaL_checkinteger(L, 4);
  if (len < 0) luaL_error(L, "queue: a negative count");
  const std::vector<lnum> at = lnums_at(L, 1, len, "queue: at");
  const std::vector<lnum> dt = lnums_at(L, 3, len, "queue: dt");
  luaL_checktype(L, 2, LUA_TTABLE);
  std::vector<lua_Integer> n(1);  // grown as read, as lnums_at's
  n.reserve(size_t(std::min(len, reserve_max)) + 1);
  for (lua_Integer k = 1; k <= len; ++k) {
    lua_rawgeti(L, 2, k);
    int ok = 0;
    n.push_back(lua_tointegerx(L, -1, &ok));
    if (!ok) luaL_error(L, "queue: n[%d] must be an integer", int(k));
    lua_pop(L, 1);
  }
  // each transfer is a step of the loop: 2^40 of them ran until the script watchdog (review F3). A timeline's
  // gradient buckets number millions at most.
  constexpr lua_Integer max_transfers = lua_Integer(1) << 32;
  lua_Integer total = 0;
  for (lua_Integer k = 1; k <= len; ++k)
    if (n[size_t(k)] > 0 && (n[size_t(k)] > max_transfers || (total += n[size_t(k)]) > max_transfers))
      luaL_error(L, "queue: more than 2^32 transfers in all (n[%d] = %I)", int(k), n[size_t(k)]);
  const lnum free0 = lnum_at(L, 5, "queue: free"), sum0 = lnum_at(L, 6, "queue: sum");
  if (free0.type == lnum::nil || sum0.type == lnum::nil) luaL_error(L, "queue: free and sum must be numbers");
  // in doubles where that gives the same bits: every time a float, the start values the integer 0 or floats (the
  // first transfer turns them into floats: 0 + x is 0.0 + x; max(at, 0) is at unless at < 0, then 0 + dt = 0.0 + dt)
  bool plain = (free0.type == lnum::number || free0.i == 0) && (sum0.type == lnum::number || sum0.i == 0);
  for (size_t k = 1; k < at.size() && plain; ++k)
    plain = n[k] <= 0 || (at[k].type == lnum::number && dt[k].type == lnum::number);
  lua_settop(L, 0);
  if (plain) queue_run<double>(L, at, n, dt, free0, sum0);
  else queue_run<lnum>(L, at, n, dt, free0, sum0);
  return 2;
}

// compile(lists, P, v, Mb) -> total, program, packed, codes, last (nil where the schedule deadlocks): the schedule's
// turns (scripts/neusight/parallel/schedule.lua shape_of, which says the rules) run once without times into its
// program. lists[d] = { n = ops, fw = {}, chunk = {}, mb = {} }: device d's ops in its order (fw truthy: a forward;
// chunk an integer of 0 to v - 1; mb one of 0 to Mb - 1). Devices take turns (1 to P, again while any ran an op),
// each running its ops in order while they are ready; the k-th op run is program[k] = prev << 40 | dep << 16 |
// (code + 2^15), code = +(vs + 1) for a forward of virtual stage vs = chunk·P + d − 1, −(vs + 1) for a backward, prev
// the position of the device's op before it and dep that of the op it waits for (0: none): the forward of vs − 1
// (none on the first stage), for a backward the backward of vs + 1 (on the last stage its own forward), which must
// have run too. Returns the ops run (total), program as an array and packed (pack_integers), codes[d] the codes of
// device d's ops packed, last[d] the position of its last op (0: none). [-4, +5|1, e]
int compile_body(lua_State* L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  const lua_Integer P = luaL_checkinteger(L, 2), v = luaL_checkinteger(L, 3), Mb = luaL_checkinteger(L, 4);
  constexpr lua_Integer max_ops = (lua_Integer(1) << 24) - 1, max_code = (lua_Integer(1) << 15) - 1;
  if (P < 1 || v < 1 || Mb < 0 || P > max_code || v > max_code || P * v > max_code || Mb > max_ops)
    luaL_error(L, "compile: P %I, v %I, Mb %I out of range (P·v at most %I stages, Mb at most %I)", P, v, Mb, max_code,
               max_ops);
  const lua_Integer V = P * v;
  struct ops_of {
    std::vector<uint8_t> fw;
    std::vector<int32_t> vs, mb;
  };
  std::vector<ops_of> devs(size_t(P) + 1);
  std::vector<lua_Integer> n(size_t(P) + 1, 0);
  lua_Integer left = 0;
  for (lua_Integer d = 1; d <= P; ++d) {
    lua_rawgeti(L, 1, d);  // stack: … l
    if (!lua_istable(L, -1)) luaL_error(L, "compile: lists[%I] must be a table", d);
    lua_getfield(L, -1, "n");
    int ok = 0;
    const lua_Integer nd = lua_tointegerx(L, -1, &ok);
    lua_pop(L, 1);
    if (!ok || nd < 0 || nd > max_ops - left) luaL_error(L, "compile: lists[%I].n must be an integer of 0 to %I", d, max_ops - left);
    n[size_t(d)] = nd, left += nd;
    ops_of& o = devs[size_t(d)];
    o.fw.resize(size_t(nd)), o.vs.resize(size_t(nd)), o.mb.resize(size_t(nd));
    lua_getfield(L, -1, "fw"), lua_getfield(L, -2, "chunk"), lua_getfield(L, -3, "mb");  // stack: … l fw chunk mb
    for (int at = -3; at <= -1; ++at)
      if (!lua_istable(L, at)) luaL_error(L, "compile: lists[%I] needs tables fw, chunk and mb", d);
    for (lua_Integer i = 1; i <= nd; ++i) {
      lua_rawgeti(L, -3, i), lua_rawgeti(L, -3, i), lua_rawgeti(L, -3, i);  // stack: … fw chunk mb f c m
      int okc = 0, okm = 0;
      const lua_Integer c = lua_tointegerx(L, -2, &okc), m = lua_tointegerx(L, -1, &okm);
      if (!okc || c < 0 || c >= v)
        luaL_error(L, "compile: device %I op %I: chunk must be an integer of 0 to %I", d - 1, i, v - 1);
      if (!okm || m < 0 || m >= Mb)
        luaL_error(L, "compile: device %I op %I: microbatch must be an integer of 0 to %I", d - 1, i, Mb - 1);
      o.fw[size_t(i - 1)] = uint8_t(lua_toboolean(L, -3));
      o.vs[size_t(i - 1)] = int32_t(c * P + (d - 1)), o.mb[size_t(i - 1)] = int32_t(m);
      lua_pop(L, 3);
    }
    lua_pop(L, 4);
  }
  // done_fw / done_bw[vs·Mb + m]: the program position of that op (0: not run yet; positions start at 1)
  std::vector<int64_t> done_fw(size_t(V * Mb), 0), done_bw(size_t(V * Mb), 0);
  std::vector<int64_t> program;
  program.reserve(size_t(left));
  std::vector<std::vector<int64_t>> codes(size_t(P) + 1);
  std::vector<lua_Integer> ptr(size_t(P) + 1, 0);
  std::vector<int64_t> last(size_t(P) + 1, 0);
  for (lua_Integer d = 1; d <= P; ++d) codes[size_t(d)].resize(size_t(n[size_t(d)]));
  int64_t k = 0;
  bool progress = true;
  while (left > 0 && progress) {
    progress = false;
    for (lua_Integer d = 1; d <= P; ++d) {
      const ops_of& o = devs[size_t(d)];
      int64_t* cd = codes[size_t(d)].data();
      const lua_Integer nd = n[size_t(d)], i0 = ptr[size_t(d)];
      lua_Integer i = i0;
      int64_t at = last[size_t(d)];
      for (; i < nd; ++i) {
        const int64_t vs = o.vs[size_t(i)], at_m = vs * Mb + o.mb[size_t(i)];
        int64_t ready, c;
        if (o.fw[size_t(i)]) {
          ready = vs == 0 ? 0 : done_fw[size_t(at_m - Mb)];
          if (vs != 0 && ready == 0) break;
          c = vs + 1, done_fw[size_t(at_m)] = ++k;
        } else {
          if (done_fw[size_t(at_m)] == 0) break;
          ready = vs == V - 1 ? done_fw[size_t(at_m)] : done_bw[size_t(at_m + Mb)];
          if (ready == 0) break;
          c = -(vs + 1), done_bw[size_t(at_m)] = ++k;
        }
        program.push_back(int64_t(uint64_t(at) << 40 | uint64_t(ready) << 16 | uint64_t(c + 0x8000)));
        cd[i] = c, at = k;
      }
      if (i > i0) ptr[size_t(d)] = i, last[size_t(d)] = at, left -= i - i0, progress = true;
    }
  }
  if (left > 0) {
    lua_pushnil(L);
    return 1;
  }
  const auto packed = [L](const std::vector<int64_t>& xs) {
    void* p = lua_newuserdatauv(L, xs.size() * sizeof(int64_t), 0);
    if (!xs.empty()) std::memcpy(p, xs.data(), xs.size() * sizeof(int64_t));
    luaL_setmetatable(L, ints_meta);
  };
  lua_pushinteger(L, lua_Integer(k));
  lua_createtable(L, int(k), 0);
  for (int64_t x = 0; x < k; ++x) lua_pushinteger(L, lua_Integer(program[size_t(x)])), lua_rawseti(L, -2, x + 1);
  packed(program);
  lua_createtable(L, int(P), 0);
  for (lua_Integer d = 1; d <= P; ++d) packed(codes[size_t(d)]), lua_rawseti(L, -2, d);
  lua_createtable(L, int(P), 0);
  for (lua_Integer d = 1; d <= P; ++d) lua_pushinteger(L, lua_Integer(last[size_t(d)])), lua_rawseti(L, -2, d);
  return 5;
}

// A C++ exception inside a loop (std::bad_alloc) becomes a Lua error with its message (ns_catch); Lua's own errors
// pass through. Without it Lua's C++ build caught it with catch (...) and the error was whatever value topped the
// stack ("neusight: 0", "neusight: (error)").
int l_pack_integers(lua_State* L) { return ns_catch(L, [L] { return pack_integers_body(L); }); }
int l_walk(lua_State* L) { return ns_catch(L, [L] { return walk_body(L); }); }
int l_fold(lua_State* L) { return ns_catch(L, [L] { return fold_body(L); }); }
int l_queue(lua_State* L) { return ns_catch(L, [L] { return queue_body(L); }); }
int l_compile(lua_State* L) { return ns_catch(L, [L] { return compile_body(L); }); }

}  // namespace

void series_functions_add(lua_State* L) {
  if (luaL_newmetatable(L, ints_meta)) {
    lua_pushliteral(L, "integer series");
    lua_setfield(L, -2, "__metatable");
  }
  lua_pop(L, 1);
  const luaL_Reg fns[] = {{"pack_integers", l_pack_integers}, {"walk", l_walk}, {"fold", l_fold},
                           {"queue", l_queue}, {"compile", l_compile}, {nullptr, nullptr}};
  luaL_setfuncs(L, fns, 0);
}

}  // namespace ns
