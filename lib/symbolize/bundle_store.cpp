// SPDX-License-Identifier: Apache-2.0
// The bundle store: content-addressed blobs, the per-OS id map, sidecars and fsck (doc/bundles.md "Store").
#include "symbolize/bundle_store.hpp"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <tuple>

#include "evidence/dsse.hpp"
#include "evidence/encoding.hpp"
#include "evidence/note.hpp"

namespace stackprov::symbolize {

namespace {

constexpr const char* kStoreMarker = "{\"format\":\"stackprov-bundle-store\",\"version\":1}\n";
constexpr size_t kMaxIdEntryBytes = 128;
constexpr size_t kMaxDirEntries = 1u << 24;  // bound on any directory listing

bool is_dir(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}
bool is_file(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool is_hex(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

std::string printable(std::string_view s) {
  std::string o;
  for (char c : s.substr(0, 80)) o += (c >= 0x20 && c < 0x7f) ? c : '?';
  if (s.size() > 80) o += "...";
  return o;
}

/// Sorted names in `dir` (not "." / ".."); an absent directory is empty.
Result<std::vector<std::string>> list_dir(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = opendir(dir.c_str());
  if (!d) {
    if (errno == ENOENT) return out;
    return make_error(-errno, "cannot list '%s': %s", dir.c_str(), strerror(errno));
  }
  while (dirent* e = readdir(d)) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    if (out.size() >= kMaxDirEntries) {
      closedir(d);
      return make_error(SPROV_ERR_LIMIT, "'%s' has more than %zu entries", dir.c_str(), kMaxDirEntries);
    }
    out.emplace_back(e->d_name);
  }
  closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

bool temp_name(const std::string& n) { return n.find(".tmp.") != std::string::npos; }

std::string blob_rel(const std::string& hex) { return "blobs/sha256/" + hex.substr(0, 2) + "/" + hex; }

const bundle::IdKind kKinds[] = {bundle::IdKind::kElfBuildId, bundle::IdKind::kPdbGuidAge,
                                 bundle::IdKind::kMachoUuid, bundle::IdKind::kPeCodeId};

/// A directory of the store that someone other than the user (or root) owns or may write lets
/// that someone plant id entries or blobs: refused, as ssh refuses such key directories.
Status check_private_dir(const std::string& path, bool follow) {
  struct stat st;
  if ((follow ? stat(path.c_str(), &st) : lstat(path.c_str(), &st)) != 0) {
    if (errno == ENOENT) return {};
    return make_error(-errno, "bundle store: cannot stat '%s': %s", path.c_str(), strerror(errno));
  }
  if (!S_ISDIR(st.st_mode))
    return make_error(SPROV_ERR_INVALID_ARG, "bundle store: '%s' is not a directory (a symlink is refused)",
                      path.c_str());
  if (st.st_uid != geteuid() && st.st_uid != 0)
    return make_error(SPROV_ERR_INVALID_ARG,
                      "bundle store: '%s' belongs to uid %u, not to uid %u (or root): refused, its owner could "
                      "plant the symbols it serves",
                      path.c_str(), static_cast<unsigned>(st.st_uid), static_cast<unsigned>(geteuid()));
  if (st.st_mode & (S_IWGRP | S_IWOTH))
    return make_error(SPROV_ERR_INVALID_ARG,
                      "bundle store: '%s' is writable by %s (mode %04o): refused, others could plant the "
                      "symbols it serves (chmod go-w)",
                      path.c_str(), (st.st_mode & S_IWOTH) ? "everyone" : "its group",
                      static_cast<unsigned>(st.st_mode & 07777));
  return {};
}

/// The store's own directories that decide what it serves: the root, ids/ and each id kind's
/// directory, blobs/ and sigs/.
Status check_store_dirs(const std::string& dir) {
  for (const char* sub : {"", "/ids", "/ids/linux", "/ids/windows", "/ids/macos", "/ids/linux/elf-build-id",
                          "/ids/windows/pdb-guid-age", "/ids/windows/pe-code-id", "/ids/macos/macho-uuid", "/blobs", "/blobs/sha256", "/sigs",
                          "/sigs/sha256"})
    // The directory the user named may be a symlink to the store; inside it, nothing is followed.
    if (auto st = check_private_dir(dir + sub, *sub == '\0'); !st) return st;
  return {};
}

}  // namespace

Result<std::string> parse_bundle_digest(std::string_view s) {
  std::string_view hex = s;
  if (hex.substr(0, 7) == "sha256:") hex.remove_prefix(7);
  std::string lower(hex);
  for (char& c : lower)
    if (c >= 'A' && c <= 'F') c = static_cast<char>(c - 'A' + 'a');
  if (lower.size() != 64 || !is_hex(lower))
    return make_error(SPROV_ERR_INVALID_ARG, "'%s' is not a bundle digest (sha256:<64 hex digits>)",
                      printable(s).c_str());
  return lower;
}

const char* BundleStore::id_dir(bundle::IdKind kind) {
  switch (kind) {
    case bundle::IdKind::kElfBuildId: return "linux/elf-build-id";
    case bundle::IdKind::kPdbGuidAge: return "windows/pdb-guid-age";
    case bundle::IdKind::kMachoUuid: return "macos/macho-uuid";
    case bundle::IdKind::kPeCodeId: return "windows/pe-code-id";
    case bundle::IdKind::kNone: break;  // no bundle holds an empty identity
  }
  return "unknown";
}

Result<std::string> BundleStore::default_dir() {
  // $STACKPROV_STORE names the bundle store when it is a directory; a trace store URL there
  // (sqlite:PATH, postgresql://...: doc/traces.md) is the trace store's and is skipped here.
  if (const char* e = getenv("STACKPROV_STORE"); e && *e) {
    const std::string v(e);
    if (v.rfind("sqlite:", 0) != 0 && v.find("://") == std::string::npos) return v;
  }
  if (const char* x = getenv("XDG_DATA_HOME"); x && *x) return std::string(x) + "/stackprov/store";
  if (const char* h = getenv("HOME"); h && *h) return std::string(h) + "/.local/share/stackprov/store";
  return make_error(SPROV_ERR_INVALID_ARG,
                    "no bundle store: set --store DIR, STACKPROV_STORE, XDG_DATA_HOME or HOME");
}

Result<BundleStore> BundleStore::open(const std::string& dir_in, bool create) {
  std::string dir = dir_in;
  if (dir.empty()) {
    auto d = default_dir();
    if (!d) return std::move(d).error();
    dir = d.value();
  }
  if (dir.find("://") != std::string::npos)
    return make_error(SPROV_ERR_UNSUPPORTED, "bundle store '%s': a bundle store is a directory, not a URL",
                      printable(dir).c_str());
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  const std::string marker = dir + "/store.json";
  if (!is_file(marker)) {
    if (!create) {
      if (!is_dir(dir)) return make_error(SPROV_ERR_NOT_FOUND, "bundle store '%s' does not exist", dir.c_str());
      return make_error(SPROV_ERR_NOT_FOUND, "'%s' is not a bundle store (no store.json)", dir.c_str());
    }
    if (is_dir(dir)) {
      auto names = list_dir(dir);
      if (!names) return std::move(names).error();
      // Entries a concurrent creator may have made already are fine; anything else is not ours.
      const bool ours = std::all_of(names.value().begin(), names.value().end(), [](const std::string& n) {
        return n == "blobs" || n == "sigs" || n == "ids" || n == "tmp" || n.rfind("store.json", 0) == 0;
      });
      if (!ours)
        return make_error(SPROV_ERR_INVALID_ARG,
                          "'%s' is neither empty nor a bundle store (no store.json); refusing to write there",
                          dir.c_str());
    }
    for (const char* sub : {"blobs/sha256", "sigs/sha256", "ids/linux/elf-build-id", "ids/windows/pdb-guid-age",
                            "ids/windows/pe-code-id", "ids/macos/macho-uuid"}) {
      auto st = evidence::make_dirs(dir + "/" + sub);
      if (!st) return std::move(st).error();
    }
    if (auto st = check_store_dirs(dir); !st) return std::move(st).error();
    auto st = write_file_atomic(marker, kStoreMarker);
    if (!st) return std::move(st).error();
  } else {
    if (auto st = check_store_dirs(dir); !st) return std::move(st).error();
    auto m = evidence::read_file(marker, 4096);
    if (!m) return std::move(m).error();
    if (evidence::as_sv(m.value()) != kStoreMarker)
      return make_error(SPROV_ERR_UNSUPPORTED, "'%s': unknown store format (expected %.*s)", marker.c_str(),
                        static_cast<int>(strlen(kStoreMarker) - 1), kStoreMarker);
  }
  return BundleStore(dir);
}

Status BundleStore::write_atomic(const std::string& path, std::string_view data, unsigned mode) const {
  const size_t slash = path.rfind('/');
  auto st = evidence::make_dirs(path.substr(0, slash));
  if (!st) return st;
  return write_file_atomic(path, data, mode);
}

Result<std::string> BundleStore::put(std::span<const uint8_t> bytes, Index index) {
  auto rd = bundle::BundleReader::open(bytes.data(), bytes.size());
  if (!rd) return make_error(rd.error().code, "not stored: %s", rd.error().message.c_str());
  const std::string hex = evidence::hex_encode(evidence::sha256(bytes.data(), bytes.size()));
  const std::string blob = dir_ + "/" + blob_rel(hex);
  if (!is_file(blob)) {
    auto st = write_atomic(blob, std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), 0444);
    if (!st) return std::move(st).error();
  }
  const std::string digest = "sha256:" + hex;
  if (index == Index::kNone) return digest;
  for (const bundle::ModuleView& m : rd.value().modules()) {
    const std::string idhex = evidence::hex_encode(m.id.data(), m.id.size());
    auto st = write_atomic(dir_ + "/ids/" + id_dir(m.id_kind) + "/" + idhex, digest + "\n", 0644);
    if (!st) return std::move(st).error();
  }
  return digest;
}

Result<std::string> BundleStore::put_file(const std::string& path, Index index) {
  auto rd = bundle::BundleReader::open_file(path);
  if (!rd) return std::move(rd).error();
  return put(std::span<const uint8_t>(rd.value().data(), rd.value().size()), index);
}

Status BundleStore::promote(std::string_view digest) {
  auto path = blob_path(digest);
  if (!path) return std::move(path).error();
  auto rd = bundle::BundleReader::open_file(path.value());
  if (!rd) return make_error(rd.error().code, "'%s': %s", path.value().c_str(), rd.error().message.c_str());
  // The blob's name must be its content: promoting an altered blob would index other bytes.
  const std::string actual = evidence::hex_encode(evidence::sha256(rd.value().data(), rd.value().size()));
  const std::string want = path.value().substr(path.value().rfind('/') + 1);
  if (actual != want)
    return make_error(SPROV_ERR_DIGEST_MISMATCH, "'%s' hashes to sha256:%s, not its name: not promoted",
                      path.value().c_str(), actual.c_str());
  auto d = put(std::span<const uint8_t>(rd.value().data(), rd.value().size()), Index::kModules);
  if (!d) return std::move(d).error();
  return {};
}

Result<std::optional<std::string>> BundleStore::find(bundle::IdKind kind, std::span<const uint8_t> id) const {
  if (id.empty() || id.size() > bundle::kMaxIdBytes)
    return make_error(SPROV_ERR_INVALID_ARG, "module identity of %zu bytes (1..%zu)", id.size(), bundle::kMaxIdBytes);
  const std::string path = dir_ + "/ids/" + id_dir(kind) + "/" + evidence::hex_encode(id.data(), id.size());
  struct stat st;
  if (lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return std::optional<std::string>();
  if (st.st_uid != geteuid() && st.st_uid != 0)
    return make_error(SPROV_ERR_INVALID_ARG, "id entry '%s' belongs to uid %u, not to uid %u (or root): refused",
                      path.c_str(), static_cast<unsigned>(st.st_uid), static_cast<unsigned>(geteuid()));
  auto text = evidence::read_file(path, kMaxIdEntryBytes);
  if (!text) return std::move(text).error();
  std::string_view s = evidence::as_sv(text.value());
  if (!s.empty() && s.back() == '\n') s.remove_suffix(1);
  auto hex = parse_bundle_digest(s);
  if (!hex) return make_error(SPROV_ERR_BAD_FORMAT, "id entry '%s': %s", path.c_str(), hex.error().message.c_str());
  return std::optional<std::string>("sha256:" + hex.value());
}

Result<std::string> BundleStore::blob_path(std::string_view digest) const {
  auto hex = parse_bundle_digest(digest);
  if (!hex) return std::move(hex).error();
  std::string p = dir_ + "/" + blob_rel(hex.value());
  if (!is_file(p))
    return make_error(SPROV_ERR_NOT_FOUND, "bundle sha256:%s is not in the store '%s'", hex.value().c_str(),
                      dir_.c_str());
  return p;
}

Status BundleStore::put_sidecar(std::string_view digest, std::string_view name, std::string_view data) {
  auto p = sidecar_path(digest, name);
  if (!p) return std::move(p).error();
  auto blob = blob_path(digest);
  if (!blob) return std::move(blob).error();
  return write_atomic(p.value(), data, 0644);
}

Result<std::string> BundleStore::sidecar_path(std::string_view digest, std::string_view name) const {
  auto hex = parse_bundle_digest(digest);
  if (!hex) return std::move(hex).error();
  const bool ok_name = !name.empty() && name.size() <= 32 && name[0] != '.' &&
                       std::all_of(name.begin(), name.end(), [](char c) {
                         return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-';
                       });
  if (!ok_name || name.find(".tmp.") != std::string_view::npos)
    return make_error(SPROV_ERR_INVALID_ARG, "sidecar name '%s' is not [a-z0-9.-]{1,32}", printable(name).c_str());
  return dir_ + "/sigs/sha256/" + hex.value().substr(0, 2) + "/" + hex.value() + "." + std::string(name);
}

Result<std::vector<std::string>> BundleStore::list() const {
  std::vector<std::string> out;
  auto prefixes = list_dir(dir_ + "/blobs/sha256");
  if (!prefixes) return std::move(prefixes).error();
  for (const std::string& pre : prefixes.value()) {
    auto names = list_dir(dir_ + "/blobs/sha256/" + pre);
    if (!names) return std::move(names).error();
    for (const std::string& n : names.value())
      if (n.size() == 64 && is_hex(n) && n.compare(0, 2, pre) == 0) out.push_back("sha256:" + n);
  }
  return out;
}

Result<BundleStore::FsckReport> BundleStore::fsck() const {
  FsckReport rep;
  // Blobs: name = sha256 of the bytes, a valid bundle, every module's records valid and indexed.
  std::set<std::tuple<bundle::IdKind, std::string, std::string>> held;  // (kind, id hex, digest) of every module
  // (kind, id hex) -> (sha256 of the module's file, digest) of every stored bundle holding it
  std::map<std::pair<bundle::IdKind, std::string>, std::vector<std::pair<std::string, std::string>>> files;
  auto prefixes = list_dir(dir_ + "/blobs/sha256");
  if (!prefixes) return std::move(prefixes).error();
  for (const std::string& pre : prefixes.value()) {
    const std::string pdir = dir_ + "/blobs/sha256/" + pre;
    if (pre.size() != 2 || !is_hex(pre) || !is_dir(pdir)) {
      rep.errors.push_back(pdir + ": unexpected entry in blobs/sha256");
      continue;
    }
    auto names = list_dir(pdir);
    if (!names) return std::move(names).error();
    for (const std::string& n : names.value()) {
      const std::string path = pdir + "/" + n;
      if (temp_name(n)) {
        rep.warnings.push_back(path + ": leftover temporary file of an interrupted write");
        continue;
      }
      if (n.size() != 64 || !is_hex(n) || n.compare(0, 2, pre) != 0) {
        rep.errors.push_back(path + ": not a sha256-named blob");
        continue;
      }
      ++rep.blobs;
      auto h = evidence::sha256_file(path);
      if (!h) {
        rep.errors.push_back(path + ": " + h.error().message);
        continue;
      }
      const std::string actual = evidence::hex_encode(h.value());
      if (actual != n) {
        rep.errors.push_back(path + ": content hashes to sha256:" + actual + ", not its name");
        continue;
      }
      auto rd = bundle::BundleReader::open_file(path);
      if (!rd) {
        rep.errors.push_back(path + ": " + rd.error().message);
        continue;
      }
      for (const bundle::ModuleView& m : rd.value().modules()) {
        ++rep.modules;
        // Every range record, return pad, unwind row and symbol name decoded.
        auto v = rd.value().ranges(m.index);
        if (!v) rep.errors.push_back(path + ": module " + std::string(m.name) + ": " + v.error().message);
        auto pads = rd.value().return_pads(m.index);
        if (!pads) rep.errors.push_back(path + ": module " + std::string(m.name) + ": " + pads.error().message);
        auto rows = rd.value().check_unwind_rows(m.index);
        if (!rows) rep.errors.push_back(path + ": module " + std::string(m.name) + ": " + rows.error().message);
        auto syms = rd.value().symbols(m.index);  // format 5's symbol names
        if (!syms) rep.errors.push_back(path + ": module " + std::string(m.name) + ": " + syms.error().message);
        const std::string idhex = evidence::hex_encode(m.id.data(), m.id.size());
        held.emplace(m.id_kind, idhex, "sha256:" + n);
        files[{m.id_kind, idhex}].emplace_back(evidence::hex_encode(m.sha256_file.data(), m.sha256_file.size()),
                                               "sha256:" + n);
        auto f = find(m.id_kind, m.id);
        if (!f) rep.errors.push_back(f.error().message);
        else if (!f.value() || *f.value() != "sha256:" + n) ++rep.unindexed;  // by content only (a capture's)
      }
    }
  }
  // Id entries: well-formed, naming a present blob that holds the module.
  for (bundle::IdKind kind : kKinds) {
    const std::string idir = dir_ + "/ids/" + id_dir(kind);
    auto names = list_dir(idir);
    if (!names) return std::move(names).error();
    for (const std::string& n : names.value()) {
      const std::string path = idir + "/" + n;
      if (temp_name(n)) {
        rep.warnings.push_back(path + ": leftover temporary file of an interrupted write");
        continue;
      }
      ++rep.ids;
      if (n.empty() || n.size() > 2 * bundle::kMaxIdBytes || n.size() % 2 != 0 || !is_hex(n)) {
        rep.errors.push_back(path + ": not a hex module identity");
        continue;
      }
      auto idb = evidence::hex_decode(n);
      if (!idb) {
        rep.errors.push_back(path + ": " + idb.error().message);
        continue;
      }
      auto f = find(kind, idb.value());
      if (!f) {
        rep.errors.push_back(f.error().message);
        continue;
      }
      const std::string& digest = *f.value();
      if (held.count({kind, n, digest}) == 0) {
        auto blob = blob_path(digest);
        rep.errors.push_back(path + ": names " + digest +
                             (blob ? ", which does not hold this module" : ", which is not in the store"));
        continue;
      }
      // Another stored bundle holding a different file under this id: one of them was built
      // from a file with a forged (or colliding) identity; the entry may serve the wrong names.
      // Zero is "unknown" (the format allows it): nothing to compare. Two builds of one file
      // (stripped and not) also share a build-id: a warning to look at, not an error.
      const auto& all = files[{kind, n}];
      const std::string unknown(64, '0');
      std::string indexed_file;
      for (const auto& [file, d] : all)
        if (d == digest) indexed_file = file;
      for (const auto& [file, d] : all)
        if (file != indexed_file && file != unknown && indexed_file != unknown)
          rep.warnings.push_back(path + ": names " + digest + " (module file sha256:" + indexed_file + "), but " + d +
                                 " holds another file under the same id (sha256:" + file +
                                 "): a forged or colliding identity, or another build of the file (e.g. stripped); "
                                 "check which is right and promote it");
    }
  }
  check_sidecars(&rep);
  return rep;
}

void BundleStore::check_sidecars(FsckReport* rep) const {
  // Sidecars: "<hex>.<name>" under sigs/sha256/<hh>/, of a present blob; known names parse.
  auto prefixes = list_dir(dir_ + "/sigs/sha256");
  if (!prefixes) {
    rep->errors.push_back(prefixes.error().message);
    return;
  }
  for (const std::string& pre : prefixes.value()) {
    const std::string pdir = dir_ + "/sigs/sha256/" + pre;
    if (pre.size() != 2 || !is_hex(pre) || !is_dir(pdir)) {
      rep->errors.push_back(pdir + ": unexpected entry in sigs/sha256");
      continue;
    }
    auto names = list_dir(pdir);
    if (!names) {
      rep->errors.push_back(names.error().message);
      continue;
    }
    for (const std::string& n : names.value()) {
      const std::string path = pdir + "/" + n;
      if (temp_name(n)) {
        rep->warnings.push_back(path + ": leftover temporary file of an interrupted write");
        continue;
      }
      ++rep->sidecars;
      const std::string hex = n.substr(0, 64);
      if (n.size() < 66 || n[64] != '.' || !is_hex(hex) || hex.compare(0, 2, pre) != 0) {
        rep->errors.push_back(path + ": not a sidecar name (<sha256 hex>.<name>)");
        continue;
      }
      const std::string name = n.substr(65);
      if (!is_file(dir_ + "/" + blob_rel(hex))) {
        rep->errors.push_back(path + ": sidecar of sha256:" + hex + ", which is not in the store");
        continue;
      }
      if (name != "dsse.json" && name != "tlog-proof" && name != "checkpoint") continue;
      auto data = evidence::read_file(path, 1u << 20);
      if (!data) {
        rep->errors.push_back(path + ": " + data.error().message);
        continue;
      }
      const std::string_view text = evidence::as_sv(data.value());
      Status st;
      if (name == "dsse.json") {
        auto env = evidence::parse_envelope(text);
        if (!env) {
          st = std::move(env).error();
        } else {
          auto h = evidence::hex_decode(hex);
          evidence::Hash digest{};
          std::copy(h.value().begin(), h.value().end(), digest.begin());
          st = evidence::check_statement_subject(env.value().payload, digest);
        }
      } else if (name == "tlog-proof") {
        auto p = evidence::parse_tlog_proof(text);
        if (!p) st = std::move(p).error();
        else if (auto note = evidence::parse_note(p.value().checkpoint); !note) st = std::move(note).error();
        else if (auto cp = evidence::parse_checkpoint_text(note.value().text); !cp) st = std::move(cp).error();
      } else {
        auto note = evidence::parse_note(text);
        if (!note) st = std::move(note).error();
        else if (auto cp = evidence::parse_checkpoint_text(note.value().text); !cp) st = std::move(cp).error();
      }
      if (!st) rep->errors.push_back(path + ": " + st.error().message);
    }
  }
}

}  // namespace stackprov::symbolize
