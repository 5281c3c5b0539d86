// The loops for any CPU: at::vec's portable vectors, compiled for the baseline
// instruction set of the target. Always present, so every machine can run.
#define CPU_CAPABILITY DEFAULT
#define CPU_CAPABILITY_DEFAULT
#define FLASH_ATTN2_KERNEL_TABLE kernel_table_DEFAULT
#include "kernels_impl.h"
