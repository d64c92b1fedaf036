// A rank's disk tier of the prompt cache (--cache-dir): every block that
// enters the RAM tier (engine/step/ram_tier.h) is also written to a file of
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
// thousands). The temporaries of this rank's interrupted writes (a kill
// between create and rename leaves NAME.tpskv.tmp-XXXXXX) are removed at
// start: a directory is one run's at a time, as the cap already assumes. A
// directory that cannot be made or written turns the tier off with one
// warning; generation goes on with the RAM tier alone.
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <string>
#include <utility>
#include <vector>

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
  uint32_t ranks, split, rank, sliding;
  uint64_t key, payload_bytes, checksum;
};
static_assert(sizeof(DiskHeader) == 64);
inline constexpr char kDiskMagic[8] = {'T', 'P', 'S', 'K', 'V', 'B', 'L', 'K'};
// 2: pages hold each kv head's key block and value rows together (KvPool).
// 3: the checksum covers the header (its checksum field zero) and the payload.
inline constexpr uint32_t kDiskFormatVersion = 3;
// Bad files named one warning each at start; the rest are counted in one line.
inline constexpr int kDiskBadFilesNamed = 3;

class DiskTier {
 public:
  struct Block {
    int32_t sliding = 0;
    uint64_t key = 0;
    bool operator<(const Block& o) const { return std::pair(sliding, key) < std::pair(o.sliding, o.key); }
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
  // Makes the directory if need be, removes this rank's stale temporaries
  // and validates this rank's files in it (a warning for each of the first
  // kDiskBadFilesNamed bad ones, one more line counting the rest). cap:
  // bytes of own files kept at most.
  DiskTier(std::string dir, const DiskIdentity& id, uint64_t cap, uint64_t full_block_bytes,
           uint64_t sliding_block_bytes);

  bool on() const { return on_; }
  const std::string& dir() const { return dir_; }
  // The blocks with a valid file, most recently written or used first.
  std::vector<Block> blocks() const;
  bool has(const Block& b) const { return files_.count(b) > 0; }
  // Reads a block's payload (block bytes of its kind) into `to`, checked
  // again; false, with a warning, when the file no longer holds it.
  bool read(const Block& b, uint8_t* to);
  void count_loaded(double seconds) { ++stats_.loaded, stats_.load_seconds = seconds; }
  // A block came back from the RAM tier: its file is the most recently
  // used (here and, by its time stamp, at the next start).
  void touch(const Block& b);
  // Writes a block that entered the RAM tier, unless it has a file already
  // (its own, or one that is not this tier's and so stays as it is); then
  // removes the least recently used own files past the cap. A failed
  // write turns the tier off with a warning.
  void write(const Block& b, const uint8_t* from);
  const Stats& stats() const { return stats_; }
  // Every warning said, in order (what the tests check).
  const std::vector<std::string>& warnings() const { return warnings_; }

 private:
  struct File {
    uint64_t bytes = 0;
    std::list<Block>::iterator at;
  };
  std::string path(const Block& b) const;
  void scan();
  void remove_temporary(const std::string& path);
  // Why the file is not this run's block (empty: it is), payload read into `to` when given.
  std::string check(const std::string& path, const Block& b, uint8_t* to) const;
  void keep(const Block& b, uint64_t bytes);
  void make_room(uint64_t bytes);
  void warn(const std::string& line);

  bool on_ = false;
  std::string dir_;
  DiskIdentity id_;
  uint64_t cap_ = 0;
  uint64_t block_bytes_[2] = {0, 0};
  std::map<Block, File> files_;
  std::list<Block> lru_;  // least recently written or used first
  Stats stats_;
  std::vector<std::string> warnings_;
};

}  // namespace tps
