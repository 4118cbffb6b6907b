// SPDX-License-Identifier: Apache-2.0
// Profile outputs: stack aggregation by XXH3 of the pc sequence, folded stacks and flame-graph SVG.
#include "profile_output.hpp"

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <memory>

namespace stackprov_cli {

void StackAggregator::add(uint32_t comm, const std::vector<uint64_t>& pcs, const std::vector<uint32_t>& names,
                          uint64_t period) {
  XXH3_state_t st;
  XXH3_64bits_reset(&st);
  XXH3_64bits_update(&st, &comm, sizeof(comm));
  XXH3_64bits_update(&st, pcs.data(), pcs.size() * sizeof(uint64_t));
  const uint64_t h = XXH3_64bits_digest(&st);
  std::vector<uint32_t>& ids = by_hash_[h];
  for (uint32_t id : ids) {
    Entry& e = entries_[id];
    if (e.comm == comm && e.pcs == pcs) {
      e.count++;
      e.period += period;
      return;
    }
  }
  if (!ids.empty()) collisions_++;
  ids.push_back(static_cast<uint32_t>(entries_.size()));
  entries_.push_back(Entry{comm, pcs, names, 1, period});
}

std::map<std::string, uint64_t> fold(const StackAggregator& agg, const std::vector<std::string>& comms,
                                     const std::vector<std::string>& names) {
  std::map<std::string, uint64_t> out;
  std::string line;
  for (const auto& e : agg.entries()) {
    line = e.comm < comms.size() ? comms[e.comm] : "[unknown]";
    for (size_t i = e.names.size(); i-- > 0;) {
      line += ';';
      line += names[e.names[i]];
    }
    out[line] += e.count;
  }
  return out;
}

void write_folded(FILE* f, const std::map<std::string, uint64_t>& folded) {
  for (const auto& [line, n] : folded) fprintf(f, "%s %llu\n", line.c_str(), static_cast<unsigned long long>(n));
}

std::string xml_escape(const std::string& s) {
  std::string o;
  o.reserve(s.size());
  for (unsigned char c : s) {
    switch (c) {
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '&': o += "&amp;"; break;
      case '"': o += "&quot;"; break;
      case '\'': o += "&apos;"; break;
      default:
        if (c < 0x20 && c != '\t') o += '?';
        else o += static_cast<char>(c);
    }
  }
  return o;
}

namespace {

struct Node {
  std::string name;
  uint64_t count = 0;
  std::map<std::string, std::unique_ptr<Node>> kids;
};

struct Layout {
  FILE* f;
  uint64_t total;
  int max_depth;
  double width;
};

constexpr double kWidth = 1200, kFrameH = 16, kPadTop = 48, kPadBottom = 30, kPadSide = 10;

int depth_of(const Node& n) {
  int d = 0;
  for (const auto& [k, c] : n.kids) d = std::max(d, 1 + depth_of(*c));
  return d;
}

bool ends_with(const std::string& name, const char* suffix) {
  const size_t n = strlen(suffix);
  return name.size() > n && name.compare(name.size() - n, n, suffix) == 0;
}

/// flamegraph.pl's palettes: "hot" for user frames, "orange" for kernel frames and "aqua" for
/// inlined ones (its rules for names ending in "_[k]" and "_[i]").
void color(const std::string& name, int* r, int* g, int* b) {
  const uint64_t h = XXH3_64bits(name.data(), name.size());
  if (ends_with(name, "_[i]")) {
    const int v = static_cast<int>(h % 55);
    *r = 50 + v, *g = 165 + v, *b = 165 + v;
    return;
  }
  if (ends_with(name, "_[k]")) {
    const int v = static_cast<int>(h % 65);
    *r = 190 + v, *g = 90 + v, *b = 0;
    return;
  }
  *r = 205 + static_cast<int>(h % 50);
  *g = static_cast<int>((h >> 8) % 180);
  *b = static_cast<int>((h >> 16) % 55);
}

void emit(const Layout& L, const Node& n, uint64_t x, int depth) {
  const double px = kPadSide + (L.width - 2 * kPadSide) * static_cast<double>(x) / static_cast<double>(L.total);
  const double pw = (L.width - 2 * kPadSide) * static_cast<double>(n.count) / static_cast<double>(L.total);
  const double py = kPadTop + (L.max_depth - depth) * kFrameH;
  int r, g, b;
  color(n.name, &r, &g, &b);
  if (depth == 0) r = 230, g = 120, b = 60;
  const std::string name = xml_escape(n.name);
  fprintf(L.f,
          "<g class=\"f\" data-x=\"%llu\" data-samples=\"%llu\" data-d=\"%d\" data-fill=\"rgb(%d,%d,%d)\">"
          "<title>%s (%llu %s, %.2f%%)</title>"
          "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" fill=\"rgb(%d,%d,%d)\" rx=\"2\"/>"
          "<text x=\"%.2f\" y=\"%.1f\">%s</text></g>\n",
          static_cast<unsigned long long>(x), static_cast<unsigned long long>(n.count), depth, r, g, b, name.c_str(),
          static_cast<unsigned long long>(n.count), n.count == 1 ? "sample" : "samples",
          100.0 * static_cast<double>(n.count) / static_cast<double>(L.total), px, py, pw, kFrameH - 1, r, g, b,
          px + 3, py + kFrameH - 4.5, name.c_str());
  uint64_t cx = x;
  for (const auto& [k, c] : n.kids) {
    emit(L, *c, cx, depth + 1);
    cx += c->count;
  }
}

// Hover writes the frame's <title> into the details line; a click zooms so that the clicked
// frame spans the width (its ancestors too), frames outside it hide; "Reset Zoom" (or the
// root) resets. search(re) highlights matching frames and returns the matched percentage:
// matches are collected per x (the widest at each x) and, walking x upward, a match inside
// the previous counted one is skipped (flamegraph.pl's rule), so nested matches count once.
// Only getElementById, querySelector(All), get/setAttribute, textContent, style and
// addEventListener are used.
constexpr const char* kScript = R"JS(
var W = %W%, P = %P%, TOTAL = %T%;
var frames = document.querySelectorAll('g.f');
var details = document.getElementById('details');
var matchedtxt = document.getElementById('matched');
var searchbtn = document.getElementById('search');
var unzoombtn = document.getElementById('unzoom');
var searching = null;
function attr(g, k) { return g.getAttribute(k); }
function label(g) { return g.querySelector('title').textContent; }
function fname(g) { return label(g).replace(/ \([0-9]+ samples?, [0-9.]+%\)$/, ''); }
function fit(g) {
  var r = g.querySelector('rect'), t = g.querySelector('text'), full = fname(g);
  var w = parseFloat(r.getAttribute('width')), n = Math.floor((w - 6) / 7);
  t.textContent = n >= full.length ? full : (n > 2 ? full.substring(0, n - 2) + '..' : '');
}
function zoom(z) {
  var zx = +attr(z, 'data-x'), zn = +attr(z, 'data-samples'), zd = +attr(z, 'data-d');
  for (var i = 0; i < frames.length; i++) {
    var g = frames[i], x = +attr(g, 'data-x'), n = +attr(g, 'data-samples'), d = +attr(g, 'data-d');
    var r = g.querySelector('rect'), t = g.querySelector('text');
    var inside = x >= zx && x + n <= zx + zn, anc = d < zd && x <= zx && x + n >= zx + zn;
    if (!inside && !anc) { g.style.display = 'none'; continue; }
    g.style.display = '';
    var nx = anc ? 0 : (x - zx) / zn, nw = anc ? 1 : n / zn;
    r.setAttribute('x', P + nx * (W - 2 * P)); r.setAttribute('width', nw * (W - 2 * P));
    t.setAttribute('x', P + nx * (W - 2 * P) + 3);
    g.style.opacity = anc && d != zd ? 0.6 : 1;
    fit(g);
  }
  unzoombtn.style.opacity = zd > 0 ? 1 : 0;
}
function unzoom() {
  for (var i = 0; i < frames.length; i++) if (attr(frames[i], 'data-d') == '0') zoom(frames[i]);
}
function reset_search() {
  for (var i = 0; i < frames.length; i++) frames[i].querySelector('rect').setAttribute('fill', attr(frames[i], 'data-fill'));
  matchedtxt.textContent = '';
  searchbtn.textContent = 'Search';
  searching = null;
}
function search(term) {
  var re;
  try { re = new RegExp(term); } catch (e) { return null; }
  var matches = {}, any = false;
  for (var i = 0; i < frames.length; i++) {
    var g = frames[i], r = g.querySelector('rect');
    if (re.test(fname(g))) {
      r.setAttribute('fill', 'rgb(230,0,230)');
      var x = +attr(g, 'data-x'), n = +attr(g, 'data-samples');
      if (!(x in matches) || n > matches[x]) matches[x] = n;
      any = true;
    } else {
      r.setAttribute('fill', attr(g, 'data-fill'));
    }
  }
  var xs = Object.keys(matches).map(Number).sort(function (a, b) { return a - b; });
  var count = 0, lastx = -1, lastw = 0;
  for (var j = 0; j < xs.length; j++) {
    if (xs[j] >= lastx + lastw) { count += matches[xs[j]]; lastx = xs[j]; lastw = matches[xs[j]]; }
  }
  var pct = TOTAL > 0 ? 100 * count / TOTAL : 0;
  matchedtxt.textContent = any ? 'Matched: ' + pct.toFixed(1) + '%' : 'Matched: 0.0% (no frame matches)';
  searchbtn.textContent = 'Reset Search';
  searching = term;
  return pct;
}
function search_prompt() {
  if (searching !== null) { reset_search(); return; }
  var term = prompt('Enter a search term (regexp allowed, eg: ^ext4_)', '');
  if (term) search(term);
}
for (var i = 0; i < frames.length; i++) {
  (function (g) {
    fit(g);
    g.addEventListener('click', function () { zoom(g); });
    g.addEventListener('mouseover', function () { details.textContent = 'Function: ' + label(g); });
    g.addEventListener('mouseout', function () { details.textContent = ' '; });
  })(frames[i]);
}
searchbtn.addEventListener('click', search_prompt);
unzoombtn.addEventListener('click', unzoom);
if (typeof window !== 'undefined') {
  window.addEventListener('keydown', function (e) {
    if ((e.ctrlKey || e.metaKey) && (e.keyCode === 70 || e.key === 'f')) { e.preventDefault(); search_prompt(); }
  });
  var m = /[?&]s=([^&]*)/.exec((window.location && window.location.search) || '');
  if (m) search(decodeURIComponent(m[1]));
}
)JS";

}  // namespace

void write_flamegraph_svg(FILE* f, const std::map<std::string, uint64_t>& folded, const std::string& title) {
  Node root;
  root.name = "all";
  for (const auto& [line, n] : folded) {
    root.count += n;
    Node* cur = &root;
    size_t at = 0;
    while (at <= line.size()) {
      size_t semi = line.find(';', at);
      if (semi == std::string::npos) semi = line.size();
      const std::string part = line.substr(at, semi - at);
      auto& kid = cur->kids[part];
      if (!kid) {
        kid = std::make_unique<Node>();
        kid->name = part;
      }
      kid->count += n;
      cur = kid.get();
      at = semi + 1;
    }
  }
  const int max_depth = depth_of(root);
  const double height = kPadTop + (max_depth + 1) * kFrameH + kPadBottom;
  fprintf(f,
          "<?xml version=\"1.0\" standalone=\"no\"?>\n"
          "<svg version=\"1.1\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
          "xmlns=\"http://www.w3.org/2000/svg\" data-total-samples=\"%llu\">\n"
          "<style>text { font-family: Verdana, sans-serif; font-size: 12px; } g.f text { pointer-events: none; } "
          "g.f:hover rect { stroke: black; stroke-width: 0.5; } g.f, .btn { cursor: pointer; } "
          ".btn:hover { text-decoration: underline; }</style>\n"
          "<rect x=\"0\" y=\"0\" width=\"100%%\" height=\"100%%\" fill=\"rgb(248,248,240)\"/>\n"
          "<text x=\"%.0f\" y=\"24\" text-anchor=\"middle\" style=\"font-size:17px\">%s</text>\n"
          "<text id=\"unzoom\" class=\"btn\" x=\"%.0f\" y=\"24\" style=\"opacity:0\">Reset Zoom</text>\n"
          "<text id=\"search\" class=\"btn\" x=\"%.0f\" y=\"24\" text-anchor=\"end\">Search</text>\n"
          "<text id=\"details\" x=\"%.0f\" y=\"%.0f\"> </text>\n"
          "<text id=\"matched\" x=\"%.0f\" y=\"%.0f\" text-anchor=\"end\"></text>\n",
          kWidth, height, kWidth, height, static_cast<unsigned long long>(root.count), kWidth / 2,
          xml_escape(title).c_str(), kPadSide, kWidth - kPadSide, kPadSide, height - 10, kWidth - kPadSide, height - 10);
  if (root.count > 0) emit(Layout{f, root.count, max_depth, kWidth}, root, 0, 0);
  std::string js = kScript;
  auto sub = [&](const std::string& k, const std::string& v) {
    for (size_t p; (p = js.find(k)) != std::string::npos;) js.replace(p, k.size(), v);
  };
  sub("%W%", std::to_string(static_cast<int>(kWidth)));
  sub("%P%", std::to_string(static_cast<int>(kPadSide)));
  sub("%T%", std::to_string(root.count));
  fprintf(f, "<script type=\"text/ecmascript\"><![CDATA[%s]]></script>\n</svg>\n", js.c_str());
}

}  // namespace stackprov_cli
