// SPDX-License-Identifier: Apache-2.0
// perf.data's records read once in file order and handed out in time order, round by round (record_stream.hpp).
#include "perf/record_stream.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace stackprov::perf {

RecordStream::RecordStream(const PerfData& pd, Order (*order)(uint32_t type), Limits limits)
    : pd_(pd), order_(order), limits_(limits), fd_(pd.source().fd()), mem_(pd.source().bytes()), off_(pd.data_offset()),
      end_(pd.data_end()), cut_(pd.truncation()) {
  cut_.partial_bytes = 0;
}

bool RecordStream::fall_back(std::string why) {
  state_ = State::kFallback;
  why_ = std::move(why);
  return false;
}

void RecordStream::release(uint32_t chunk) {
  if (chunk == kNoChunk) return;
  Chunk& c = chunks_[chunk];
  if (c.live > 0) c.live--;
  if (c.live == 0 && chunk != cur_ && c.used) {
    c.used = false;
    held_ -= c.buf.size();
    free_.push_back(chunk);
  }
}

const uint8_t* RecordStream::fetch(uint64_t off, size_t n, uint32_t* chunk) {
  *chunk = kNoChunk;
  if (fd_ < 0) return mem_ + off;  // within the file: end_ is
  if (cur_ != kNoChunk) {
    const Chunk& c = chunks_[cur_];
    if (off >= c.off && off - c.off <= c.len && n <= c.len - (off - c.off)) {
      *chunk = cur_;
      return c.buf.data() + (off - c.off);
    }
    const uint32_t old = cur_;
    cur_ = kNoChunk;
    chunks_[old].live++;  // release() frees it when nothing it holds is left
    release(old);
  }
  uint32_t id;
  if (!free_.empty()) {
    id = free_.back();
    free_.pop_back();
  } else {
    id = static_cast<uint32_t>(chunks_.size());
    chunks_.emplace_back();
  }
  Chunk& c = chunks_[id];
  if (c.buf.size() < kChunkBytes) c.buf.resize(kChunkBytes);
  c.used = true;
  c.live = 0;
  held_ += c.buf.size();
  held_peak_ = std::max(held_peak_, held_);
  cur_ = id;
  // The chunk starts at the record: the tail of the last chunk (part of this record) is read again.
  const size_t want = static_cast<size_t>(std::min<uint64_t>(kChunkBytes, end_ - off));
  size_t have = 0;
  while (have < want) {
    const ssize_t r = pread(fd_, c.buf.data() + have, want - have, static_cast<off_t>(off + have));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    have += static_cast<size_t>(r);
  }
  read_ += have;
  c.off = off;
  c.len = have;
  if (have < n) return nullptr;
  *chunk = id;
  return c.buf.data();
}

namespace {
/// The min-heap order of held records: the latest (time, file offset) at the bottom.
bool later(const RecordRef& a, const RecordRef& b) { return a.time != b.time ? a.time > b.time : a.offset > b.offset; }
}  // namespace

void RecordStream::commit(uint64_t watermark) {
  // Each record is pushed once and popped once: O(log n) each, however many rounds there are.
  auto cmp = [](const Entry& a, const Entry& b) { return later(a.ref, b.ref); };
  ready_.clear();
  ready_at_ = 0;
  while (!pending_.empty() && pending_.front().ref.time <= watermark) {
    std::pop_heap(pending_.begin(), pending_.end(), cmp);
    ready_.push_back(pending_.back());
    pending_.pop_back();
  }
  if (!ready_.empty()) {
    handed_max_ = std::max(handed_max_, ready_.back().ref.time);
    any_ready_ = true;
  }
}

bool RecordStream::read_until_ready() {
  while (ready_at_ >= ready_.size() && as_read_.empty()) {
    if (at_end_) {
      if (pending_.empty()) {
        state_ = State::kEnd;
        return false;
      }
      commit(UINT64_MAX);
      continue;
    }
    if (off_ >= end_) {
      at_end_ = true;
      continue;
    }
    uint32_t chunk = kNoChunk;
    const uint8_t* head = end_ - off_ >= 8 ? fetch(off_, 8, &chunk) : nullptr;
    if (end_ - off_ >= 8 && head == nullptr)
      return fall_back("perf.data: record header at 0x" + std::to_string(off_) + " could not be read");
    RecordRef r;
    auto h = walk_head(head, off_, end_, &cut_, &r);
    if (!h.ok()) return fall_back(h.error().message);
    if (h.value() == WalkStep::kCut) {
      at_end_ = true;
      continue;
    }
    const uint8_t* rec = fetch(off_, r.size, &chunk);
    if (rec == nullptr) return fall_back("perf.data: record at 0x" + std::to_string(off_) + " could not be read");
    uint64_t step = 0;
    auto w = walk_step(rec, r, end_, &cut_, &step);
    if (!w.ok()) return fall_back(w.error().message);
    if (w.value() == WalkStep::kCut) {
      at_end_ = true;
      continue;
    }
    if (records_ >= kMaxRecords) return fall_back("perf.data: more than " + std::to_string(kMaxRecords) + " records");
    records_++;
    off_ += step;
    if (r.type == kRecordFinishedRound) {  // perf's OE_FLUSH__ROUND: up to the round before's latest time
      commit(prev_round_max_);
      prev_round_max_ = max_seen_;
      continue;
    }
    const Order order = order_(r.type);
    if (order == Order::kSkip) continue;
    Entry e{r, chunk};
    e.ref.time = pd_.decoder().record_time(rec, r.size);  // as index_fields; a sample decoded when handed out
    if (order == Order::kAsRead) {
      if (chunk != kNoChunk) chunks_[chunk].live++;
      as_read_.push_back(e);
      continue;
    }
    if (any_ready_ && e.ref.time < handed_max_)
      return fall_back("perf.data: the record at 0x" + std::to_string(e.ref.offset) + " (time " +
                       std::to_string(e.ref.time) + ") is older than one handed out (time " +
                       std::to_string(handed_max_) + "): its round is out of order");
    if (pending_.size() >= limits_.held_records)
      return fall_back("perf.data: more than " + std::to_string(limits_.held_records) +
                       " records held waiting for their round (no FINISHED_ROUND records, or rounds that large)");
    if (held_ > limits_.held_bytes)
      return fall_back("perf.data: " + std::to_string(held_) + " bytes of records held waiting for their round exceed the cap of " +
                       std::to_string(limits_.held_bytes) + " (no FINISHED_ROUND records, or rounds that large)");
    if (chunk != kNoChunk) chunks_[chunk].live++;
    max_seen_ = std::max(max_seen_, e.ref.time);
    pending_.push_back(e);
    std::push_heap(pending_.begin(), pending_.end(), [](const Entry& a, const Entry& b) { return later(a.ref, b.ref); });
  }
  return true;
}

bool RecordStream::next(StreamRecord* out) {
  if (state_ != State::kReading) return false;
  release(last_);
  last_ = kNoChunk;
  if (!read_until_ready()) return false;
  const bool as_read = !as_read_.empty();
  const Entry e = as_read ? as_read_.back() : ready_[ready_at_++];
  if (as_read) as_read_.pop_back();
  last_ = e.chunk;
  out->ref = e.ref;
  if (e.chunk == kNoChunk) {
    out->bytes = mem_ + e.ref.offset;
  } else {
    const Chunk& c = chunks_[e.chunk];
    out->bytes = c.buf.data() + (e.ref.offset - c.off);
  }
  // A sample's pid and tid, as index_fields gives them, from the one decode its reader uses too.
  out->decoded = out->ref.type == kRecordSample && pd_.decoder().decode_sample(out->bytes, out->ref.size, &out->sample).ok();
  out->refused = out->ref.type == kRecordSample && !out->decoded;
  if (out->decoded) {
    out->ref.pid = out->sample.pid;
    out->ref.tid = out->sample.tid;
  }
  return true;
}

}  // namespace stackprov::perf
