// The loops for any CPU, compiled for the target's baseline instruction set.
#define ROTARY_CAPABILITY "DEFAULT"
#define ROTARY_KERNEL_TABLE kernel_table_DEFAULT
#include "kernels_impl.h"
