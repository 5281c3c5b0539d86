// The loops for any CPU, compiled for the target's baseline instruction set:
// always present, so every machine can run.
#define GDN_KERNEL_TABLE kernel_table_DEFAULT
#define GDN_CAPABILITY "DEFAULT"
#include "kernels_impl.h"
