// The loops for any CPU, compiled for the target's baseline instruction set
// (SSE2 on x86-64). Always present, so every machine can run.
#define LAYERNORM_CAPABILITY DEFAULT
#define LAYERNORM_KERNEL_TABLE kernel_table_DEFAULT
#include "kernels_impl.h"
