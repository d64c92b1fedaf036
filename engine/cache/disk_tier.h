// A rank's disk tier of the prompt cache (--cache-dir): every block that
// enters the RAM tier (engine/cache/ram_tier.h) is also written to a file of
// its own in the directory, so that the next start can load the blocks back
// into the RAM tier and a restart re-prefills nothing of a saved prefix.
//
// One file per (rank, kind, prefix key), named r<rank>-<full|sliding>-<key
// in hex>.tpskv, rather than an append-only log: a block is written once and
// never changed, LRU removal is an unlink, a torn write loses one block (the
// file goes through runtime/output_file: temporary, then rename), and each
// rank reads and writes only its own names. Each file starts with a header
// (DiskHeader) saying whose block it is -- the model's identity, the KV type,
// the split and rank count, the rank, the kind, the key -- and an XXH3
// checksum of the header's other bytes and the payload together (over the
// payload alone, a header edited or a payload moved under another block's
// header would load as that block). A file whose header is not this run's,
// or is cut short or damaged, is never read again, overwritten or removed:
// only files this tier validated or wrote are its own. The first few such
// files get a warning each naming it and the reason, the rest one line with
// their count (a directory of another version's files is one warning, not
// thousands). Each file is read once at start: its header when the
// directory is listed, its payload (and so the checksum) when it is loaded;
// a file whose payload fails then is bad like the others. The temporaries
// of this rank's interrupted writes (a kill between create and rename
// leaves NAME.tpskv.tmp-XXXXXX) are removed at start: a directory is one
// run's at a time, as the cap already assumes. A
// directory that cannot be made or written turns the tier off with one
// warning; generation goes on with the RAM tier alone.
//
// Writes happen behind the steps: write() and touch() queue the block's
// bytes (a copy) for the tier's writer thread, which does them in order, so
// a step never waits for a file unless the queue already holds
// kDiskQueueBytes (then it waits for room: every block that enters the RAM
// tier is still written). flush() waits until the queue is done.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <list>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "engine/cache/kv_block.h"
#include "engine/gguf/gguf_reader.h"
#include "engine/kernels/kv_format.h"
#include "topology/model_shape.h"

namespace tps {

// What a block file must match to be used: the model (model_identity), the
// KV type, the split and rank count, and the rank that reads it.
struct DiskIdentity {
  uint64_t model = 0;
  KvType kv_type = KvType::f32;
  int ranks = 1;
  SplitMode split = SplitMode::tensor;
  int rank = 0;
};

// The model's identity, cheap at start: XXH3 of each part's header (its
// metadata and tensor infos, up to the tensor data) with the part's size,
// and `salt` (what changes the weights after load: --quantize's plan).
uint64_t model_identity(const GgufFile& file, const std::string& salt);

// The bytes at the start of every block file; little-endian, as written.
struct DiskHeader {
  char magic[8];
  uint32_t version, kv_type;
  uint64_t model;
  uint32_t ranks, split, rank, kind;  // kind: BlockKind's number
  uint64_t key, payload_bytes, checksum;
};
static_assert(sizeof(DiskHeader) == 64);
inline constexpr char kDiskMagic[8] = {'T', 'P', 'S', 'K', 'V', 'B', 'L', 'K'};
// 2: pages hold each kv head's key block and value rows together (KvPool).
// 3: the checksum covers the header (its checksum field zero) and the payload.
inline constexpr uint32_t kDiskFormatVersion = 3;
// Bad files named one warning each at start; the rest are counted in one line.
inline constexpr int kDiskBadFilesNamed = 3;
// The block bytes queued for the writer thread at most before write() waits.
inline constexpr uint64_t kDiskQueueBytes = uint64_t{64} << 20;

class DiskTier {
 public:
  struct Block {
    BlockKind kind = BlockKind::full;
    uint64_t key = 0;
    bool operator<(const Block& o) const { return std::pair(kind, key) < std::pair(o.kind, o.key); }
  };
  struct Stats {
    int64_t files = 0, bytes = 0;  // this rank's own files in the directory now
    int64_t loaded = 0;            // blocks loaded into the RAM tier at start
    double load_seconds = 0;       // the start's check and load of the files, the ranks' exchanges included
    int64_t written = 0, write_failures = 0;
    int64_t bad_files = 0;            // files of this rank's names not used at start
    int64_t temporaries_removed = 0;  // left by interrupted writes, removed at start
  };

  DiskTier() = default;  // off
  DiskTier(const DiskTier&) = delete;
  DiskTier& operator=(const DiskTier&) = delete;
  ~DiskTier();  // after the queued writes
  // Makes the directory if need be, removes this rank's stale temporaries
  // and validates this rank's files in it (a warning for each of the first
  // kDiskBadFilesNamed bad ones, one more line counting the rest). cap:
  // bytes of own files kept at most.
  DiskTier(std::string dir, const DiskIdentity& id, uint64_t cap, uint64_t full_block_bytes,
           uint64_t sliding_block_bytes);

  bool on() const { return on_; }
  const std::string& dir() const { return dir_; }
  // The blocks with a valid file (as far as its header says, until read),
  // most recently written or used first.
  std::vector<Block> blocks() const;
  bool has(const Block& b) const;
  // Reads a block's payload (block bytes of its kind) into `to` and checks
  // the file whole; false, with a warning, when it does not hold the block
  // (the file is then never used, removed or overwritten).
  bool read(const Block& b, uint8_t* to);
  void count_loaded(int64_t blocks, double seconds);
  // A block came back from the RAM tier: its file is the most recently
  // used (here and, by its time stamp, at the next start). Queued.
  void touch(const Block& b);
  // Writes a block that entered the RAM tier, unless it has a file already
  // (its own, or one that is not this tier's and so stays as it is); then
  // removes the least recently used own files past the cap. A failed
  // write turns the tier off with a warning. Queued: `from` is copied.
  void write(const Block& b, const uint8_t* from);
  // Returns once every queued write and touch is done.
  void flush();
  Stats stats() const;
  // Every warning said, in order (what the tests check).
  std::vector<std::string> warnings() const;

 private:
  struct File {
    uint64_t bytes = 0;
    std::list<Block>::iterator at;
  };
  // A queued write (bytes: its payload) or touch (bytes empty).
  struct Task {
    Block block;
    std::vector<uint8_t> bytes;
  };
  void enqueue(Task task);
  void write_queued();  // the writer thread
  void store(const Block& b, const uint8_t* from);
  void mark_used(const Block& b);
  std::string path(const Block& b) const;
  void scan();
  void remove_temporary(const std::string& path);
  // Why the file is not this run's block (empty: it is): its header and
  // size; with `to`, also its payload, read there, against the checksum.
  std::string check(const std::string& path, const Block& b, uint8_t* to) const;
  void forget(const Block& b);  // a file found bad: no longer this tier's
  void keep(const Block& b, uint64_t bytes);
  void make_room(uint64_t bytes);
  void warn(const std::string& line);

  std::atomic<bool> on_ = false;
  std::string dir_;
  DiskIdentity id_;
  uint64_t cap_ = 0;
  uint64_t block_bytes_[2] = {0, 0};
  std::map<Block, File> files_;
  std::list<Block> lru_;  // least recently written or used first
  Stats stats_;
  std::vector<std::string> warnings_;
  // files_, lru_, stats_ and warnings_: the writer thread changes them.
  mutable std::mutex index_mutex_;
  std::mutex queue_mutex_;
  std::condition_variable queue_changed_;
  std::deque<Task> queue_;
  uint64_t queued_bytes_ = 0;
  bool writing_ = false, stopping_ = false;
  std::thread writer_;
};

}  // namespace tps
