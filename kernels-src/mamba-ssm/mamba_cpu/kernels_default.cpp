// The loops for any CPU, compiled for the target's baseline instruction set.
#define MAMBA_CPU_TABLE cpu_table_DEFAULT
#define MAMBA_CPU_CAPABILITY "DEFAULT"
#include "kernels_impl.h"
