#include "engine/model/weights.h"

#include <algorithm>
#include <cstring>

#include "engine/gguf/gguf_reader.h"
#include "engine/gguf/quant_blocks.h"
#include "engine/kernels/packed_rows.h"
#include "runtime/error.h"
#include "runtime/mapped_file.h"

namespace tps {

Shard plan_shard(const ModelShape& shape, SplitMode mode, int rank, int ranks) {
  std::vector<RankShare> plan = plan_split(shape, mode, ranks);
  if (rank < 0 || rank >= ranks) throw Error(cat("rank ", rank, " is not one of ", ranks));
  return Shard{mode, rank, ranks, plan[rank]};
}

namespace {

InputError changed_while_loading(const MappedFile& file) {
  return InputError(cat(file.path(), ": changed on disk while loading (truncated or rewritten by another program); ",
                        "start again once it is complete"));
}

// `count` pieces of `bytes` (whole rows of `cols` values of type `from`),
// `stride` apart in the file (a split model's `part`) from file offset src,
// one after another in the buffer from offset dst, `out` bytes a piece
// there. Rows are converted to type `to` when it is not `from` (--quantize:
// model/quantize_plan.h), and rows of a packed type are repacked for the
// kernels (kernels/packed_rows.h) unless `file_layout`; others are copied.
// A run of packed rows starts a matrix or a whole tile of one.
struct Run {
  // A thread's room for converting a run, made before the copy: the copy
  // runs inside read_mapping, whose jump out of a SIGBUS must not leave
  // objects with destructors behind.
  struct Scratch {
    std::vector<float> values;
    std::vector<uint8_t> rows;
  };
  uint64_t src, dst, bytes, count, stride, out;
  GgmlType from, to;
  int64_t cols;
  int part;
  bool file_layout;
  uint64_t total() const { return out * count; }
  uint64_t rows() const { return count == 1 ? bytes / row_bytes(from, cols) : count; }
  const uint8_t* source_row(const uint8_t* file, uint64_t r) const {
    return file + src + (count == 1 ? r * row_bytes(from, cols) : r * stride);
  }
  bool packs() const { return is_packed_type(to) && !file_layout; }
  void prepare(Scratch& s) const {
    if (from == to) return;
    s.values.resize(cols);
    if (packs()) s.rows.resize(rows() * row_bytes(to, cols));
  }
  void copy(const uint8_t* file, uint8_t* buffer, Scratch& s) const {
    const bool pack = packs();
    if (from == to && !pack) {
      for (uint64_t k = 0; k < count; ++k) std::memcpy(buffer + dst + k * out, file + src + k * stride, bytes);
      return;
    }
    const uint64_t n = rows(), row = row_bytes(to, cols);
    if (from == to) {
      pack_rows(to, file + src, count == 1 ? row : stride, buffer + dst, static_cast<int64_t>(n), cols);
      return;
    }
    // Each row decoded to floats and encoded as `to`, in the file's layout
    // (into the buffer itself, or the scratch rows to pack).
    for (uint64_t r = 0; r < n; ++r) {
      dequantize_row(from, source_row(file, r), s.values.data(), cols);
      quantize_row(to, s.values.data(), (pack ? s.rows.data() : buffer + dst) + r * row, cols);
    }
    if (pack) pack_rows(to, s.rows.data(), row, buffer + dst, static_cast<int64_t>(n), cols);
  }
};

// Where each local tensor goes in the rank's buffer, in which type, and
// which bytes of the file fill it. Used twice: to size the buffer (no base
// yet), then to place.
class Layout {
 public:
  Layout(const QuantizePlan& plan, const std::string& path, uint8_t* base = nullptr)
      : plan_(plan), path_(path), base_(base) {}
  uint64_t size() const { return size_; }
  const std::vector<Run>& runs() const { return runs_; }
  GgmlType type_for(const TensorView& t) const { return plan_.type_for(t, path_); }

  // Each tensor starts 64-byte aligned; the pieces of one follow each
  // other with no gap (the experts of a 3-D tensor are one matrix).
  void align() { size_ = (size_ + 63) & ~uint64_t{63}; }
  // Pieces of whole rows of `cols` values of type `from`, in the file's
  // `part`, kept as type `to` (in the file's layout if file_layout).
  const uint8_t* place(uint64_t src, uint64_t bytes, uint64_t count, uint64_t stride, GgmlType from, GgmlType to,
                       int64_t cols, int part, bool file_layout = false) {
    const uint8_t* at = base_ ? base_ + size_ : nullptr;
    // Runs of at most ~1 MB (or one tile of rows), so that threads share
    // the copy evenly; whole tiles, so that each run packs its own.
    constexpr uint64_t kPiece = 1 << 20;
    const uint64_t row = row_bytes(from, cols);
    const uint64_t kept_row = file_layout ? row_bytes(to, cols) : packed_row_bytes(to, cols);
    const uint64_t out = row ? bytes / row * kept_row : 0;  // a piece's, in the buffer (none: no columns)
    auto tiles_of = [](uint64_t rows) { return std::max<uint64_t>(1, rows / kTileRows) * kTileRows; };
    if (count == 1 && bytes > kPiece) {
      const uint64_t step = tiles_of(kPiece / row);  // rows
      for (uint64_t r = 0; r < bytes / row; r += step) {
        const uint64_t n = std::min(step, bytes / row - r);
        runs_.push_back(
            {src + r * row, size_ + r * kept_row, n * row, 1, 0, n * kept_row, from, to, cols, part, file_layout});
      }
    } else if (bytes > 0 && count > 0) {
      const uint64_t per = tiles_of(kPiece / bytes);
      for (uint64_t i = 0; i < count; i += per)
        runs_.push_back({src + i * stride, size_ + i * out, bytes, std::min(per, count - i), stride, out, from, to,
                         cols, part, file_layout});
    }
    size_ += out * count;
    return at;
  }

 private:
  const QuantizePlan& plan_;
  const std::string& path_;
  uint8_t* base_;
  uint64_t size_ = 0;
  std::vector<Run> runs_;
};

// Rows [rows.begin, rows.end) of each of the groups [groups.begin,
// groups.end) of `per` rows (the experts of a 3-D tensor; one group for a
// matrix), columns [cols.begin, cols.end) of each row.
Matrix slice(Layout& L, const TensorView& t, int64_t per, Range groups, Range rows, Range cols) {
  const GgmlType to = L.type_for(t);
  const int64_t width = static_cast<int64_t>(t.ne[0]);
  for (GgmlType type : {t.type, to}) {
    const uint32_t block = ggml_type_info(static_cast<uint32_t>(type))->block_elems;
    if (cols.begin % block || (cols.end % block && cols.end != width))
      throw InputError(cat(t.name, ": cannot cut columns ", cols.begin, "..", cols.end, " of a ", type_name(type),
                           " tensor inside its ", block, "-value blocks (use --split layers)"));
  }
  const uint64_t first = row_bytes(t.type, cols.begin), bytes = row_bytes(t.type, cols.size());
  const uint8_t* data = nullptr;
  L.align();
  for (int64_t g = groups.begin; g < groups.end; ++g) {
    const uint64_t src = t.offset + (g * per + rows.begin) * t.row_bytes + first;
    const uint8_t* at = bytes == t.row_bytes
                            ? L.place(src, rows.size() * bytes, 1, 0, t.type, to, cols.size(), t.part)  // one piece
                            : L.place(src, bytes, rows.size(), t.row_bytes, t.type, to, cols.size(), t.part);
    if (g == groups.begin) data = at;
  }
  return Matrix{to, groups.size() * rows.size(), cols.size(), data, packed_row_bytes(to, cols.size())};
}

ModelWeights build(Layout& L, const GgufFile& f, const ModelConfig& c, const Shard& s) {
  const RankShare& x = s.share;
  const int64_t hd = c.head_dim, group = c.n_head / c.n_head_kv, d = c.n_embd, ff = c.n_ff_exp;
  const Range q_rows{x.kv_heads.begin * group * hd, x.kv_heads.end * group * hd};
  const Range kv_rows{x.kv_heads.begin * hd, x.kv_heads.end * hd};
  const Range heads{x.kv_heads.begin * group, x.kv_heads.end * group};
  const Range one{0, 1};
  auto whole = [](const TensorView& t) { return Range{0, static_cast<int64_t>(t.ne[0])}; };
  auto all_rows = [](const TensorView& t) { return Range{0, static_cast<int64_t>(t.rows())}; };
  // A matrix's rows, or its columns, or all of it.
  auto rows = [&](const std::string& name, Range r) {
    const TensorView& t = f.tensor(name);
    return slice(L, t, t.rows(), one, r, whole(t));
  };
  auto cols = [&](const std::string& name, Range r) {
    const TensorView& t = f.tensor(name);
    return slice(L, t, t.rows(), one, all_rows(t), r);
  };
  auto all = [&](const std::string& name) { return rows(name, all_rows(f.tensor(name))); };
  // Vectors are F32 (checked with the config): a slice is a 1-row matrix.
  auto vec = [&](const std::string& name, Range r) { return reinterpret_cast<const float*>(cols(name, r).data); };
  auto whole_vec = [&](const std::string& name) { return vec(name, whole(f.tensor(name))); };

  ModelWeights w;
  // The token embeddings are read through the file mapping, a row a token,
  // unless converted: then the ranks that look tokens up hold them, in the
  // file's layout (dequantize_row reads a row of any type).
  const TensorView& embd = f.tensor("token_embd.weight");
  const int64_t vocab = static_cast<int64_t>(embd.rows()), width = static_cast<int64_t>(embd.ne[0]);
  const GgmlType embd_type = L.type_for(embd);
  if (embd_type == embd.type) {
    w.embd = Matrix{embd.type, vocab, width, embd.data, embd.row_bytes};
  } else if (s.first_stage()) {
    L.align();
    w.embd = Matrix{embd_type, vocab, width,
                    L.place(embd.offset, embd.bytes, 1, 0, embd.type, embd_type, width, embd.part, true),
                    row_bytes(embd_type, width)};
  }
  w.layers.resize(c.n_layer);
  for (int64_t l = x.layers.begin; l < x.layers.end; ++l) {
    const std::string b = cat("blk.", l, ".");
    LayerWeights& Lw = w.layers[l];
    Lw.attn_norm = whole_vec(b + "attn_norm.weight");
    Lw.wq = rows(b + "attn_q.weight", q_rows), Lw.bq = vec(b + "attn_q.bias", q_rows);
    Lw.wk = rows(b + "attn_k.weight", kv_rows), Lw.bk = vec(b + "attn_k.bias", kv_rows);
    Lw.wv = rows(b + "attn_v.weight", kv_rows), Lw.bv = vec(b + "attn_v.bias", kv_rows);
    Lw.wo = cols(b + "attn_output.weight", q_rows), Lw.bo = whole_vec(b + "attn_output.bias");
    Lw.sinks = vec(b + "attn_sinks.weight", heads);
    Lw.post_norm = whole_vec(b + "post_attention_norm.weight");
    Lw.router = all(b + "ffn_gate_inp.weight"), Lw.router_b = whole_vec(b + "ffn_gate_inp.bias");
    // Experts: gate/up rows are features, down columns are features.
    const TensorView& gate = f.tensor(b + "ffn_gate_exps.weight");
    const TensorView& up = f.tensor(b + "ffn_up_exps.weight");
    const TensorView& down = f.tensor(b + "ffn_down_exps.weight");
    Lw.gate = slice(L, gate, ff, x.experts, x.ff, whole(gate));
    Lw.up = slice(L, up, ff, x.experts, x.ff, whole(up));
    Lw.down = slice(L, down, d, x.experts, {0, d}, x.ff);
    // Expert biases [E][ff] / [E][d]: rows are experts.
    auto expert_vec = [&](const std::string& name, Range experts, Range r) {
      return reinterpret_cast<const float*>(slice(L, f.tensor(name), 1, experts, one, r).data);
    };
    Lw.gate_b = expert_vec(b + "ffn_gate_exps.bias", x.experts, x.ff);
    Lw.up_b = expert_vec(b + "ffn_up_exps.bias", x.experts, x.ff);
    Lw.down_b = expert_vec(b + "ffn_down_exps.bias", {0, c.n_expert}, {0, d});
  }
  if (x.vocab.size() > 0) {
    w.out_norm = whole_vec("output_norm.weight");
    w.output = rows("output.weight", x.vocab);
  }
  return w;
}

}  // namespace

uint64_t shard_bytes(const GgufFile& file, const ModelConfig& config, const Shard& shard, const QuantizePlan& plan) {
  Layout sizing(plan, file.path());
  build(sizing, file, config, shard);
  return sizing.size() + kPackedOverread;
}

RankWeights load_shard(const GgufFile& file, const ModelConfig& config, const Shard& shard, const QuantizePlan& plan,
                       ThreadPool& pool, const std::function<void(uint64_t, uint64_t)>& progress) {
  RankWeights out{PageBuffer(shard_bytes(file, config, shard, plan)), {}};
  Layout layout(plan, file.path(), out.memory.data());
  out.views = build(layout, file, config, shard);

  // Copy in batches: the pool's threads share each batch by bytes; after a
  // batch its file pages leave this process and progress is reported.
  const std::vector<Run>& runs = layout.runs();
  auto mapping = [&](const Run& r) -> const MappedFile& { return file.part(r.part).mapping(); };
  uint64_t total = 0;  // the runs' bytes (the layout's size adds the gaps between tensors)
  for (const Run& r : runs) total += r.total();
  constexpr uint64_t kBatch = 256ull << 20;
  uint64_t done = 0;
  for (size_t first = 0; first < runs.size();) {
    size_t last = first;
    uint64_t bytes = 0;
    while (last < runs.size() && (bytes < kBatch || last == first)) bytes += runs[last++].total();
    pool.run([&](int t, int nt) {
      auto [begin, end] = ThreadPool::split(static_cast<int64_t>(bytes), t, nt);
      Run::Scratch scratch;
      int64_t at = 0;  // bytes of the batch before run i
      for (size_t i = first; i < last; at += runs[i].total(), ++i) {
        if (at < begin || at >= end) continue;  // each run goes to one thread
        const MappedFile& m = mapping(runs[i]);
        runs[i].prepare(scratch);
        if (!read_mapping([&] { runs[i].copy(m.data(), out.memory.data(), scratch); })) throw changed_while_loading(m);
      }
    });
    for (size_t i = first; i < last; ++i)
      mapping(runs[i]).advise_dontneed(runs[i].src, (runs[i].count - 1) * runs[i].stride + runs[i].bytes);
    done += bytes;
    if (progress) progress(done, total);
    first = last;
  }
  // The token embeddings read through the file mapping: read them into the
  // page cache now, or a token's first lookup waits on the disk (~2.5 ms;
  // 65 such reads in a 20b-4l run of a 128-token prompt and 48 new tokens).
  const TensorView& embd = file.tensor("token_embd.weight");
  if (shard.first_stage() && out.views.embd.data == embd.data) {
    pool.run([&](int t, int nt) {
      auto [begin, end] = ThreadPool::split(static_cast<int64_t>(embd.bytes), t, nt);
      file.part(embd.part).mapping().read_into_page_cache(embd.offset + begin, end - begin);
    });
  }
  // Rewritten in place while the copies were made: they may mix two files.
  for (int p = 0; p < file.parts(); ++p)
    if (file.part(p).mapping().changed_on_disk()) throw changed_while_loading(file.part(p).mapping());
  return out;
}

void drop_file_cache(const GgufFile& file, bool keep_embeddings) {
  const TensorView& embd = file.tensor("token_embd.weight");
  for (int p = 0; p < file.parts(); ++p) {
    const GgufFile& part = file.part(p);
    const uint64_t begin = part.data_offset(), end = part.file_size();
    if (p != embd.part || !keep_embeddings) {
      part.mapping().drop_page_cache(begin, end - begin);
      continue;
    }
    part.mapping().drop_page_cache(begin, embd.offset - begin);
    part.mapping().drop_page_cache(embd.offset + embd.bytes, end - (embd.offset + embd.bytes));
  }
}

uint64_t decode_bytes_per_token(const ModelWeights& w, const ModelConfig& c, const Shard& s) {
  auto bytes = [](const Matrix& m) { return static_cast<uint64_t>(m.rows) * m.row_bytes; };
  const RankShare& x = s.share;
  const uint64_t d = c.n_embd, q = x.kv_heads.size() * c.head_dim * (c.n_head / c.n_head_kv),
                 kv = x.kv_heads.size() * c.head_dim, ff = x.ff.size();
  uint64_t total = s.first_stage() ? w.embd.row_bytes : 0;
  if (x.vocab.size() > 0) total += bytes(w.output) + 4 * d;
  for (int64_t l = x.layers.begin; l < x.layers.end; ++l) {
    const LayerWeights& L = w.layers[l];
    total += bytes(L.wq) + bytes(L.wk) + bytes(L.wv) + bytes(L.wo) + bytes(L.router);
    total += 4 * (3 * d + q + 2 * kv + q / c.head_dim + c.n_expert);  // norms, biases, sinks
    // One expert's part on this rank: gate and up (ff rows each), down (d
    // rows of ff), biases; times the experts of the top-k expected here.
    const uint64_t expert = 2 * ff * L.gate.row_bytes + d * L.down.row_bytes + 4 * (2 * ff + d);
    total += expert * c.n_expert_used * x.experts.size() / c.n_expert;
  }
  return total;
}

}  // namespace tps
