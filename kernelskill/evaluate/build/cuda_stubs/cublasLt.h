#pragma once
// Stub for compile-only checks on machines whose CUDA toolkit lacks this library's headers.
#include <cublas_v2.h>
typedef struct cublasLtContext *cublasLtHandle_t;
