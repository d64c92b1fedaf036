// libFuzzer target for the GGUF reader: any byte string either parses --
// then every metadata value goes through every typed accessor and every
// tensor view is read at both ends and its first row decoded where tps can
// decode it -- or is refused with an InputError. Anything else (a crash, a
// sanitizer report, another exception, an allocation over -malloc_limit_mb)
// is a finding. Parsing is GgufFile::from_memory, the same code as open().
//
// scripts/fuzz-gguf does all of this (TPS_FUZZ_SECONDS, default 60):
//   CC=clang CXX=clang++ cmake -S . -B build-fuzz -DTPS_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo
//   cmake --build build-fuzz --target gguf_fuzz gguf_fuzz_seeds
//   build-fuzz/bin/gguf_fuzz_seeds build-fuzz/corpus
//   build-fuzz/bin/gguf_fuzz build-fuzz/corpus -max_total_time=60 -max_len=4096 \
//     -malloc_limit_mb=64 -timeout=10 -artifact_prefix=build-fuzz/findings/
// A finding is replayed with: build-fuzz/bin/gguf_fuzz build-fuzz/findings/crash-...
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "engine/gguf/gguf_reader.h"
#include "engine/gguf/quant_blocks.h"
#include "runtime/error.h"

namespace {

// Typed access to a value of the wrong type is an InputError too: each
// accessor is tried on its own so that one refusal does not hide the rest.
size_t attempt(const std::function<size_t()>& access) {
  try {
    return access();
  } catch (const tps::InputError&) {
    return 0;
  }
}

size_t touch_metadata(const tps::GgufFile& f, const tps::MetaEntry& e) {
  const std::string_view k = e.key;
  size_t sink = f.value_text(e, e.count + 1).size();
  sink += attempt([&] { return static_cast<size_t>(*f.find_u64(k)); });
  sink += attempt([&] { return static_cast<size_t>(*f.find_u32(k)); });
  sink += attempt([&] { return static_cast<size_t>(*f.find_f32(k) != 0); });
  sink += attempt([&] { return f.get_string(k).size(); });
  sink += attempt([&] { return static_cast<size_t>(*f.find_bool(k)); });
  sink += attempt([&] { return static_cast<size_t>(f.get_array_info(k).count); });
  sink += attempt([&] {
    size_t n = 0;
    for (std::string_view s : f.get_string_array(k)) n += s.size() + (s.empty() ? 0 : s.back());
    return n;
  });
  sink += attempt([&] { return f.get_i32_array(k).size(); });
  return sink;
}

size_t touch_tensor(const tps::GgufFile& f, const tps::TensorView& t) {
  size_t sink = t.data[0] + t.data[t.bytes - 1] + (f.find_tensor(t.name) == &t);
  switch (t.type) {
    case tps::GgmlType::F32:
    case tps::GgmlType::F16:
    case tps::GgmlType::BF16:
    case tps::GgmlType::Q8_0:
    case tps::GgmlType::Q4_0:
    case tps::GgmlType::MXFP4: {
      std::vector<float> row(t.ne[0]);  // a row fits in the input, so it is small
      tps::dequantize_row(t.type, t.data, row.data(), row.size());
      sink += row[0] != 0;
      break;
    }
    default: break;
  }
  return sink;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    tps::GgufFile f = tps::GgufFile::from_memory(data, size, "fuzz.gguf");
    size_t sink = f.alignment() + f.data_offset();
    for (const tps::MetaEntry& e : f.metadata()) sink += touch_metadata(f, e);
    for (const tps::TensorView& t : f.tensors()) sink += touch_tensor(f, t);
    volatile size_t keep = sink;
    (void)keep;
  } catch (const tps::InputError&) {
  }
  return 0;
}
