// SPDX-License-Identifier: Apache-2.0
// The module-source chain: vDSO, offline bundle, file of any format, bundle instead, memory image.
#include "pipeline/module_source.hpp"

#include <elf.h>
#include <xxhash.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "bundle/format.hpp"
#include "elf/core_file.hpp"
#include "memory/module_list.hpp"
#include "object/object_image.hpp"
#include "symbolize/bundle_store.hpp"

namespace stackprov::pipeline {

Result<ModuleBundle> find_module_bundle(const ContextConfig& cfg, const memory::SnapshotModule& m) {
  if (!cfg.has_bundle_store)
    return make_error(SPROV_ERR_NOT_FOUND, "module %s: no bundle store configured", m.path.c_str());
  if (m.build_id.empty())
    return make_error(SPROV_ERR_NOT_FOUND, "module %s has no build-id in the snapshot: no bundle can be looked up",
                      m.path.c_str());
  auto store = symbolize::BundleStore::open(cfg.bundle_store, false);
  if (!store.ok()) return make_error(store.error().code, "module %s: %s", m.path.c_str(), store.error().message.c_str());
  auto digest = store.value().find(m.build_id.kind, {m.build_id.bytes, m.build_id.len});
  if (!digest.ok()) return make_error(digest.error().code, "module %s: %s", m.path.c_str(), digest.error().message.c_str());
  if (!digest.value())
    return make_error(SPROV_ERR_NOT_FOUND, "module %s (build-id %s): no bundle in store %s", m.path.c_str(),
                      m.build_id.hex().c_str(), store.value().dir().c_str());
  auto path = store.value().blob_path(*digest.value());
  if (!path.ok()) return make_error(path.error().code, "module %s: %s", m.path.c_str(), path.error().message.c_str());
  ModuleBundle out;
  out.digest = *digest.value();
  out.path = path.value();
  out.store_dir = store.value().dir();
  return out;
}

namespace {

/// A module backed by its bundle's unwind rows (no file opened). The bundle must
/// hold a module with exactly the snapshot's build-id.
Result<std::shared_ptr<unwind::LoadedModule>> load_from_bundle(ModuleSources& src_ctx, const memory::Snapshot* snap,
                                                               const memory::SnapshotModule& m) {
  auto hit = find_module_bundle(src_ctx.config, m);
  if (!hit.ok()) return std::move(hit).error();
  auto reader = bundle::BundleReader::open_file(hit.value().path);
  if (!reader.ok())
    return make_error(reader.error().code, "module %s: bundle %s: %s", m.path.c_str(), hit.value().digest.c_str(),
                      reader.error().message.c_str());
  auto rd = std::make_shared<const bundle::BundleReader>(std::move(reader).value());
  const bundle::ModuleView* mv = rd->find_module(m.build_id.kind, {m.build_id.bytes, m.build_id.len});
  if (mv == nullptr) {
    std::string ids;
    for (const bundle::ModuleView& v : rd->modules()) {
      if (ids.size() > 200) break;
      ids += (ids.empty() ? "" : ", ") + ModuleId::from_bytes(v.id.data(), v.id.size()).hex();
    }
    return make_error(SPROV_ERR_BUILD_ID_MISMATCH,
                      "module %s has build-id %s, but bundle %s (named for it by store %s) holds build-ids %s",
                      m.path.c_str(), m.build_id.hex().c_str(), hit.value().digest.c_str(),
                      hit.value().store_dir.c_str(), ids.empty() ? "none" : ids.c_str());
  }
  unwind::LoadedModule::BundleSource src;
  src.reader = rd;
  src.index = mv->index;
  src.digest = hit.value().digest;
  src_ctx.loaded++;
  return unwind::LoadedModule::load_bundle(std::move(src), snap ? snap->arch : Arch::kUnknown,
                                           snap ? snap->endian == Endian::kBig : false);
}

/// Where a module described from a process's memory (no file that is the one mapped) may have its
/// ELF header in the snapshot's memory, for elf::rebuild_image: at its load bias (a shared object
/// or PIE whose first segment is at 0), else at the start of a region below the module's start,
/// within 1 GiB, that begins with the ELF magic and is not the vDSO's. At most 4 places; none when
/// the capture kept no image.
std::vector<uint64_t> memory_image_starts(const memory::Snapshot& snap, const memory::SnapshotModule& m) {
  std::vector<uint64_t> out;
  auto vdso = [&](uint64_t a) {
    for (const memory::SnapshotModule& o : snap.modules)
      if (o.path == kVdsoName && a >= o.start && a < o.end) return true;
    return false;
  };
  memory::SnapshotReader rd(snap);
  uint8_t magic[SELFMAG];
  if (!vdso(m.load_bias) && rd.read(m.load_bias, magic, SELFMAG) && std::memcmp(magic, ELFMAG, SELFMAG) == 0)
    out.push_back(m.load_bias);
  for (size_t i = snap.memory.size(); i-- > 0 && out.size() < 4;) {
    const memory::MemoryRegion& r = snap.memory[i];
    if (r.addr > m.start || m.start - r.addr > (uint64_t{1} << 30)) continue;
    if (r.addr == m.load_bias || r.size() < SELFMAG || vdso(r.addr)) continue;
    if (std::memcmp(r.data(), ELFMAG, SELFMAG) == 0) out.push_back(r.addr);
  }
  return out;
}

/// The module's image rebuilt from the read-only segments the capture kept in the snapshot
/// (memory::memory_image_regions); a segment the snapshot does not hold whole (its code) keeps no
/// file bytes. It must carry the module's build-id.
Result<std::shared_ptr<object::ObjectImage>> image_from_memory(const memory::Snapshot& snap,
                                                               const memory::SnapshotModule& m,
                                                               const std::vector<uint64_t>& starts) {
  memory::SnapshotReader rd(snap);
  auto read = [&rd](uint64_t addr, void* buf, size_t len) { return rd.read(addr, buf, len); };
  std::string first;  // why the first place failed
  for (uint64_t start : starts) {
    auto bytes = elf::rebuild_image(start, read, memory::kMaxMemoryImage);
    Result<std::shared_ptr<object::ObjectImage>> img =
        bytes.ok() ? object::from_bytes(std::move(bytes).value(), m.path + " (rebuilt from the process's memory)")
                   : Result<std::shared_ptr<object::ObjectImage>>(bytes.error());
    if (img.ok() && img.value()->id() == m.build_id) return img;
    if (first.empty()) {
      char at[64];
      std::snprintf(at, sizeof at, "the image at 0x%llx: ", static_cast<unsigned long long>(start));
      first = std::string(at) + (img.ok() ? "build-id " + img.value()->id().hex() : img.error().message);
    }
  }
  return make_error(SPROV_ERR_NOT_FOUND, "module %s: no image with its build-id in the snapshot's memory (%s)",
                    m.path.c_str(), first.empty() ? "none kept" : first.c_str());
}

}  // namespace

Result<std::shared_ptr<unwind::LoadedModule>> acquire_module(ModuleSources& ctx, const memory::Snapshot* snap,
                                                             const memory::SnapshotModule& m,
                                                             const std::string& module_root) {
  object::DebugFileOptions dopts;
  dopts.debug_dirs = ctx.config.debug_dirs;
  dopts.sysroot = ctx.config.sysroot;
  // The vDSO (and any module given as memory) is parsed from the snapshot's bytes.
  if (m.path == kVdsoName) {
    ModuleKey key;
    key.source = ModuleKey::kMemory;
    key.build_id = m.build_id;
    auto loader = [&]() -> Result<std::shared_ptr<unwind::LoadedModule>> {
      std::vector<uint8_t> bytes;  // sized after the size check: a hostile snapshot's [vdso] may claim GiBs
      if (m.end - m.start <= (64u << 20)) bytes.resize(m.end - m.start);
      if (snap == nullptr || bytes.empty() || !memory::SnapshotReader(*snap).read(m.start, bytes.data(), bytes.size()))
        return make_error(SPROV_ERR_NOT_FOUND, "[vdso] at 0x%llx: bytes not in the snapshot",
                          static_cast<unsigned long long>(m.start));
      auto img = object::from_bytes(std::move(bytes), std::string(kVdsoName));
      if (!img.ok()) return std::move(img).error();
      if (!m.build_id.empty() && img.value()->id() != m.build_id)
        return make_error(SPROV_ERR_BUILD_ID_MISMATCH, "[vdso] at 0x%llx has build-id %s, the module list says %s",
                          static_cast<unsigned long long>(m.start), img.value()->id().hex().c_str(),
                          m.build_id.hex().c_str());
      ctx.loaded++;
      return unwind::LoadedModule::load(img.value(), dopts);
    };
    if (key.build_id.empty()) return loader();
    return ctx.cache.acquire(key, loader);
  }
  // A module described from the process's memory, without a file or bundle of it: its image
  // rebuilt from the snapshot's copy of its read-only segments, cached by build-id and the rebuilt
  // bytes' hash (a target's image never stands for another's, nor for a file, a bundle or a
  // vDSO). Only with a snapshot: a symbolizer names such frames with the module its walk used
  // (sprov_stack::loaded). Otherwise `e` as it is.
  auto memory_instead = [&](const Error& e) -> Result<std::shared_ptr<unwind::LoadedModule>> {
    if (m.file.known() || m.build_id.empty() || snap == nullptr) return e;
    const std::vector<uint64_t> starts = memory_image_starts(*snap, m);
    if (starts.empty()) return e;
    auto img = image_from_memory(*snap, m, starts);
    if (!img.ok()) return make_error(e.code, "%s; %s", e.message.c_str(), img.error().message.c_str());
    ModuleKey mkey;
    mkey.source = ModuleKey::kMemoryImage;
    mkey.build_id = m.build_id;
    mkey.inode = XXH3_64bits(img.value()->file_bytes().data(), img.value()->file_bytes().size());
    return ctx.cache.acquire(mkey, [&]() -> Result<std::shared_ptr<unwind::LoadedModule>> {
      ctx.loaded++;
      return unwind::LoadedModule::load(img.value(), dopts);
    });
  };
  // Offline: the module file is never opened; its bundle (by build-id) is the module.
  if (ctx.config.offline) {
    if (m.build_id.empty())
      return make_error(SPROV_ERR_NOT_FOUND, "module %s has no build-id in the snapshot: offline, no bundle can be "
                        "looked up", m.path.c_str());
    ModuleKey key;
    key.source = ModuleKey::kBundle;
    key.build_id = m.build_id;
    auto b = ctx.cache.acquire(key, [&] { return load_from_bundle(ctx, snap, m); });
    if (b.ok()) return b;
    return memory_instead(b.error());
  }
  const std::string host = !m.open_path.empty()     ? m.open_path
                           : !module_root.empty() ? join_root(module_root, m.path)
                                                  : ctx.host_path(m.path);
  // The file the capture read (its identity recorded then): the cache answers without a stat,
  // after the target has exited too. On a miss, and for modules without a recorded identity, the
  // file the path names now, keyed by its own identity (a file that replaced the captured one is
  // used only with the captured build-id, and never under the captured identity); without a
  // build-id, only the captured file itself.
  Result<ModuleKey> key = ModuleKey{};
  if (m.file.known()) {
    key.value().build_id = m.build_id;
    key.value().dev = m.file.dev;
    key.value().inode = m.file.ino;
    key.value().mtime_ns = m.file.mtime_ns;
  }
  if (!m.file.known() || (!m.build_id.empty() && !ctx.cache.contains(key.value())))
    key = module_key_for_file(host, m.build_id);
  // With a bundle store, the module's bundle (by build-id) instead of a file that failed.
  auto bundle_instead = [&](const Error& file_error) -> Result<std::shared_ptr<unwind::LoadedModule>> {
    ModuleKey bkey;
    bkey.source = ModuleKey::kBundle;
    bkey.build_id = m.build_id;
    auto b = ctx.cache.acquire(bkey, [&] { return load_from_bundle(ctx, snap, m); });
    if (b.ok()) return b;
    return memory_instead(Error{file_error.code, file_error.message + "; " + b.error().message});
  };
  const bool bundles = ctx.config.has_bundle_store && !m.build_id.empty();
  if (!key.ok()) {
    // A missing file with a bundle store configured: the module's bundle instead (by build-id).
    const int code = key.error().code;
    if ((code == -ENOENT || code == -ENOTDIR) && bundles) return bundle_instead(key.error());
    return memory_instead(key.error());
  }
  auto loaded = ctx.cache.acquire(key.value(), [&]() -> Result<std::shared_ptr<unwind::LoadedModule>> {
    auto img = object::open_matching(host, snap ? snap->arch : Arch::kUnknown, m.build_id);  // any registered format; a fat file: the slice
    if (!img.ok() && (img.error().code == -ENOENT || img.error().code == -ENOTDIR) &&
        ctx.config.has_bundle_store && !m.build_id.empty()) {
      auto b = load_from_bundle(ctx, snap, m);
      if (b.ok()) return b;
      return make_error(img.error().code, "%s; %s", img.error().message.c_str(), b.error().message.c_str());
    }
    if (!img.ok()) return std::move(img).error();
    // The file opened must be the file keyed: the path may name another one by now, and its
    // rules would be cached under the first file's identity.
    const FileIdentity* fid = img.value()->file_identity();
    const ModuleKey& k = key.value();
    if (fid == nullptr || fid->dev != k.dev || fid->ino != k.inode || fid->mtime_ns != k.mtime_ns)
      return make_error(SPROV_ERR_IO, "%s is no longer the file %s (it was replaced)", host.c_str(),
                        m.file.known() && m.build_id.empty() ? "captured" : "being opened");
    if (!m.build_id.empty() && img.value()->id() != m.build_id)
      return make_error(SPROV_ERR_BUILD_ID_MISMATCH, "%s: file has build-id %s, not the module's %s",
                        host.c_str(), img.value()->id().hex().c_str(), m.build_id.hex().c_str());
    ctx.loaded++;
    return unwind::LoadedModule::load(img.value(), dopts);
  });
  // The file at the path is another build (replaced since the capture, or the capture read the
  // mapped file's build-id from memory): the bundle of the build-id captured, when a store is set.
  if (!loaded.ok() && loaded.error().code == SPROV_ERR_BUILD_ID_MISMATCH && bundles)
    return bundle_instead(loaded.error());
  if (!loaded.ok()) return memory_instead(loaded.error());
  return loaded;
}

}  // namespace stackprov::pipeline
