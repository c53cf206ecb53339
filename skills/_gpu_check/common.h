#pragma once
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <vector>
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("FAIL CUDA error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__); exit(2);} } while (0)
static unsigned long long rng_state = 88172645463325252ull;
inline float frand() { rng_state ^= rng_state << 13; rng_state ^= rng_state >> 7; rng_state ^= rng_state << 17; return (float)((rng_state >> 11) % 2000001) / 1000000.0f - 1.0f; }
inline std::vector<float> rvec(size_t n, float scale = 1.f) { std::vector<float> v(n); for (auto& x : v) x = frand() * scale; return v; }
template <class T> T* dev(const std::vector<T>& h) { T* d; CK(cudaMalloc(&d, h.size() * sizeof(T) + 64)); CK(cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice)); return d; }
template <class T> T* dzero(size_t n) { T* d; CK(cudaMalloc(&d, n * sizeof(T) + 64)); CK(cudaMemset(d, 0, n * sizeof(T))); return d; }
template <class T> std::vector<T> host(const T* d, size_t n) { CK(cudaDeviceSynchronize()); std::vector<T> h(n); CK(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost)); return h; }
inline std::vector<__nv_bfloat16> to_bf(const std::vector<float>& v) { std::vector<__nv_bfloat16> o(v.size()); for (size_t i = 0; i < v.size(); ++i) o[i] = __float2bfloat16(v[i]); return o; }
inline std::vector<float> bf_round(const std::vector<float>& v) { std::vector<float> o(v.size()); for (size_t i = 0; i < v.size(); ++i) o[i] = __bfloat162float(__float2bfloat16(v[i])); return o; }
static int g_fail = 0;
inline void check(const char* name, const std::vector<float>& got, const std::vector<double>& ref, double atol, double rtol) {
  double worst = 0; size_t bad = 0, first = (size_t)-1;
  if (got.size() < ref.size()) { printf("FAIL %s: size\n", name); g_fail = 1; return; }
  for (size_t i = 0; i < ref.size(); ++i) { double e = fabs((double)got[i] - ref[i]); double lim = atol + rtol * fabs(ref[i]); if (!(e <= lim)) { if (first == (size_t)-1) first = i; ++bad; } if (e > worst || e != e) worst = e; }
  if (bad) { printf("FAIL %s: %zu/%zu bad, first %zu got %g ref %g, max err %g\n", name, bad, ref.size(), first, got[first], ref[first], worst); g_fail = 1; }
  else printf("PASS %s (max err %.3g)\n", name, worst);
}
inline std::vector<double> gemm_ref(const std::vector<float>& A, const std::vector<float>& B, int M, int N, int K, bool b_is_nk) {
  std::vector<double> C((size_t)M * N);
  for (int i = 0; i < M; ++i) for (int j = 0; j < N; ++j) { double s = 0; for (int k = 0; k < K; ++k) s += (double)A[(size_t)i * K + k] * (b_is_nk ? B[(size_t)j * K + k] : B[(size_t)k * N + j]); C[(size_t)i * N + j] = s; }
  return C;
}
