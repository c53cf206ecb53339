#pragma once
// Stub for compile-only checks on machines whose CUDA toolkit lacks this library's headers.
