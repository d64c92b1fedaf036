#include "engine/cache/disk_tier.h"

#include <xxhash.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>
#include <tuple>

#include "runtime/log.h"
#include "runtime/output_file.h"

namespace tps {

namespace fs = std::filesystem;

uint64_t model_identity(const GgufFile& file, const std::string& salt) {
  uint64_t h = XXH3_64bits(salt.data(), salt.size());
  for (int i = 0; i < file.parts(); ++i) {
    const GgufFile& part = file.part(i);
    const uint64_t head = std::min<uint64_t>(part.data_offset(), part.mapping().size());
    h = XXH3_64bits_withSeed(part.mapping().data(), head, h ^ part.file_size());
  }
  return h;
}

namespace {

// The block a file name of this rank names, if it is one.
bool parse_name(const std::string& name, int rank, DiskTier::Block& b) {
  const std::string prefix = cat("r", rank, "-"), suffix = ".tpskv";
  if (!name.starts_with(prefix) || !name.ends_with(suffix)) return false;
  std::string rest = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  const BlockKind* kind = std::find_if(std::begin(kBlockKinds), std::end(kBlockKinds),
                                       [&](BlockKind k) { return rest.starts_with(cat(block_kind_name(k), "-")); });
  if (kind == std::end(kBlockKinds)) return false;
  b.kind = *kind, rest = rest.substr(std::strlen(block_kind_name(*kind)) + 1);
  if (rest.size() != 16 || rest.find_first_not_of("0123456789abcdef") != std::string::npos) return false;
  b.key = std::stoull(rest, nullptr, 16);
  return true;
}

// The checksum of a block file: the header's bytes with its checksum field
// zero, then the payload's.
uint64_t block_checksum(DiskHeader h, const uint8_t* payload, uint64_t bytes) {
  h.checksum = 0;
  return XXH3_64bits_withSeed(payload, bytes, XXH3_64bits(&h, sizeof h));
}

DiskHeader header_for(const DiskIdentity& id, const DiskTier::Block& b, const uint8_t* payload, uint64_t bytes) {
  DiskHeader h{};
  std::memcpy(h.magic, kDiskMagic, sizeof h.magic);
  h.version = kDiskFormatVersion, h.kv_type = static_cast<uint32_t>(id.kv_type), h.model = id.model;
  h.ranks = id.ranks, h.split = static_cast<uint32_t>(id.split), h.rank = id.rank,
  h.kind = static_cast<uint32_t>(b.kind);
  h.key = b.key, h.payload_bytes = bytes;
  h.checksum = block_checksum(h, payload, bytes);
  return h;
}

// A temporary OutputFile left beside one of this rank's block files
// (NAME.tmp-XXXXXX, NAME a block's).
bool is_temporary(const std::string& name, int rank) {
  const size_t at = name.rfind(".tmp-");
  DiskTier::Block b;
  return at != std::string::npos && at + 5 < name.size() && parse_name(name.substr(0, at), rank, b);
}

}  // namespace

DiskTier::DiskTier(std::string dir, const DiskIdentity& id, uint64_t cap, uint64_t full_block_bytes,
                   uint64_t sliding_block_bytes)
    : dir_(std::move(dir)), id_(id), cap_(cap), block_bytes_{full_block_bytes, sliding_block_bytes} {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec || !fs::is_directory(dir_, ec)) {
    warn(cat("--cache-dir ", dir_, ": cannot make the directory (", ec ? ec.message() : "not a directory",
             "); going on without the disk tier"));
    return;
  }
  on_ = true;
  scan();
  writer_ = std::thread([this] { write_queued(); });
}

DiskTier::~DiskTier() {
  if (!writer_.joinable()) return;
  {
    std::lock_guard lock(queue_mutex_);
    stopping_ = true;
  }
  queue_changed_.notify_all();
  writer_.join();
}

std::string DiskTier::path(const Block& b) const {
  char key[17];
  std::snprintf(key, sizeof key, "%016llx", static_cast<unsigned long long>(b.key));
  return cat(dir_, "/r", id_.rank, "-", block_kind_name(b.kind), "-", key, ".tpskv");
}

void DiskTier::warn(const std::string& line) {
  warnings_.push_back(line);
  log_warn(line);
}

// This rank's files, validated (a warning for each of the first bad ones,
// a count of the rest), least recently written first; its temporaries removed.
void DiskTier::scan() {
  std::vector<std::tuple<fs::file_time_type, Block, uint64_t>> found;
  std::error_code ec;
  for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
    Block b;
    const std::string name = it->path().filename().string();
    if (!it->is_regular_file(ec)) continue;
    if (is_temporary(name, id_.rank)) {
      remove_temporary(it->path().string());
      continue;
    }
    if (!parse_name(name, id_.rank, b)) continue;
    const std::string why = check(it->path().string(), b, nullptr);
    if (!why.empty()) {
      if (++stats_.bad_files <= kDiskBadFilesNamed)
        warn(cat("--cache-dir: ", it->path().string(), ": ", why, "; not used"));
      continue;
    }
    found.emplace_back(it->last_write_time(ec), b, it->file_size(ec));
  }
  if (ec) warn(cat("--cache-dir ", dir_, ": cannot list it (", ec.message(), ")"));
  if (stats_.bad_files > kDiskBadFilesNamed)
    warn(cat("--cache-dir ", dir_, ": ", stats_.bad_files - kDiskBadFilesNamed, " more of rank ", id_.rank,
             "'s files not used (", stats_.bad_files, " in all; the first ", kDiskBadFilesNamed, " named above)"));
  if (stats_.temporaries_removed > 0)
    log_info("--cache-dir ", dir_, ": removed ", stats_.temporaries_removed,
             " temporary file(s) an interrupted write left");
  std::sort(found.begin(), found.end());
  for (const auto& [time, b, bytes] : found) keep(b, bytes);
}

void DiskTier::remove_temporary(const std::string& path) {
  std::error_code ec;
  if (fs::remove(path, ec)) ++stats_.temporaries_removed;
}

std::string DiskTier::check(const std::string& path, const Block& b, uint8_t* to) const {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "cannot be opened";
  in.seekg(0, std::ios::end);
  const uint64_t size = static_cast<uint64_t>(in.tellg());
  in.seekg(0);
  DiskHeader h{};
  if (size < sizeof h) return cat("truncated (", size, " bytes, less than its ", sizeof h, "-byte header)");
  in.read(reinterpret_cast<char*>(&h), sizeof h);
  if (std::memcmp(h.magic, kDiskMagic, sizeof h.magic) != 0) return "not a tps KV block file (its magic)";
  if (h.version != kDiskFormatVersion)
    return cat("format version ", h.version, ", this tps reads version ", kDiskFormatVersion);
  if (h.model != id_.model) return "written for another model file (its identity differs)";
  if (h.kv_type != static_cast<uint32_t>(id_.kv_type))
    return h.kv_type <= static_cast<uint32_t>(KvType::q4_0)
               ? cat("KV type ", kv_type_name(static_cast<KvType>(h.kv_type)), ", this run's is ",
                     kv_type_name(id_.kv_type))
               : cat("an unknown KV type (", h.kv_type, ")");
  if (h.ranks != static_cast<uint32_t>(id_.ranks) || h.split != static_cast<uint32_t>(id_.split))
    return cat("written for ", h.ranks, " rank(s) split by ",
               h.split <= static_cast<uint32_t>(SplitMode::tensor) ? split_mode_name(static_cast<SplitMode>(h.split))
                                                                   : cat("an unknown mode (", h.split, ")"),
               ", this run has ", id_.ranks, " split by ", split_mode_name(id_.split));
  if (h.rank != static_cast<uint32_t>(id_.rank) || h.kind != static_cast<uint32_t>(b.kind) || h.key != b.key)
    return "its header names another rank, kind or key than its file name";
  const uint64_t want = block_bytes_[int(b.kind)];
  if (h.payload_bytes != want) return cat("a payload of ", h.payload_bytes, " bytes, a block here has ", want);
  if (size != sizeof h + want) return cat("truncated (", size, " bytes, its header says ", sizeof h + want, ")");
  if (!to) return "";
  in.read(reinterpret_cast<char*>(to), static_cast<std::streamsize>(want));
  if (!in) return "cannot be read";
  if (block_checksum(h, to, want) != h.checksum) return "a bad checksum (its header or payload is damaged)";
  return "";
}

std::vector<DiskTier::Block> DiskTier::blocks() const {
  std::lock_guard lock(index_mutex_);
  return {lru_.rbegin(), lru_.rend()};
}

bool DiskTier::has(const Block& b) const {
  std::lock_guard lock(index_mutex_);
  return files_.count(b) > 0;
}

DiskTier::Stats DiskTier::stats() const {
  std::lock_guard lock(index_mutex_);
  return stats_;
}

std::vector<std::string> DiskTier::warnings() const {
  std::lock_guard lock(index_mutex_);
  return warnings_;
}

void DiskTier::count_loaded(int64_t blocks, double seconds) {
  std::lock_guard lock(index_mutex_);
  stats_.loaded += blocks, stats_.load_seconds = seconds;
}

bool DiskTier::read(const Block& b, uint8_t* to) {
  if (!has(b)) return false;
  const std::string why = check(path(b), b, to);
  if (why.empty()) return true;
  std::lock_guard lock(index_mutex_);
  if (++stats_.bad_files <= kDiskBadFilesNamed) warn(cat("--cache-dir: ", path(b), ": ", why, "; not used"));
  forget(b);
  return false;
}

void DiskTier::forget(const Block& b) {
  auto it = files_.find(b);
  if (it == files_.end()) return;
  lru_.erase(it->second.at);
  stats_.bytes -= static_cast<int64_t>(it->second.bytes), --stats_.files;
  files_.erase(it);
}

void DiskTier::keep(const Block& b, uint64_t bytes) {
  files_[b] = File{bytes, lru_.insert(lru_.end(), b)};
  ++stats_.files, stats_.bytes += static_cast<int64_t>(bytes);
}

// Own files go, least recently written first, until `bytes` more fit.
void DiskTier::make_room(uint64_t bytes) {
  while (!lru_.empty() && static_cast<uint64_t>(stats_.bytes) + bytes > cap_) {
    const Block b = lru_.front();
    std::error_code ec;
    fs::remove(path(b), ec);
    forget(b);
  }
}

void DiskTier::touch(const Block& b) {
  if (on_) enqueue(Task{b, {}});
}

void DiskTier::write(const Block& b, const uint8_t* from) {
  if (on_) enqueue(Task{b, std::vector<uint8_t>(from, from + block_bytes_[int(b.kind)])});
}

void DiskTier::enqueue(Task task) {
  std::unique_lock lock(queue_mutex_);
  queue_changed_.wait(lock, [&] { return queued_bytes_ == 0 || queued_bytes_ + task.bytes.size() <= kDiskQueueBytes; });
  queued_bytes_ += task.bytes.size();
  queue_.push_back(std::move(task));
  queue_changed_.notify_all();
}

void DiskTier::flush() {
  std::unique_lock lock(queue_mutex_);
  queue_changed_.wait(lock, [&] { return queue_.empty() && !writing_; });
}

// The writer thread: the queue's tasks in order, until the tier is
// destroyed with nothing left queued.
void DiskTier::write_queued() {
  std::unique_lock lock(queue_mutex_);
  for (;;) {
    queue_changed_.wait(lock, [&] { return !queue_.empty() || stopping_; });
    if (queue_.empty()) return;
    const Task task = std::move(queue_.front());
    queue_.pop_front();
    writing_ = true;
    lock.unlock();
    // (After a failed write the tier is off: what was queued after it goes.)
    if (on_ && task.bytes.empty())
      mark_used(task.block);
    else if (on_)
      store(task.block, task.bytes.data());
    lock.lock();
    writing_ = false, queued_bytes_ -= task.bytes.size();
    queue_changed_.notify_all();
  }
}

void DiskTier::mark_used(const Block& b) {
  {
    std::lock_guard lock(index_mutex_);
    auto it = files_.find(b);
    if (it == files_.end()) return;
    lru_.splice(lru_.end(), lru_, it->second.at);
  }
  std::error_code ec;  // a time stamp not set only orders the next start's load less well
  fs::last_write_time(path(b), fs::file_time_type::clock::now(), ec);
}

void DiskTier::store(const Block& b, const uint8_t* from) {
  std::unique_lock lock(index_mutex_);
  if (files_.count(b)) {  // the same prefix's bits: already there
    lock.unlock();
    return mark_used(b);
  }
  const std::string target = path(b);
  std::error_code ec;
  if (fs::exists(fs::symlink_status(target, ec))) return;  // not this tier's file: left as it is
  const uint64_t payload = block_bytes_[int(b.kind)], bytes = sizeof(DiskHeader) + payload;
  if (bytes > cap_) return;
  make_room(bytes);
  lock.unlock();
  try {
    const DiskHeader h = header_for(id_, b, from, payload);
    OutputFile out(target, {}, "--cache-dir");
    out.write(&h, sizeof h);
    out.write(from, payload);
    out.commit();
  } catch (const std::exception& e) {
    lock.lock();
    ++stats_.write_failures, on_ = false;
    warn(cat("--cache-dir: writing a block failed (", e.what(), "); going on without the disk tier"));
    return;
  }
  lock.lock();
  keep(b, bytes);
  ++stats_.written;
}

}  // namespace tps
