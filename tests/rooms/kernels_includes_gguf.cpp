// Compiled as if it were a kernel: the rooms below kernels stay visible.
#include "engine/gguf/quant_blocks.h"
#include "engine/kernels/kernel_set.h"
