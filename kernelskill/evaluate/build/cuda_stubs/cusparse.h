#pragma once
// Stub for compile-only checks on machines whose CUDA toolkit lacks this library's headers.
typedef struct cusparseContext *cusparseHandle_t;
typedef enum { CUSPARSE_STATUS_SUCCESS = 0 } cusparseStatus_t;
static inline const char* cusparseGetErrorString(cusparseStatus_t) { return ""; }
