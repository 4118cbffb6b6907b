// SPDX-License-Identifier: Apache-2.0
// perf.data's records read once in file order and handed out in time order, round by round (FINISHED_ROUND), or a fallback.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "perf/perf_data.hpp"

namespace stackprov::perf {

/// One record handed out by RecordStream.
struct StreamRecord {
  RecordRef ref;                   ///< as PerfData::records() holds it (time, and a sample's pid and tid)
  const uint8_t* bytes = nullptr;  ///< its ref.size bytes, valid until the next RecordStream::next()
  bool refused = false;            ///< decode_sample refused the sample (PerfData::sample_refused)
  /// A sample decode_sample took (not refused): decoded once, when handed out; its pointers alias
  /// `bytes`. Other records: unset.
  bool decoded = false;
  RawSample sample;
};

/// The records of a perf.data file in the order PerfData::records() gives them (stably sorted by
/// time), the data section read once, in file order, in chunks of kChunkBytes through pread (or from
/// the bytes in memory), with a bounded reorder buffer: perf's ordered-events queue
/// (tools/perf/util/ordered-events.c, OE_FLUSH__ROUND). perf writes its ring buffers in rounds,
/// each ended by a PERF_RECORD_FINISHED_ROUND; at the end of a round, the records held whose time is
/// at most the latest time of the round before are handed out by (time, file offset), from a heap
/// (each record pushed and popped once: O(log n) per record, whatever the number of rounds).
/// That order is exactly the index's as long as no record read later is older than one handed out;
/// every record is checked for it, and when one is (rounds out of order, records without a time
/// after timed ones, records held past kMaxHeldBytes or kMaxHeldRecords — a recording without
/// FINISHED_ROUND larger than that —, a record the index refuses), the stream stops in
/// State::kFallback, why() naming the record and the value: the caller then reads the file with
/// the index (PerfData::parse), which gives the order or the error. Each record type is sorted
/// (Order::kSorted), handed out as read, before the sorted records that precede it
/// (Order::kAsRead: records whose effect does not depend on their order, e.g. perf's LOST_SAMPLES
/// count written at the end without a time), or counted and skipped (Order::kSkip: FINISHED_ROUND,
/// perf's own records). Bounded:
/// at most kMaxHeldBytes of chunks and kMaxHeldRecords records held, 2^26 records read.
/// Not thread-safe.
class RecordStream {
 public:
  static constexpr size_t kChunkBytes = size_t{1} << 20;
  static constexpr uint64_t kMaxHeldBytes = uint64_t{256} << 20;
  static constexpr size_t kMaxHeldRecords = size_t{1} << 20;
  enum class State : uint8_t { kReading, kEnd, kFallback };
  enum class Order : uint8_t { kSkip, kSorted, kAsRead };
  struct Limits {  ///< lower bounds for tests
    uint64_t held_bytes = kMaxHeldBytes;
    size_t held_records = kMaxHeldRecords;
  };
  /// `pd`: parsed without its index (PerfData::parse(..., false)); it must outlive this stream.
  RecordStream(const PerfData& pd, Order (*order)(uint32_t type), Limits limits);
  RecordStream(const PerfData& pd, Order (*order)(uint32_t type)) : RecordStream(pd, order, Limits{}) {}
  /// The next record in time order; false at the end (State::kEnd) or when the order cannot be
  /// kept (State::kFallback).
  bool next(StreamRecord* out);
  State state() const { return state_; }
  const std::string& why() const { return why_; }
  uint64_t records() const { return records_; }  ///< records of every type read so far
  /// The data section's truncation: PerfData's, with partial_bytes once State::kEnd is reached.
  const Truncation& truncation() const { return cut_; }
  uint64_t bytes_read() const { return read_; }        ///< bytes pread (0 from memory)
  uint64_t held_peak() const { return held_peak_; }    ///< the most chunk bytes held at once

 private:
  struct Chunk {
    std::vector<uint8_t> buf;
    uint64_t off = 0;
    size_t len = 0;
    uint32_t live = 0;  ///< records held in it (pending, ready, or handed out last)
    bool used = false;
  };
  struct Entry {
    RecordRef ref;   ///< its time set when read; a sample's pid and tid when handed out (next())
    uint32_t chunk;  ///< kNoChunk: the bytes in memory
  };
  static constexpr uint32_t kNoChunk = UINT32_MAX;
  bool read_until_ready();
  const uint8_t* fetch(uint64_t off, size_t n, uint32_t* chunk);
  void release(uint32_t chunk);
  void commit(uint64_t watermark);
  bool fall_back(std::string why);

  const PerfData& pd_;
  Order (*order_)(uint32_t);
  Limits limits_;
  int fd_ = -1;
  const uint8_t* mem_ = nullptr;
  uint64_t off_ = 0, end_ = 0;
  Truncation cut_;
  std::vector<Chunk> chunks_;
  std::vector<uint32_t> free_;
  uint32_t cur_ = kNoChunk;      ///< the chunk being read into
  uint32_t last_ = kNoChunk;     ///< the chunk of the record handed out last
  std::vector<Entry> pending_;   ///< read, not yet ready: a min-heap by (time, file offset)
  std::vector<Entry> ready_;     ///< sorted, handed out from ready_at_
  std::vector<Entry> as_read_;   ///< an Order::kAsRead record, handed out before ready_
  size_t ready_at_ = 0;
  uint64_t max_seen_ = 0, prev_round_max_ = 0;  ///< the latest time read; as of the last FINISHED_ROUND
  uint64_t handed_max_ = 0;      ///< the latest time made ready
  bool any_ready_ = false, at_end_ = false;
  State state_ = State::kReading;
  std::string why_;
  uint64_t records_ = 0, read_ = 0, held_ = 0, held_peak_ = 0;
};

}  // namespace stackprov::perf
