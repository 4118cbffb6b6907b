// SPDX-License-Identifier: Apache-2.0
// Local transparency log: tiles and entry bundles on disk, crash-safe appends, proofs from tiles.
#include "evidence/tlog.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>

#include "evidence/json.hpp"

namespace stackprov::evidence {

namespace {

constexpr const char* kFormat = "stackprov-tlog/1";
constexpr unsigned kMaxLevels = 8;  // 256^8 = 2^64 leaves


// Writes via temp file + fsync + rename (write_file_atomic without its directory fsync); the
// caller fsyncs the touched directories (collected in `dirs`) once, before it commits the new state.
Status write_tile_file(const std::string& path, std::string_view data, std::set<std::string>& dirs) {
  const std::string dir = path.substr(0, path.rfind('/'));
  auto st = make_dirs(dir);
  if (!st) return st;
  dirs.insert(dir);
  return write_file_atomic(path, data, 0644, /*sync_dir=*/false);
}

bool file_exists(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

struct LockFile {
  int fd = -1;
  ~LockFile() {
    if (fd >= 0) close(fd);  // releases the flock
  }
};

// Writers hold DIR/lock for a few milliseconds; one that waits longer than this is facing a
// lock held by someone else (doc/hardening.md, attack 5) and gives up with an error naming it.
constexpr unsigned kLockTimeoutMs = 10000;

Status lock_log(const std::string& dir, LockFile& lk) {
  auto fd = open_lock_file(dir + "/lock", kLockTimeoutMs, 0644);
  if (!fd) return std::move(fd).error();
  lk.fd = fd.value();
  return {};
}

// Hash of 2^h consecutive hashes (perfect subtree), pairwise.
Hash perfect_root(std::vector<Hash> v) {
  while (v.size() > 1) {
    for (size_t i = 0; i < v.size() / 2; ++i) v[i] = node_hash(v[2 * i], v[2 * i + 1]);
    v.resize(v.size() / 2);
  }
  return v[0];
}

std::string tile_bytes(const std::vector<Hash>& hs, size_t from, size_t to) {
  std::string out;
  out.reserve((to - from) * 32);
  for (size_t i = from; i < to; ++i) out.append(reinterpret_cast<const char*>(hs[i].data()), 32);
  return out;
}

}  // namespace

std::string tile_index_path(uint64_t n) {
  std::string out;
  char buf[8];
  std::vector<unsigned> groups;
  do {
    groups.push_back(static_cast<unsigned>(n % 1000));
    n /= 1000;
  } while (n > 0);
  for (size_t i = groups.size(); i-- > 0;) {
    snprintf(buf, sizeof(buf), i == 0 ? "%03u" : "x%03u/", groups[i]);
    out += buf;
  }
  return out;
}

std::string tile_path(int level, uint64_t n, uint64_t width) {
  std::string out = level < 0 ? "tile/entries/" : "tile/" + std::to_string(level) + "/";
  out += tile_index_path(n);
  if (width < kTileWidth) out += ".p/" + std::to_string(width);
  return out;
}

Status Tlog::write_state(uint64_t size, const Hash& root) {
  std::string s = std::to_string(size) + "\n" + base64_encode(root) + "\n";
  auto st = write_file_atomic(dir_ + "/state", s);
  if (!st) return st;
  size_ = size;
  root_ = root;
  return {};
}

Result<Tlog> Tlog::init(const std::string& dir, const std::string& origin, const SigningKey& key) {
  if (origin.empty() || origin.size() > 256 || origin.find_first_of(" \n+") != std::string::npos)
    return make_error(SPROV_ERR_INVALID_ARG, "log origin '%s' must be 1-256 characters without spaces, '+' or newlines",
                      origin.substr(0, 64).c_str());
  auto st = make_dirs(dir);
  if (!st) return st.error();
  if (file_exists(dir + "/log.json"))
    return make_error(SPROV_ERR_LOG, "'%s' already holds a log (log.json exists)", dir.c_str());
  Tlog t;
  t.dir_ = dir;
  t.info_ = TlogInfo{origin, key.public_key()};
  Json j = Json::object();
  j["format"] = kFormat;
  j["origin"] = origin;
  j["publicKey"] = base64_encode(key.public_key().spki_der());
  auto id = note_key_id(origin, key.public_key());
  j["noteKeyId"] = hex_encode(id.data(), id.size());
  j["logId"] = key.public_key().key_id_hex();
  st = write_file_atomic(dir + "/log.json", canonical_json(j) + "\n");
  if (!st) return st.error();
  st = write_file_atomic(dir + "/log.pub", spki_to_pem(key.public_key().spki_der()));
  if (!st) return st.error();
  // A Sigstore-format trusted root naming this log, for offline verifiers.
  Json tl = Json::object();
  tl["baseUrl"] = "https://" + origin;
  tl["hashAlgorithm"] = "SHA2_256";
  tl["publicKey"] = Json{{"rawBytes", base64_encode(key.public_key().spki_der())},
                         {"keyDetails", "PKIX_ECDSA_P256_SHA_256"}};
  tl["logId"] = Json{{"keyId", base64_encode(key.public_key().spki_sha256())}};
  Json tr = Json::object();
  tr["mediaType"] = "application/vnd.dev.sigstore.trustedroot+json;version=0.1";
  tr["tlogs"] = Json::array({tl});
  st = write_file_atomic(dir + "/trusted_root.json", tr.dump(2) + "\n");
  if (!st) return st.error();
  st = t.write_state(0, empty_root());
  if (!st) return st.error();
  auto cp = t.sign_checkpoint(key);
  if (!cp) return cp.error();
  return t;
}

Result<Tlog> Tlog::open(const std::string& dir) {
  auto meta = read_file(dir + "/log.json", 65536);
  if (!meta) return make_error(SPROV_ERR_LOG, "'%s' is not a log: %s", dir.c_str(), meta.error().message.c_str());
  auto j = parse_json(as_sv(meta.value()), "log.json");
  if (!j) return j.error();
  auto fmt = get_string(j.value(), "format", "log.json");
  if (!fmt) return fmt.error();
  if (fmt.value() != kFormat)
    return make_error(SPROV_ERR_LOG, "log.json format '%s' is not '%s'", fmt.value().substr(0, 64).c_str(), kFormat);
  auto origin = get_string(j.value(), "origin", "log.json");
  if (!origin) return origin.error();
  auto pk = get_base64(j.value(), "publicKey", "log.json");
  if (!pk) return pk.error();
  auto key = PublicKey::from_spki_der(pk.value());
  if (!key) return key.error();
  Tlog t;
  t.dir_ = dir;
  t.info_ = TlogInfo{origin.value(), std::move(key.value())};
  auto state = read_file(dir + "/state", 4096);
  if (!state) return make_error(SPROV_ERR_LOG, "log '%s' has no state: %s", dir.c_str(), state.error().message.c_str());
  std::string_view s = as_sv(state.value());
  auto nl = s.find('\n');
  if (nl == std::string_view::npos || s.back() != '\n')
    return make_error(SPROV_ERR_LOG, "log state file of '%s' is malformed", dir.c_str());
  auto size = parse_u64(s.substr(0, nl), "log state size");
  if (!size) return size.error();
  auto root = base64_decode(s.substr(nl + 1, s.size() - nl - 2), B64Alphabet::kStandard, "log state root");
  if (!root) return root.error();
  auto h = to_hash(root.value(), "log state root");
  if (!h) return h.error();
  t.size_ = size.value();
  t.root_ = h.value();
  return t;
}

Result<std::vector<Hash>> Tlog::read_hash_tile(unsigned level, uint64_t n, uint64_t width) {
  if (width == kTileWidth) {
    auto it = tile_cache_.find({level, n});
    if (it != tile_cache_.end()) return it->second;
  }
  std::vector<std::string> candidates;
  candidates.push_back(dir_ + "/" + tile_path(static_cast<int>(level), n, width));
  if (width < kTileWidth) {
    candidates.push_back(dir_ + "/" + tile_path(static_cast<int>(level), n, kTileWidth));
    for (uint64_t w = width + 1; w < kTileWidth; ++w)
      candidates.push_back(dir_ + "/" + tile_path(static_cast<int>(level), n, w));
  }
  for (const auto& p : candidates) {
    if (!file_exists(p)) continue;
    auto data = read_file(p, kTileWidth * 32);
    if (!data) return data.error();
    if (data.value().size() % 32 != 0 || data.value().size() < width * 32)
      return make_error(SPROV_ERR_LOG, "tile '%s' has %zu bytes, need %llu hashes", p.c_str(),
                        data.value().size(), (unsigned long long)width);
    std::vector<Hash> hs(width);
    for (uint64_t i = 0; i < width; ++i) memcpy(hs[i].data(), data.value().data() + 32 * i, 32);
    if (width == kTileWidth) tile_cache_[{level, n}] = hs;
    return hs;
  }
  return make_error(SPROV_ERR_LOG, "tile '%s' is missing", candidates[0].c_str());
}

Result<std::vector<Bytes>> Tlog::read_entry_bundle(uint64_t n, uint64_t width) {
  std::vector<std::string> candidates{dir_ + "/" + tile_path(-1, n, width)};
  if (width < kTileWidth) {
    candidates.push_back(dir_ + "/" + tile_path(-1, n, kTileWidth));
    for (uint64_t w = width + 1; w < kTileWidth; ++w) candidates.push_back(dir_ + "/" + tile_path(-1, n, w));
  }
  for (const auto& p : candidates) {
    if (!file_exists(p)) continue;
    auto data = read_file(p, kTileWidth * (kMaxEntryBytes + 2));
    if (!data) return data.error();
    std::vector<Bytes> out;
    const Bytes& d = data.value();
    size_t off = 0;
    while (out.size() < width) {
      if (off + 2 > d.size())
        return make_error(SPROV_ERR_LOG, "entry bundle '%s' is truncated at entry %zu", p.c_str(), out.size());
      size_t len = (size_t(d[off]) << 8) | d[off + 1];
      off += 2;
      if (off + len > d.size())
        return make_error(SPROV_ERR_LOG, "entry bundle '%s': entry %zu overruns the file", p.c_str(), out.size());
      out.emplace_back(d.begin() + static_cast<long>(off), d.begin() + static_cast<long>(off + len));
      off += len;
    }
    return out;
  }
  return make_error(SPROV_ERR_LOG, "entry bundle '%s' is missing", candidates[0].c_str());
}

SubtreeHashFn Tlog::subtree_fn(uint64_t tree_size) {
  return [this, tree_size](unsigned h, uint64_t k) -> Result<Hash> {
    unsigned level = h / kTileHeight, r = h % kTileHeight;
    if (level >= kMaxLevels) return make_error(SPROV_ERR_LOG, "subtree height %u out of range", h);
    uint64_t count = tree_size >> (kTileHeight * level);  // hashes stored at this tile level
    uint64_t first = k << r, last = (k + 1) << r;          // [first, last) at this level
    if (last > count)
      return make_error(SPROV_ERR_LOG, "subtree (%u, %llu) is outside a tree of %llu", h,
                        (unsigned long long)k, (unsigned long long)tree_size);
    uint64_t tile = first / kTileWidth;
    uint64_t width = std::min<uint64_t>(kTileWidth, count - tile * kTileWidth);
    auto hs = read_hash_tile(level, tile, width);
    if (!hs) return hs.error();
    std::vector<Hash> v(hs.value().begin() + static_cast<long>(first - tile * kTileWidth),
                        hs.value().begin() + static_cast<long>(last - tile * kTileWidth));
    return perfect_root(std::move(v));
  };
}

Result<Hash> Tlog::root_at(uint64_t n) {
  if (n > size_)
    return make_error(SPROV_ERR_LOG, "size %llu is beyond the log's %llu entries", (unsigned long long)n,
                      (unsigned long long)size_);
  return range_hash(subtree_fn(n), 0, n);
}

Result<uint64_t> Tlog::append(const std::vector<std::string_view>& entries, const SigningKey* checkpoint_key,
                              std::string* note) {
  for (size_t i = 0; i < entries.size(); ++i)
    if (entries[i].empty() || entries[i].size() > kMaxEntryBytes)
      return make_error(SPROV_ERR_LIMIT, "entry %zu is %zu bytes; entries must be 1..%zu bytes", i,
                        entries[i].size(), kMaxEntryBytes);
  if (checkpoint_key)
    if (auto k = check_key(*checkpoint_key); !k) return k.error();
  LockFile lk;
  auto st = lock_log(dir_, lk);
  if (!st) return st.error();
  // Re-read the committed state under the lock (another process may have appended).
  auto fresh = open(dir_);
  if (!fresh) return fresh.error();
  size_ = fresh.value().size_;
  root_ = fresh.value().root_;
  tile_cache_.clear();
  if (entries.empty() && checkpoint_key) {
    auto cp = sign_checkpoint_locked(*checkpoint_key);
    if (!cp) return cp.error();
    if (note) *note = std::move(cp.value());
  }
  if (entries.empty()) return size_;
  const uint64_t n0 = size_, n1 = n0 + entries.size();
  if (n1 < n0) return make_error(SPROV_ERR_LIMIT, "log size would overflow");

  std::set<std::string> dirs;  // directories whose new entries must be fsynced before the commit
  // Entry bundles: the existing partial bundle plus the new entries.
  {
    uint64_t first_tile = n0 / kTileWidth;
    std::vector<Bytes> cur;
    if (n0 % kTileWidth != 0) {
      auto eb = read_entry_bundle(first_tile, n0 % kTileWidth);
      if (!eb) return eb.error();
      cur = std::move(eb.value());
    }
    std::string buf;
    auto flush = [&](uint64_t tile, const std::vector<Bytes>& es) -> Status {
      buf.clear();
      for (const auto& e : es) {
        buf += static_cast<char>(e.size() >> 8);
        buf += static_cast<char>(e.size() & 0xff);
        buf.append(reinterpret_cast<const char*>(e.data()), e.size());
      }
      return write_tile_file(dir_ + "/" + tile_path(-1, tile, es.size()), buf, dirs);
    };
    uint64_t tile = first_tile;
    for (auto e : entries) {
      cur.emplace_back(e.begin(), e.end());
      if (cur.size() == kTileWidth) {
        auto s = flush(tile++, cur);
        if (!s) return s.error();
        cur.clear();
      }
    }
    if (!cur.empty()) {
      auto s = flush(tile, cur);
      if (!s) return s.error();
    }
  }
  // Hash tiles, level by level; full tiles at level L feed level L+1.
  std::vector<Hash> fresh_hashes;
  fresh_hashes.reserve(entries.size());
  for (auto e : entries) fresh_hashes.push_back(leaf_hash(e));
  for (unsigned level = 0; level < kMaxLevels && !fresh_hashes.empty(); ++level) {
    uint64_t c0 = n0 >> (kTileHeight * level);
    uint64_t tile = c0 / kTileWidth;
    std::vector<Hash> cur;
    if (c0 % kTileWidth != 0) {
      auto hs = read_hash_tile(level, tile, c0 % kTileWidth);
      if (!hs) return hs.error();
      cur = std::move(hs.value());
    }
    std::vector<Hash> up;
    for (const auto& h : fresh_hashes) {
      cur.push_back(h);
      if (cur.size() == kTileWidth) {
        auto s = write_tile_file(dir_ + "/" + tile_path(static_cast<int>(level), tile, kTileWidth),
                                 tile_bytes(cur, 0, cur.size()), dirs);
        if (!s) return s.error();
        tile_cache_[{level, tile}] = cur;
        up.push_back(perfect_root(cur));
        ++tile;
        cur.clear();
      }
    }
    if (!cur.empty()) {
      auto s = write_tile_file(dir_ + "/" + tile_path(static_cast<int>(level), tile, cur.size()),
                               tile_bytes(cur, 0, cur.size()), dirs);
      if (!s) return s.error();
    }
    fresh_hashes = std::move(up);
  }
  // Make every rename durable, then commit by replacing DIR/state (itself fsynced).
  for (const auto& d : dirs) {
    int dfd = ::open(d.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) return make_error(-errno, "cannot open directory '%s': %s", d.c_str(), strerror(errno));
    int rc = fsync(dfd);
    int e = errno;
    close(dfd);
    if (rc != 0) return make_error(-e, "fsync of directory '%s' failed: %s", d.c_str(), strerror(e));
  }
  size_ = n1;  // root_at reads tiles at the new size
  auto root = root_at(n1);
  if (!root) {
    size_ = n0;
    return root.error();
  }
  // The checkpoint is signed before the commit: after it, only writing the note is left.
  Result<std::string> signed_note = std::string();
  if (checkpoint_key) {
    signed_note = sign_note(format_checkpoint_text(Checkpoint{info_.origin, n1, root.value(), {}}), info_.origin,
                            *checkpoint_key);
    if (!signed_note) {
      size_ = n0;
      return signed_note.error();
    }
  }
  st = write_state(n1, root.value());
  if (!st) {
    size_ = n0;
    return st.error();
  }
  if (checkpoint_key) {
    st = write_file_atomic(dir_ + "/checkpoint", signed_note.value());
    if (!st) return st.error();
    if (note) *note = std::move(signed_note.value());
  }
  return n0;
}

Status Tlog::check_key(const SigningKey& key, const std::string& key_name) const {
  if (key.public_key().spki_der() != info_.key.spki_der())
    return make_error(SPROV_ERR_KEY, "%s%s%skey %s is not the key of log '%s' (%s)", key_name.empty() ? "" : "'",
                      key_name.c_str(), key_name.empty() ? "" : "': ", key.public_key().key_id_hex().c_str(),
                      info_.origin.c_str(), info_.key.key_id_hex().c_str());
  return {};
}

Result<std::string> Tlog::sign_checkpoint(const SigningKey& key) {
  if (auto k = check_key(key); !k) return k.error();
  LockFile lk;
  auto st = lock_log(dir_, lk);
  if (!st) return st.error();
  auto fresh = open(dir_);
  if (!fresh) return fresh.error();
  size_ = fresh.value().size_;
  root_ = fresh.value().root_;
  return sign_checkpoint_locked(key);
}

Result<std::string> Tlog::sign_checkpoint_locked(const SigningKey& key) {
  Checkpoint cp{info_.origin, size_, root_, {}};
  auto note = sign_note(format_checkpoint_text(cp), info_.origin, key);
  if (!note) return note.error();
  auto st = write_file_atomic(dir_ + "/checkpoint", note.value());
  if (!st) return st.error();
  return note;
}

Result<VerifiedCheckpoint> Tlog::checkpoint() const {
  auto data = read_file(dir_ + "/checkpoint", kMaxNoteBytes);
  if (!data) return data.error();
  // Re-verify only when the stored note changed (a signature check costs ~1 ms with mbedTLS).
  if (checkpoint_cache_ && as_sv(data.value()) == checkpoint_cache_->note) return *checkpoint_cache_;
  auto v = verify_checkpoint(as_sv(data.value()), verifier(), info_.origin);
  if (v) checkpoint_cache_ = v.value();
  return v;
}

Result<TlogProof> Tlog::prove(uint64_t index) {
  auto cp = checkpoint();
  if (!cp) return cp.error();
  uint64_t n = cp.value().checkpoint.size;
  if (index >= n)
    return make_error(SPROV_ERR_LOG, "index %llu is not covered by the checkpoint of size %llu%s",
                      (unsigned long long)index, (unsigned long long)n,
                      index < size_ ? " (run 'log checkpoint' first)" : "");
  if (n > size_) return make_error(SPROV_ERR_LOG, "checkpoint size %llu is ahead of the log state %llu", (unsigned long long)n, (unsigned long long)size_);
  auto path = inclusion_proof(subtree_fn(n), index, n);
  if (!path) return path.error();
  TlogProof p;
  p.index = index;
  p.hashes = std::move(path.value());
  p.checkpoint = cp.value().note;
  return p;
}

Status Tlog::export_fragment(uint64_t index, const std::string& out_dir) {
  auto cp = checkpoint();
  if (!cp) return cp.error();
  uint64_t n = cp.value().checkpoint.size;
  if (index >= n)
    return make_error(SPROV_ERR_LOG, "index %llu is not covered by the checkpoint of size %llu",
                      (unsigned long long)index, (unsigned long long)n);
  std::set<std::string> dirs;
  for (unsigned level = 0; level < kMaxLevels; ++level) {
    uint64_t count = n >> (kTileHeight * level);
    if (count == 0) break;
    std::set<uint64_t> tiles{(index >> (kTileHeight * level)) / kTileWidth, (count - 1) / kTileWidth};
    for (uint64_t t : tiles) {
      uint64_t width = std::min<uint64_t>(kTileWidth, count - t * kTileWidth);
      auto hs = read_hash_tile(level, t, width);
      if (!hs) return hs.error();
      auto st = write_tile_file(out_dir + "/" + tile_path(static_cast<int>(level), t, width),
                                tile_bytes(hs.value(), 0, hs.value().size()), dirs);
      if (!st) return st;
    }
  }
  auto st = write_file_atomic(out_dir + "/checkpoint", cp.value().note);
  if (!st) return st;
  return write_file_atomic(out_dir + "/fragment",
                           "c2sp.org/stackprov-tile-fragment@v1\nindex " + std::to_string(index) + "\n");
}

Result<std::vector<Hash>> Tlog::proof_from_tiles(const std::string& dir, uint64_t index, uint64_t size) {
  Tlog t;
  t.dir_ = dir;
  t.size_ = size;
  return inclusion_proof(t.subtree_fn(size), index, size);
}

Status verify_tile_fragment(const std::string& dir, std::string_view entry, const PublicKey& key,
                            const std::string& origin) {
  auto frag = read_file(dir + "/fragment", 4096);
  if (!frag) return make_error(frag.error().code, "fragment: %s", frag.error().message.c_str());
  std::string_view f = as_sv(frag.value());
  constexpr std::string_view kHead = "c2sp.org/stackprov-tile-fragment@v1\nindex ";
  if (f.substr(0, kHead.size()) != kHead || f.back() != '\n')
    return make_error(SPROV_ERR_PROOF, "fragment: '%s/fragment' is not a stackprov tile fragment", dir.c_str());
  auto index = parse_u64(f.substr(kHead.size(), f.size() - kHead.size() - 1), "fragment index");
  if (!index) return make_error(SPROV_ERR_PROOF, "fragment: %s", index.error().message.c_str());
  auto note = read_file(dir + "/checkpoint", kMaxNoteBytes);
  if (!note) return make_error(note.error().code, "fragment: %s", note.error().message.c_str());
  auto cp = verify_checkpoint(as_sv(note.value()), make_note_verifier(origin, key), origin);
  if (!cp) return make_error(SPROV_ERR_CHECKPOINT, "checkpoint-signature: %s", cp.error().message.c_str());
  const auto& c = cp.value().checkpoint;
  if (index.value() >= c.size)
    return make_error(SPROV_ERR_PROOF, "fragment: index %llu is not below the checkpoint size %llu",
                      (unsigned long long)index.value(), (unsigned long long)c.size);
  auto proof = Tlog::proof_from_tiles(dir, index.value(), c.size);
  if (!proof) return make_error(SPROV_ERR_PROOF, "fragment: %s", proof.error().message.c_str());
  auto st = verify_inclusion(index.value(), c.size, leaf_hash(entry), proof.value(), c.root);
  if (!st) return make_error(SPROV_ERR_PROOF, "inclusion-proof: %s", st.error().message.c_str());
  return {};
}

Result<std::vector<Hash>> Tlog::consistency(uint64_t old_size, uint64_t new_size) {
  if (new_size > size_ || old_size > new_size)
    return make_error(SPROV_ERR_LOG, "consistency %llu -> %llu is invalid for a log of %llu",
                      (unsigned long long)old_size, (unsigned long long)new_size, (unsigned long long)size_);
  return consistency_proof(subtree_fn(new_size), old_size, new_size);
}

Result<Bytes> Tlog::entry(uint64_t index) {
  if (index >= size_)
    return make_error(SPROV_ERR_NOT_FOUND, "index %llu is beyond the log's %llu entries",
                      (unsigned long long)index, (unsigned long long)size_);
  uint64_t tile = index / kTileWidth;
  uint64_t width = std::min<uint64_t>(kTileWidth, size_ - tile * kTileWidth);
  auto eb = read_entry_bundle(tile, width);
  if (!eb) return eb.error();
  return std::move(eb.value()[index % kTileWidth]);
}

Result<std::optional<uint64_t>> Tlog::find(std::string_view data) {
  for (uint64_t tile = 0; tile * kTileWidth < size_; ++tile) {
    uint64_t width = std::min<uint64_t>(kTileWidth, size_ - tile * kTileWidth);
    auto eb = read_entry_bundle(tile, width);
    if (!eb) return eb.error();
    for (size_t i = 0; i < eb.value().size(); ++i)
      if (as_sv(eb.value()[i]) == data) return std::optional<uint64_t>(tile * kTileWidth + i);
  }
  return std::optional<uint64_t>();
}

Status Tlog::fsck() {
  tile_cache_.clear();
  // Level-0 hashes must be the leaf hashes of the entries.
  for (uint64_t tile = 0; tile * kTileWidth < size_; ++tile) {
    uint64_t width = std::min<uint64_t>(kTileWidth, size_ - tile * kTileWidth);
    auto eb = read_entry_bundle(tile, width);
    if (!eb) return eb.error();
    auto hs = read_hash_tile(0, tile, width);
    if (!hs) return hs.error();
    for (uint64_t i = 0; i < width; ++i)
      if (leaf_hash(eb.value()[i].data(), eb.value()[i].size()) != hs.value()[i])
        return make_error(SPROV_ERR_LOG, "entry %llu does not match its level-0 tile hash",
                          (unsigned long long)(tile * kTileWidth + i));
  }
  // Higher levels must be the roots of the full tiles below.
  for (unsigned level = 1; level < kMaxLevels; ++level) {
    uint64_t count = size_ >> (kTileHeight * level);
    if (count == 0) break;
    for (uint64_t i = 0; i < count; ++i) {
      uint64_t tile = i / kTileWidth;
      auto hs = read_hash_tile(level, tile, std::min<uint64_t>(kTileWidth, count - tile * kTileWidth));
      if (!hs) return hs.error();
      auto below = read_hash_tile(level - 1, i, kTileWidth);
      if (!below) return below.error();
      if (perfect_root(below.value()) != hs.value()[i % kTileWidth])
        return make_error(SPROV_ERR_LOG, "tile level %u hash %llu is not the root of the tile below", level,
                          (unsigned long long)i);
    }
  }
  auto r = root_at(size_);
  if (!r) return r.error();
  if (r.value() != root_)
    return make_error(SPROV_ERR_LOG, "root from tiles %s != committed root %s", hex_encode(r.value()).c_str(),
                      hex_encode(root_).c_str());
  auto cp = checkpoint();
  if (!cp) return cp.error();
  const auto& c = cp.value().checkpoint;
  if (c.size > size_)
    return make_error(SPROV_ERR_LOG, "checkpoint size %llu is beyond the committed size %llu",
                      (unsigned long long)c.size, (unsigned long long)size_);
  auto cr = root_at(c.size);
  if (!cr) return cr.error();
  if (cr.value() != c.root)
    return make_error(SPROV_ERR_LOG, "checkpoint root %s != root of the first %llu entries %s",
                      hex_encode(c.root).c_str(), (unsigned long long)c.size, hex_encode(cr.value()).c_str());
  return {};
}

}  // namespace stackprov::evidence
