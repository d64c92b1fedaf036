// libFuzzer target for the GGUF reader: any byte string either parses --
// then every metadata value and tensor view is touched -- or is refused with
// an InputError. Anything else (a crash, a sanitizer report, another
// exception) is a finding.
//
// Built only with -DTPS_FUZZ=ON and clang; scripts/fuzz-gguf builds it,
// makes a seed corpus with gguf_fuzz_seeds and runs it for a bounded time.
#include <cstddef>
#include <cstdint>

#include "engine/gguf_reader.h"
#include "runtime/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    tps::GgufFile f = tps::GgufFile::from_memory(data, size, "fuzz.gguf");
    size_t sink = 0;
    for (const tps::MetaEntry& e : f.metadata()) {
      sink += f.value_text(e, 64).size();
      if (e.type == tps::GgufType::ARRAY && e.elem_type == tps::GgufType::STRING)
        sink += f.get_string_array(e.key).size();
    }
    for (const tps::TensorView& t : f.tensors()) {
      if (t.bytes) sink += t.data[0] + t.data[t.bytes - 1];
      sink += f.find_tensor(t.name) == &t;
    }
    volatile size_t keep = sink;
    (void)keep;
  } catch (const tps::InputError&) {
  }
  return 0;
}
