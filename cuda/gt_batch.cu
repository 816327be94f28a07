// gt_batch.cu: the CUDA kernels of the batch pipeline. Each is a thin wrapper:
// thread i of n runs gt_<kernel>_thread(&args, i) from gt_batch.cuh, where all
// the logic (and the data flow) is described.
//
// Launch: grid = ceil(n / 256), block = 256; the arguments are one struct by
// value (mirrored in rust/kernels/abi.rs) and the thread count n. The long-
// word kernels' threads are the lanes of a block (n a multiple of 256; see
// GT_EACH_LANE in gt_common.cuh).
#include "gt_batch.cuh"

#define GT_DEFINE_KERNEL(name, Args)                                   \
    extern "C" __global__ void name(Args args, gt_u32 n) {             \
        gt_u32 i = blockIdx.x * blockDim.x + threadIdx.x;              \
        if (i < n) name##_thread(&args, i);                            \
    }
GT_BATCH_KERNELS(GT_DEFINE_KERNEL)
