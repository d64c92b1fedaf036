#include <cstdlib>
#include <cstring>

#include "engine/kernels/kernel_set.h"
#include "runtime/error.h"

namespace tps {

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::scalar: return "scalar";
    case Isa::avx2: return "avx2";
    case Isa::avx512: return "avx512-vnni";
  }
  return "?";
}

const KernelSet& kernel_set(Isa isa) {
  switch (isa) {
    case Isa::avx2: return kAvx2Kernels;
    case Isa::avx512: return kAvx512Kernels;
    default: return kScalarKernels;
  }
}

std::vector<Isa> supported_isas() {
  std::vector<Isa> out{Isa::scalar};
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    out.push_back(Isa::avx2);
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512vnni"))
      out.push_back(Isa::avx512);
  }
  return out;
}

const KernelSet& best_kernel_set() {
  static const KernelSet& chosen = []() -> const KernelSet& {
    std::vector<Isa> isas = supported_isas();
    if (const char* want = std::getenv("TPS_ISA")) {
      for (Isa isa : isas)
        if (std::strcmp(want, isa_name(isa)) == 0 || (std::strcmp(want, "avx512") == 0 && isa == Isa::avx512))
          return kernel_set(isa);
      throw InputError(cat("TPS_ISA=", want,
                           ": not supported by this CPU (expected scalar, avx2 "
                           "or avx512)"));
    }
    return kernel_set(isas.back());
  }();
  return chosen;
}

}  // namespace tps
