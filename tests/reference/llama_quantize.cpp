// llama.cpp's own quantizer on a GGUF file, as llama-quantize runs it: the
// prebuilt libllama that node-llama-cpp ships (scripts/install-deps installs
// it) exports llama_model_quantize, so the tests get files made the way the
// files people download are made, with llama.cpp's choice of type per tensor
// and its own scales, without building llama.cpp.
//   llama_quantize_ref IN.gguf OUT.gguf TYPE     (TYPE: Q4_K_M, Q2_K, IQ4_XS, ...)
//   llama_quantize_ref --version   (this build: scripts/cached-model keys on it)
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>

#include "runtime/build_info.h"
#include "tests/test_paths.h"

namespace {

// Where node-llama-cpp keeps its prebuilt libraries.
const std::string kLlamaBins =
    std::string(tps::test_paths::reference) + "/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64";

// llama.h's llama_ftype values (stable: a file records its ftype by number).
const std::map<std::string, int32_t> kFileTypes{
    {"Q4_0", 2},    {"Q4_1", 3},    {"Q8_0", 7},    {"Q5_0", 8},    {"Q5_1", 9},
    {"Q2_K", 10},   {"Q3_K_M", 12}, {"Q4_K_S", 14}, {"Q4_K_M", 15}, {"Q5_K_S", 16},
    {"Q5_K_M", 17}, {"Q6_K", 18},   {"IQ4_NL", 25}, {"IQ4_XS", 30},
};

// llama_model_quantize_params begins with these two members in every
// release; the rest is left as llama_model_quantize_default_params fills it
// (with room to spare: the struct is 64 bytes in the pinned release).
struct QuantizeParams {
  int32_t nthread;
  int32_t ftype;
  unsigned char rest[512];
};

std::string library_path() {
  for (const auto& entry : std::filesystem::directory_iterator(kLlamaBins)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with("libllama.") && name.ends_with(".so")) return entry.path().string();
  }
  return {};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::string(argv[1]) == "--version") {
    std::printf("%s\n", tps::version_line("llama_quantize_ref").c_str());
    return 0;
  }
  if (argc != 4 || !kFileTypes.count(argv[3])) {
    std::fprintf(stderr, "usage: llama_quantize_ref IN.gguf OUT.gguf TYPE (TYPE: ");
    for (const auto& [name, id] : kFileTypes) std::fprintf(stderr, "%s ", name.c_str());
    std::fprintf(stderr, ")\n");
    return 2;
  }
  std::error_code error;
  const std::string path = std::filesystem::exists(kLlamaBins, error) ? library_path() : std::string();
  void* lib = path.empty() ? nullptr : dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    std::fprintf(stderr, "llama_quantize_ref: no libllama in %s (scripts/install-deps installs node-llama-cpp)%s%s\n",
                 kLlamaBins.c_str(), path.empty() ? "" : ": ", path.empty() ? "" : dlerror());
    return 1;
  }
  auto init = reinterpret_cast<void (*)()>(dlsym(lib, "llama_backend_init"));
  auto defaults = reinterpret_cast<QuantizeParams (*)()>(dlsym(lib, "llama_model_quantize_default_params"));
  auto quantize =
      reinterpret_cast<uint32_t (*)(const char*, const char*, const QuantizeParams*)>(dlsym(lib, "llama_model_quantize"));
  if (!init || !defaults || !quantize) {
    std::fprintf(stderr, "llama_quantize_ref: %s lacks llama_model_quantize\n", path.c_str());
    return 1;
  }
  init();
  QuantizeParams params = defaults();
  params.nthread = 2;
  params.ftype = kFileTypes.at(argv[3]);
  const uint32_t status = quantize(argv[1], argv[2], &params);
  if (status != 0) std::fprintf(stderr, "llama_quantize_ref: llama_model_quantize failed (%u)\n", status);
  return status == 0 ? 0 : 1;
}
