#pragma once
// Stub for compile-only checks on machines whose CUDA toolkit lacks this library's headers.
typedef struct cublasContext *cublasHandle_t;
typedef enum { CUBLAS_STATUS_SUCCESS = 0 } cublasStatus_t;
