// SPDX-License-Identifier: Apache-2.0
// pprof profile.proto output: the aggregated stacks as perftools.profiles.Profile, gzip-compressed with zlib.
#include "pprof_writer.hpp"

#include <zlib.h>

#include <map>
#include <unordered_map>

#include "profile.pb.h"

namespace stackprov_cli {

namespace {

class Strings {
 public:
  explicit Strings(perftools::profiles::Profile* p) : p_(p) { id(""); }
  int64_t id(const std::string& s) {
    auto [it, fresh] = ids_.emplace(s, static_cast<int64_t>(ids_.size()));
    if (fresh) p_->add_string_table(s);
    return it->second;
  }

 private:
  perftools::profiles::Profile* p_;
  std::unordered_map<std::string, int64_t> ids_;
};

bool gzip_write(FILE* f, const std::string& data, std::string* err) {
  z_stream zs{};
  if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    *err = "deflateInit2 failed";
    return false;
  }
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  zs.avail_in = static_cast<uInt>(data.size());
  unsigned char buf[65536];
  int zr;
  do {
    zs.next_out = buf;
    zs.avail_out = sizeof(buf);
    zr = deflate(&zs, Z_FINISH);
    if (zr == Z_STREAM_ERROR) break;
    const size_t n = sizeof(buf) - zs.avail_out;
    if (n && fwrite(buf, 1, n, f) != n) {
      deflateEnd(&zs);
      *err = "write failed";
      return false;
    }
  } while (zr != Z_STREAM_END);
  deflateEnd(&zs);
  if (zr != Z_STREAM_END) {
    *err = "deflate failed";
    return false;
  }
  return true;
}

}  // namespace

bool write_pprof(FILE* f, const StackAggregator& agg, const std::vector<std::string>& comms,
                 const std::vector<std::string>& names, const std::vector<std::string>& linkage,
                 const std::vector<PprofMapping>& mappings, const PprofLocations& locations, const PprofMeta& meta,
                 std::string* err) {
  perftools::profiles::Profile prof;
  Strings st(&prof);
  auto* vt = prof.add_sample_type();
  vt->set_type(st.id("samples"));
  vt->set_unit(st.id("count"));
  vt = prof.add_sample_type();
  vt->set_type(st.id(meta.value_type));
  vt->set_unit(st.id(meta.value_unit));
  prof.mutable_period_type()->set_type(st.id(meta.value_type));
  prof.mutable_period_type()->set_unit(st.id(meta.value_unit));
  prof.set_period(meta.period);
  prof.set_default_sample_type(st.id(meta.value_type));
  for (const std::string& c : meta.comments) prof.add_comment(st.id(c));
  for (size_t i = 0; i < mappings.size(); i++) {
    const auto& m = mappings[i];
    auto* pm = prof.add_mapping();
    pm->set_id(i + 1);
    pm->set_memory_start(m.start);
    pm->set_memory_limit(m.limit);
    pm->set_file_offset(m.file_offset);
    pm->set_filename(st.id(m.filename));
    pm->set_build_id(st.id(m.build_id));
    pm->set_has_functions(true);
    pm->set_has_filenames(m.lines);
    pm->set_has_line_numbers(m.lines);
    pm->set_has_inline_frames(m.lines);
  }
  std::map<std::pair<std::string, std::string>, uint64_t> func_ids;  // (name, file) -> id
  auto function = [&](const PprofLine& l) {
    auto [it, fresh] = func_ids.emplace(std::make_pair(l.function, l.filename), func_ids.size() + 1);
    if (fresh) {
      auto* fn = prof.add_function();
      fn->set_id(it->second);
      fn->set_name(st.id(l.function));
      fn->set_system_name(st.id(l.system_name.empty() ? l.function : l.system_name));
      fn->set_filename(st.id(l.filename));
      fn->set_start_line(l.start_line);
    }
    return it->second;
  };
  std::map<std::pair<uint64_t, uint32_t>, uint64_t> loc_ids;
  const int64_t comm_key = st.id("comm");
  for (const auto& e : agg.entries()) {
    auto* s = prof.add_sample();
    s->add_value(static_cast<int64_t>(e.count));
    s->add_value(static_cast<int64_t>(e.period));
    auto* l = s->add_label();
    l->set_key(comm_key);
    l->set_str(st.id(e.comm < comms.size() ? comms[e.comm] : "[unknown]"));
    for (size_t i = 0; i < e.pcs.size(); i++) {
      const uint64_t pc = e.pcs[i];
      const uint32_t name = e.names[i];
      auto [it, fresh] = loc_ids.emplace(std::make_pair(pc, name), loc_ids.size() + 1);
      if (fresh) {
        auto* loc = prof.add_location();
        loc->set_id(it->second);
        loc->set_address(pc);
        auto li = locations.find(it->first);
        if (li != locations.end() && li->second.mapping != 0) loc->set_mapping_id(li->second.mapping);
        if (li != locations.end() && !li->second.lines.empty()) {
          for (const PprofLine& pl : li->second.lines) {
            auto* line = loc->add_line();
            line->set_function_id(function(pl));
            line->set_line(pl.line);
          }
        } else {
          PprofLine pl;
          pl.function = names[name];
          pl.system_name = name < linkage.size() ? linkage[name] : "";
          loc->add_line()->set_function_id(function(pl));
        }
      }
      s->add_location_id(it->second);
    }
  }
  std::string data;
  if (!prof.SerializeToString(&data)) {
    *err = "protobuf serialization failed";
    return false;
  }
  return gzip_write(f, data, err);
}

}  // namespace stackprov_cli
