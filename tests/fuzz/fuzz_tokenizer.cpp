// Builds the shared tokenizer before libFuzzer runs the first input.
#include "tests/fuzz/fuzz_tokenizer.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  tps::fuzz::tokenizer();
  return 0;
}
