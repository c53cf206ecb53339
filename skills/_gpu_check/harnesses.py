"""GPU harnesses for the CUDA skill examples: run.sh writes each example plus its harness
into a build directory, compiles it for sm_90a and checks it against a CPU reference."""
import pathlib, sys, tomllib
H = {}
H["wgmma-hopper"] = r'''
  int M = 128, N = 16, K = 64;
  auto X = bf_round(rvec(M * K)), W = bf_round(rvec(N * K));
  auto dX = dev(to_bf(X)); auto dW = dev(to_bf(W)); float* dY = dzero<float>(M * N);
  linear_wgmma_m64n8k16<<<dim3(N / 8, M / 64), 128>>>(dX, dW, dY, M, N, K);
  check("wgmma", host(dY, M * N), gemm_ref(X, W, M, N, K, true), 1e-3, 1e-3);
'''
H["mma-sync-ldmatrix"] = r'''
  int M = 32, N = 16, K = 48;
  auto X = bf_round(rvec(M * K)), W = bf_round(rvec(N * K));
  auto dX = dev(to_bf(X)); auto dW = dev(to_bf(W)); float* dY = dzero<float>(M * N);
  linear_mma_m16n8k16<<<dim3(N / 8, M / 16), 32>>>(dX, dW, dY, M, N, K);
  check("mma.sync", host(dY, M * N), gemm_ref(X, W, M, N, K, true), 1e-3, 1e-3);
'''
H["cp-async-pipeline"] = r'''
  int M = 64, N = 96, K = 128;
  auto A = rvec(M * K), B = rvec(K * N); auto dA = dev(A), dB = dev(B); float* dC = dzero<float>(M * N);
  sgemm_cp_async<<<dim3(N / 32, M / 32), dim3(32, 32)>>>(dA, dB, dC, M, N, K);
  check("cp.async", host(dC, M * N), gemm_ref(A, B, M, N, K, false), 1e-4, 1e-4);
'''
H["tma-bulk-copy"] = r'''
  int n = 4 * CHUNK; auto x = rvec(n); auto dx = dev(x); float* dy = dzero<float>(n);
  scale_tma<<<4, 256>>>(dx, dy, 3.f);
  std::vector<double> ref(n); for (int i = 0; i < n; ++i) ref[i] = 3.0 * x[i];
  check("tma", host(dy, n), ref, 1e-6, 1e-6);
'''
H["online-softmax"] = r'''
  for (int cols : {1000, 3000, 7}) {
    int rows = 5; auto x = rvec(rows * cols, 8.f); auto dx = dev(x); float* dy = dzero<float>(rows * cols);
    softmax_online<<<rows, 256>>>(dx, dy, cols);
    std::vector<double> ref(rows * cols);
    for (int r = 0; r < rows; ++r) { double m = -1e30, s = 0; for (int c = 0; c < cols; ++c) m = fmax(m, x[r * cols + c]);
      for (int c = 0; c < cols; ++c) s += exp(x[r * cols + c] - m); for (int c = 0; c < cols; ++c) ref[r * cols + c] = exp(x[r * cols + c] - m) / s; }
    check("online softmax", host(dy, rows * cols), ref, 1e-6, 1e-4);
  }
'''
H["welford-variance"] = r'''
  int rows = 37, cols = 300; auto x = rvec(rows * cols, 3.f); for (auto& v : x) v += 50.f;
  auto dx = dev(x); float* dy = dzero<float>(rows * cols);
  layernorm_welford<<<(rows + 7) / 8, 256>>>(dx, dy, rows, cols, 1e-5f);
  std::vector<double> ref(rows * cols);
  for (int r = 0; r < rows; ++r) { double m = 0, v = 0; for (int c = 0; c < cols; ++c) m += x[r * cols + c]; m /= cols;
    for (int c = 0; c < cols; ++c) v += (x[r * cols + c] - m) * (x[r * cols + c] - m); v /= cols;
    for (int c = 0; c < cols; ++c) ref[r * cols + c] = (x[r * cols + c] - m) / sqrt(v + 1e-5); }
  check("welford layernorm", host(dy, rows * cols), ref, 1e-3, 1e-3);
'''
H["warp-scan-prefix-sum"] = r'''
  for (int cols : {2500, 100, 256}) {
    int rows = 3; auto x = rvec(rows * cols); auto dx = dev(x); float* dy = dzero<float>(rows * cols);
    cumsum_rows<<<rows, 256>>>(dx, dy, cols);
    std::vector<double> ref(rows * cols); for (int r = 0; r < rows; ++r) { double s = 0; for (int c = 0; c < cols; ++c) { s += x[r * cols + c]; ref[r * cols + c] = s; } }
    check("cumsum", host(dy, rows * cols), ref, 1e-3, 1e-4);
  }
'''
H["single-pass-grid-reduction"] = r'''
  size_t n = 1000003; auto a = rvec(n), b = rvec(n); auto da = dev(a), db = dev(b);
  float* part = dzero<float>(264); float* out = dzero<float>(1);
  double s = 0; for (size_t i = 0; i < n; ++i) s += (double)(a[i] - b[i]) * (a[i] - b[i]);
  for (int rep = 0; rep < 3; ++rep) { mse_loss<<<264, 256>>>(da, db, n, part, out); check("mse single pass", host(out, 1), {s / n}, 1e-6, 1e-5); }
'''
H["flash-attention-tiling"] = r'''
  int BH = 2, L = 100; const int D = 64; float scale = 0.125f;
  auto Q = rvec(BH * L * D), K = rvec(BH * L * D), V = rvec(BH * L * D);
  auto dQ = dev(Q), dK = dev(K), dV = dev(V); float* dO = dzero<float>(BH * L * D);
  flash_attn_fwd<64><<<dim3((L + 63) / 64, BH), 64>>>(dQ, dK, dV, dO, L, scale);
  std::vector<double> ref(BH * L * D);
  for (int h = 0; h < BH; ++h) for (int i = 0; i < L; ++i) { std::vector<double> s(L); double m = -1e30, l = 0;
    for (int j = 0; j < L; ++j) { double t = 0; for (int d = 0; d < D; ++d) t += Q[(h * L + i) * D + d] * K[(h * L + j) * D + d]; s[j] = t * scale; m = fmax(m, s[j]); }
    for (int j = 0; j < L; ++j) { s[j] = exp(s[j] - m); l += s[j]; }
    for (int d = 0; d < D; ++d) { double o = 0; for (int j = 0; j < L; ++j) o += s[j] * V[(h * L + j) * D + d]; ref[(h * L + i) * D + d] = o / l; } }
  check("flash attention", host(dO, BH * L * D), ref, 1e-4, 1e-3);
'''
H["implicit-gemm-conv"] = r'''
  int N = 2, C = 3, H = 9, W = 11, OC = 5, KH = 3, KW = 3, P = 1; int OH = H + 2 * P - KH + 1, OW = W + 2 * P - KW + 1;
  auto x = rvec(N * C * H * W), w = rvec(OC * C * KH * KW); auto dx = dev(x), dw = dev(w); float* dy = dzero<float>(N * OC * OH * OW);
  conv2d_implicit_gemm<<<dim3((OC + 15) / 16, (N * OH * OW + 15) / 16), dim3(16, 16)>>>(dx, dw, dy, N, C, H, W, OC, KH, KW, P);
  std::vector<double> ref(N * OC * OH * OW);
  for (int n = 0; n < N; ++n) for (int o = 0; o < OC; ++o) for (int oh = 0; oh < OH; ++oh) for (int ow = 0; ow < OW; ++ow) { double s = 0;
    for (int c = 0; c < C; ++c) for (int i = 0; i < KH; ++i) for (int j = 0; j < KW; ++j) { int ih = oh + i - P, iw = ow + j - P;
      if (ih >= 0 && ih < H && iw >= 0 && iw < W) s += x[((n * C + c) * H + ih) * W + iw] * w[((o * C + c) * KH + i) * KW + j]; }
    ref[((n * OC + o) * OH + oh) * OW + ow] = s; }
  check("implicit gemm conv", host(dy, N * OC * OH * OW), ref, 1e-4, 1e-4);
'''
H["register-tiling"] = r'''
  int M = 128, N = 64, K = 48; auto A = rvec(M * K), B = rvec(K * N); auto dA = dev(A), dB = dev(B); float* dC = dzero<float>(M * N);
  sgemm_regtile<<<dim3(N / 64, M / 64), dim3(16, 16)>>>(dA, dB, dC, M, N, K);
  check("register tiling", host(dC, M * N), gemm_ref(A, B, M, N, K, false), 1e-4, 1e-4);
'''
H["shared-memory-tiling"] = r'''
  int M = 50, N = 70, K = 45; auto A = rvec(M * K), B = rvec(K * N); auto dA = dev(A), dB = dev(B); float* dC = dzero<float>(M * N);
  sgemm_smem_tiled<<<dim3((N + 31) / 32, (M + 31) / 32), dim3(32, 32)>>>(dA, dB, dC, M, N, K);
  check("smem tiling", host(dC, M * N), gemm_ref(A, B, M, N, K, false), 1e-4, 1e-4);
'''
H["threadblock-swizzle-l2"] = r'''
  int M = 300, N = 70, K = 50; auto A = rvec(M * K), B = rvec(K * N); auto dA = dev(A), dB = dev(B); float* dC = dzero<float>(M * N);
  sgemm_swizzled<<<((M + 31) / 32) * ((N + 31) / 32), dim3(32, 32)>>>(dA, dB, dC, M, N, K);
  check("swizzled gemm", host(dC, M * N), gemm_ref(A, B, M, N, K, false), 1e-4, 1e-4);
'''
H["fuse-gemm-epilogue"] = r'''
  int M = 50, N = 40, K = 70; auto X = rvec(M * K), W = rvec(N * K), b = rvec(N), r = rvec(M * N);
  auto dX = dev(X), dW = dev(W), db = dev(b), dr = dev(r); float* dY = dzero<float>(M * N);
  linear_fused_epilogue<<<dim3((N + 31) / 32, (M + 31) / 32), dim3(32, 32)>>>(dX, dW, db, dr, dY, M, N, K, 1.5f, 0.1f, 2.f);
  auto ref = gemm_ref(X, W, M, N, K, true);
  for (int i = 0; i < M; ++i) for (int j = 0; j < N; ++j) { double v = fmax(ref[i * N + j] + b[j], 0.0) * 1.5; v = fmin(fmax(v, 0.1), 2.0); ref[i * N + j] = v + r[i * N + j]; }
  check("gemm epilogue", host(dY, M * N), ref, 1e-4, 1e-4);
'''
H["fuse-reduction-with-producer"] = r'''
  int B = 20, C = 1000; auto x = rvec(B * C, 5.f); std::vector<long long> t(B); for (int i = 0; i < B; ++i) t[i] = (i * 37) % C;
  auto dx = dev(x); auto dt = dev(t); float* dl = dzero<float>(B);
  cross_entropy_rows<<<(B + 7) / 8, 256>>>(dx, dt, dl, B, C);
  std::vector<double> ref(B); for (int r = 0; r < B; ++r) { double m = -1e30, s = 0; for (int c = 0; c < C; ++c) m = fmax(m, x[r * C + c]); for (int c = 0; c < C; ++c) s += exp(x[r * C + c] - m); ref[r] = m + log(s) - x[r * C + t[r]]; }
  check("cross entropy", host(dl, B), ref, 1e-4, 1e-4);
'''
H["smem-bank-conflict-padding"] = r'''
  int M = 70, N = 45; auto x = rvec(M * N); auto dx = dev(x); float* dy = dzero<float>(M * N);
  transpose_padded<<<dim3((N + 31) / 32, (M + 31) / 32), dim3(32, 8)>>>(dx, dy, M, N);
  std::vector<double> ref(M * N); for (int i = 0; i < M; ++i) for (int j = 0; j < N; ++j) ref[j * M + i] = x[i * N + j];
  check("transpose", host(dy, M * N), ref, 0, 0);
'''
H["triangular-loop-bounds"] = r'''
  int N = 100; auto A = rvec(N * N), B = rvec(N * N); for (int i = 0; i < N; ++i) for (int j = i + 1; j < N; ++j) A[i * N + j] = B[i * N + j] = 0;
  auto dA = dev(A), dB = dev(B); float* dC = dzero<float>(N * N);
  tril_matmul<<<dim3((N + 15) / 16, (N + 15) / 16), dim3(16, 16)>>>(dA, dB, dC, N);
  check("tril matmul", host(dC, N * N), gemm_ref(A, B, N, N, N, false), 1e-4, 1e-4);
'''
H["avoid-materializing-intermediates"] = r'''
  int N = 33, M = 20, D = 37; auto x = rvec(N * D), y = rvec(M * D); auto dx = dev(x), dy = dev(y); float* dd = dzero<float>(N * M);
  pairwise_sqdist<<<dim3((M + 15) / 16, (N + 15) / 16), dim3(16, 16)>>>(dx, dy, dd, N, M, D);
  std::vector<double> ref(N * M); for (int i = 0; i < N; ++i) for (int j = 0; j < M; ++j) { double s = 0; for (int k = 0; k < D; ++k) s += (double)(x[i * D + k] - y[j * D + k]) * (x[i * D + k] - y[j * D + k]); ref[i * M + j] = s; }
  check("pairwise", host(dd, N * M), ref, 1e-4, 1e-4);
'''
H["tf32-tensor-cores"] = r'''
  int M = 32, N = 32, K = 64; auto A = rvec(M * K), B = rvec(K * N); auto dA = dev(A), dB = dev(B); float* dC = dzero<float>(M * N);
  gemm_tf32_wmma<<<dim3(N / 16, M / 16), 32>>>(dA, dB, dC, M, N, K);
  check("tf32 wmma", host(dC, M * N), gemm_ref(A, B, M, N, K, false), 1e-2, 1e-2);
'''
H["tensor-cores-wmma"] = r'''
  int M = 32, N = 32, K = 48; auto A = rvec(M * K), B = rvec(K * N);
  std::vector<half> hA(M * K), hB(K * N); for (int i = 0; i < M * K; ++i) { hA[i] = __float2half(A[i]); A[i] = __half2float(hA[i]); }
  for (int i = 0; i < K * N; ++i) { hB[i] = __float2half(B[i]); B[i] = __half2float(hB[i]); }
  auto dA = dev(hA), dB = dev(hB); float* dC = dzero<float>(M * N);
  gemm_wmma<<<dim3(N / 16, M / 16), 32>>>(dA, dB, dC, M, N, K);
  check("wmma", host(dC, M * N), gemm_ref(A, B, M, N, K, false), 1e-3, 1e-3);
'''
H["bf16-weights-fp32-accumulate"] = r'''
  int rows = 50, cols = 256; auto W = rvec(rows * cols), x = rvec(cols); auto dW32 = dev(W), dx = dev(x);
  __nv_bfloat16* dW; CK(cudaMalloc(&dW, rows * cols * 2)); float* dy = dzero<float>(rows);
  to_bf16<<<64, 256>>>(dW32, dW, (size_t)rows * cols);
  gemv_bf16w<<<(rows + 7) / 8, 256>>>(dW, dx, dy, rows, cols);
  auto Wr = bf_round(W); std::vector<double> ref(rows); for (int r = 0; r < rows; ++r) { double s = 0; for (int c = 0; c < cols; ++c) s += (double)Wr[r * cols + c] * x[c]; ref[r] = s; }
  check("bf16 gemv", host(dy, rows), ref, 1e-4, 1e-4);
'''
H["fp32-accumulation"] = r'''
  int rows = 4, cols = 1000; auto x = bf_round(rvec(rows * cols)); for (auto& v : x) v = __bfloat162float(__float2bfloat16(v + 3.f));
  auto dx = dev(to_bf(x)); __nv_bfloat16* dout = dzero<__nv_bfloat16>(rows);
  row_mean_bf16<<<rows, 128>>>(dx, dout, cols);
  auto o = host(dout, rows); std::vector<float> of(rows); for (int i = 0; i < rows; ++i) of[i] = __bfloat162float(o[i]);
  std::vector<double> ref(rows); for (int r = 0; r < rows; ++r) { double s = 0; for (int c = 0; c < cols; ++c) s += x[r * cols + c]; ref[r] = s / cols; }
  check("bf16 row mean", of, ref, 0, 8e-3);
'''
H["cuda-graphs"] = r'''
  int n = 1000, layers = 4, steps = 3; auto x = rvec(n); float* d = dev(x);
  CK(run_steps(d, n, layers, steps, 0)); CK(cudaDeviceSynchronize());
  std::vector<double> ref(x.begin(), x.end());
  for (int s = 0; s < steps; ++s)
    for (int l = 0; l < layers; ++l) for (auto& v : ref) { v = (double)(float)(v + (0.5f * l - 1.f)); v = fmax(v, 0.0); }
  check("cuda graph", host(d, n), ref, 1e-6, 1e-6);
'''
H["warp-per-row-mapping"] = r'''
  int rows = 19, cols = 77; auto x = rvec(rows * cols); auto dx = dev(x); float* dy = dzero<float>(rows * cols);
  l2_normalize_rows<<<(rows + 7) / 8, 256>>>(dx, dy, rows, cols, 1e-12f);
  std::vector<double> ref(rows * cols); for (int r = 0; r < rows; ++r) { double s = 0; for (int c = 0; c < cols; ++c) s += (double)x[r * cols + c] * x[r * cols + c]; for (int c = 0; c < cols; ++c) ref[r * cols + c] = x[r * cols + c] / sqrt(s); }
  check("l2 normalize", host(dy, rows * cols), ref, 1e-6, 1e-5);
'''
H["fuse-residual-norm"] = r'''
  int rows = 7, cols = 300; auto x = rvec(rows * cols), r = rvec(rows * cols), g = rvec(cols); auto dx = dev(x), dr = dev(r), dg = dev(g);
  float* dh = dzero<float>(rows * cols); float* dy = dzero<float>(rows * cols);
  add_rmsnorm<<<rows, 128, cols * sizeof(float)>>>(dx, dr, dg, dh, dy, cols, 1e-6f);
  std::vector<double> ref(rows * cols), refh(rows * cols);
  for (int i = 0; i < rows; ++i) { double ss = 0; for (int c = 0; c < cols; ++c) { double h = (double)(x[i * cols + c] + r[i * cols + c]); refh[i * cols + c] = h; ss += h * h; }
    double rs = 1 / sqrt(ss / cols + 1e-6); for (int c = 0; c < cols; ++c) ref[i * cols + c] = refh[i * cols + c] * rs * g[c]; }
  check("residual rmsnorm y", host(dy, rows * cols), ref, 1e-5, 1e-4); check("residual rmsnorm h", host(dh, rows * cols), refh, 1e-6, 1e-6);
  for (int cols2 : {77, 1024, 33}) {                       // warp per row, the row in registers (V = ceil(cols / 32))
    const int rows2 = 19; auto x2 = rvec(rows2 * cols2, 2.f), r2 = rvec(rows2 * cols2), g2 = rvec(cols2), b2 = rvec(cols2);
    for (auto& v : x2) v += 5.f;
    auto dx2 = dev(x2), dr2 = dev(r2), dg2 = dev(g2), db2 = dev(b2); float* dy2 = dzero<float>(rows2 * cols2);
    const int blocks = (rows2 + 7) / 8;
    if (cols2 <= 64) add_layernorm_warp<2><<<blocks, 256>>>(dx2, dr2, dg2, db2, dy2, rows2, cols2, 1e-5f);
    else if (cols2 <= 96) add_layernorm_warp<3><<<blocks, 256>>>(dx2, dr2, dg2, db2, dy2, rows2, cols2, 1e-5f);
    else add_layernorm_warp<32><<<blocks, 256>>>(dx2, dr2, dg2, db2, dy2, rows2, cols2, 1e-5f);
    CK(cudaGetLastError());
    std::vector<double> ref2((size_t)rows2 * cols2);
    for (int i = 0; i < rows2; ++i) { double s = 0, q = 0; for (int c = 0; c < cols2; ++c) s += (double)(x2[i * cols2 + c] + r2[i * cols2 + c]);
      const double m = s / cols2; for (int c = 0; c < cols2; ++c) { const double d = (double)(x2[i * cols2 + c] + r2[i * cols2 + c]) - m; q += d * d; }
      const double rs = 1 / sqrt(q / cols2 + 1e-5); for (int c = 0; c < cols2; ++c) ref2[i * cols2 + c] = ((double)(x2[i * cols2 + c] + r2[i * cols2 + c]) - m) * rs * g2[c] + b2[c]; }
    char name[64]; snprintf(name, sizeof name, "residual layernorm warp per row cols=%d", cols2);
    check(name, host(dy2, (size_t)rows2 * cols2), ref2, 1e-5, 1e-4);
  }
'''
H["persistent-kernel"] = r'''
  int rows = 1000; auto W = rvec(64 * 32), x = rvec(rows * 32); auto dW = dev(W), dx = dev(x); float* dy = dzero<float>(rows * 64);
  launch_persistent(dW, dx, dy, rows, 0);
  check("persistent", host(dy, rows * 64), gemm_ref(x, W, rows, 64, 32, true), 1e-5, 1e-5);
'''
H["warp-shuffle-reduction"] = r'''
  int rows = 9, cols = 5000; auto x = rvec(rows * cols); auto dx = dev(x); float* d = dzero<float>(rows);
  row_sum<<<rows, 256>>>(dx, d, cols);
  std::vector<double> ref(rows); for (int r = 0; r < rows; ++r) { double s = 0; for (int c = 0; c < cols; ++c) s += x[r * cols + c]; ref[r] = s; }
  check("row sum", host(d, rows), ref, 1e-3, 1e-4);
'''
H["coalesced-global-access"] = r'''
  int rows = 100, cols = 300; auto x = rvec(rows * cols); auto dx = dev(x); float* d1 = dzero<float>(cols); float* d2 = dzero<float>(cols);
  std::vector<float> xt(rows * cols); for (int r = 0; r < rows; ++r) for (int c = 0; c < cols; ++c) xt[c * rows + r] = x[r * cols + c]; auto dxt = dev(xt);
  col_sum_coalesced<<<(cols + 255) / 256, 256>>>(dx, d1, rows, cols); col_sum_strided<<<(cols + 255) / 256, 256>>>(dxt, d2, rows, cols);
  std::vector<double> ref(cols); for (int c = 0; c < cols; ++c) { double s = 0; for (int r = 0; r < rows; ++r) s += x[r * cols + c]; ref[c] = s; }
  check("col sum", host(d1, cols), ref, 1e-4, 1e-4); check("col sum strided", host(d2, cols), ref, 1e-4, 1e-4);
'''
H["vectorized-16byte-access"] = r'''
  size_t n = 1003; auto x = rvec(n); auto dx = dev(x); float* dy = dzero<float>(n);
  if (!aligned16(dx, dy)) { printf("FAIL alignment\n"); return 1; }
  scale_bias_vec4<<<2, 64>>>(dx, dy, 2.f, 0.5f, n);
  std::vector<double> ref(n); for (size_t i = 0; i < n; ++i) ref[i] = 2.0 * x[i] + 0.5;
  check("vec4", host(dy, n), ref, 1e-6, 1e-6);
'''
H["fast-math-intrinsics"] = r'''
  size_t n = 5000; int cols = 100; auto x = rvec(n, 6.f); std::vector<float> mx(n / cols); for (size_t r = 0; r < n / cols; ++r) { float m = -1e30f; for (int c = 0; c < cols; ++c) m = fmaxf(m, x[r * cols + c]); mx[r] = m; }
  auto dx = dev(x), dm = dev(mx); float* dy = dzero<float>(n); float* ds = dzero<float>(n);
  scaled_exp<<<8, 256>>>(dx, dm, dy, 0.7f, cols, n); silu_kernel<<<8, 256>>>(dx, ds, n);
  std::vector<double> r1(n), r2(n); for (size_t i = 0; i < n; ++i) { r1[i] = exp(0.7 * (x[i] - mx[i / cols])); r2[i] = x[i] / (1 + exp(-(double)x[i])); }
  check("scaled exp", host(dy, n), r1, 1e-6, 1e-5); check("silu fast", host(ds, n), r2, 1e-5, 1e-5);
'''
H["loop-unrolling-templates"] = r'''
  for (int ks : {3, 5}) { int N = 2, C = 3, H = 20, W = 300; int OH = H - ks + 1, OW = W - ks + 1;
    auto x = rvec(N * C * H * W), w = rvec(C * ks * ks); auto dx = dev(x), dw = dev(w); float* dy = dzero<float>(N * C * OH * OW);
    launch_depthwise(dx, dw, dy, N, C, H, W, ks, 0);
    std::vector<double> ref(N * C * OH * OW);
    for (int nc = 0; nc < N * C; ++nc) for (int oh = 0; oh < OH; ++oh) for (int ow = 0; ow < OW; ++ow) { double s = 0; for (int i = 0; i < ks; ++i) for (int j = 0; j < ks; ++j) s += x[(nc * H + oh + i) * W + ow + j] * w[(nc % C) * ks * ks + i * ks + j]; ref[(nc * OH + oh) * OW + ow] = s; }
    check("depthwise", host(dy, N * C * OH * OW), ref, 1e-5, 1e-5); }
'''
H["horizontal-kernel-merge"] = r'''
  int na = 300, nb = 1000, nc = 77; auto a = rvec(na), b = rvec(nb), c = rvec(nc), d = rvec(nc);
  Tasks t{dev(a), dev(b), dev(c), dev(d), 3.f, na, nb, nc}; launch_merged(t, 0);
  std::vector<double> ra(na), rb(nb), rc(nc); for (int i = 0; i < na; ++i) ra[i] = fmax(a[i], 0.f); for (int i = 0; i < nb; ++i) rb[i] = 3.0 * b[i]; for (int i = 0; i < nc; ++i) rc[i] = (double)c[i] + d[i];
  check("merged a", host(t.a, na), ra, 1e-6, 1e-6); check("merged b", host(t.b, nb), rb, 1e-6, 1e-6); check("merged c", host(t.c, nc), rc, 1e-6, 1e-6);
'''
H["grid-size-to-sm-count"] = r'''
  size_t n = 1 << 20; auto x = rvec(n), y = rvec(n); auto dx = dev(x), dy = dev(y); launch_axpy(dx, dy, 2.f, n, 0);
  std::vector<double> ref(n); for (size_t i = 0; i < n; ++i) ref[i] = 2.0 * x[i] + y[i];
  check("axpy", host(dy, n), ref, 1e-6, 1e-6);
'''
H["cache-hints-streaming"] = r'''
  int rows = 30, cols = 70; auto x = rvec(rows * cols), w = rvec(cols), b = rvec(cols); auto dx = dev(x), dw = dev(w), db = dev(b); float* dy = dzero<float>(rows * cols);
  scale_rows_streaming<<<4, 128>>>(dx, dw, db, dy, rows, cols);
  std::vector<double> ref(rows * cols); for (int i = 0; i < rows * cols; ++i) ref[i] = (double)x[i] * w[i % cols] + b[i % cols];
  check("streaming", host(dy, rows * cols), ref, 1e-6, 1e-6);
'''
H["occupancy-launch-bounds"] = r'''
  int rows = 10, cols = 500; auto src = rvec(20 * cols); std::vector<long long> idx(rows); for (int i = 0; i < rows; ++i) idx[i] = (i * 7) % 20;
  auto ds = dev(src); auto di = dev(idx); float* dd = dzero<float>(rows * cols); int bs = best_block_size(); if (bs > 256 || bs <= 0) bs = 256;
  gather_rows<<<rows, bs>>>(ds, di, dd, rows, cols);
  std::vector<double> ref(rows * cols); for (int r = 0; r < rows; ++r) for (int c = 0; c < cols; ++c) ref[r * cols + c] = src[idx[r] * cols + c];
  check("gather", host(dd, rows * cols), ref, 0, 0);
'''
H["fuse-elementwise-chain"] = r'''
  int N = 2, C = 3, HW = 50; size_t n = N * C * HW; auto x = rvec(n, 3.f), s = rvec(C), b = rvec(C); auto dx = dev(x), ds = dev(s), db = dev(b); float* dy = dzero<float>(n);
  launch(dx, ds, db, dy, n, C, HW, -0.1f, 1.f, 132, 0);
  std::vector<double> ref(n); for (size_t i = 0; i < n; ++i) { int c = (i / HW) % C; double v = (double)x[i] * s[c] + b[c]; v = 0.5 * v * (1 + tanh(0.7978845608028654 * (v + 0.044715 * v * v * v))); ref[i] = fmin(fmax(v, -0.1), 1.0); }
  check("fused chain", host(dy, n), ref, 1e-5, 1e-5);
'''
H["diagonal-matrix-shortcut"] = r'''
  int N = 30, M = 50; auto a = rvec(N), B = rvec(N * M), b = rvec(M); auto da = dev(a), dB = dev(B), db = dev(b); float* dC = dzero<float>(N * M); float* dD = dzero<float>(N * M);
  diag_matmul<<<8, 128>>>(da, dB, dC, N, M); matmul_diag<<<8, 128>>>(dB, db, dD, N, M);
  std::vector<double> r1(N * M), r2(N * M); for (int i = 0; i < N * M; ++i) { r1[i] = (double)a[i / M] * B[i]; r2[i] = (double)B[i] * b[i % M]; }
  check("diag left", host(dC, N * M), r1, 1e-6, 1e-6); check("diag right", host(dD, N * M), r2, 1e-6, 1e-6);
'''

H["split-norm-statistics"] = r'''
  for (int G : {3, 6}) {                                      // GroupNorm (2 channels per group), InstanceNorm
    int N = 2, C = 6, S = N * G; long long HW = 25013, L = (C / G) * HW, chunk = 4096, chunk2 = 2048;
    int chunks = (int)((L + chunk - 1) / chunk); size_t n = (size_t)N * C * HW;
    auto x = rvec(n, 2.f); for (auto& v : x) v += 20.f; auto g = rvec(C), b = rvec(C);
    auto dx = dev(x), dg = dev(g), db = dev(b); float* dy = dzero<float>(n); Wf* dp = dzero<Wf>((size_t)S * chunks);
    norm_partial_stats<<<dim3(S, chunks), 256>>>(dx, dp, L, chunk);
    norm_apply_relu<<<dim3(N * C, (unsigned)((HW + chunk2 - 1) / chunk2)), 256>>>(dx, dp, chunks, dg, db, dy, C, G, HW, chunk2, 1e-5f);
    std::vector<double> ref(n);
    for (int s = 0; s < S; ++s) { const float* xs = x.data() + s * L; double m = 0, v = 0;
      for (long long i = 0; i < L; ++i) m += xs[i]; m /= L;
      for (long long i = 0; i < L; ++i) v += (xs[i] - m) * (xs[i] - m); v /= L;
      double r = 1 / sqrt(v + 1e-5);
      for (long long i = 0; i < L; ++i) { int c = (int)(((size_t)s * L + i) / HW % C); ref[s * L + i] = fmax((xs[i] - m) * r * g[c] + b[c], 0.0); } }
    check(G == C ? "instancenorm split stats" : "groupnorm split stats", host(dy, n), ref, 2e-4, 2e-4);
  }
'''

H["pooling-window-reuse"] = r'''
  struct Cfg { int H, W, k, s, p, gz; };                     // gz < NC exercises the plane loop
  for (Cfg cf : {Cfg{37, 101, 3, 2, 1, 4}, Cfg{19, 45, 3, 1, 1, 6}, Cfg{33, 70, 2, 2, 0, 3}}) {
    int NC = 6, H = cf.H, W = cf.W, k = cf.k, s = cf.s, p = cf.p, OH = (H + 2 * p - k) / s + 1, OW = (W + 2 * p - k) / s + 1;
    auto x = rvec((size_t)NC * H * W); auto dx = dev(x); float* dy = dzero<float>((size_t)NC * OH * OW);
    size_t smem = (size_t)((TH - 1) * s + k) * ((TW - 1) * s + k) * sizeof(float);
    maxpool2d_tiled<<<dim3((OW + TW - 1) / TW, (OH + TH - 1) / TH, cf.gz), dim3(32, 8), smem>>>(dx, dy, NC, H, W, OH, OW, k, s, p);
    std::vector<double> ref((size_t)NC * OH * OW);
    for (int nc = 0; nc < NC; ++nc) for (int oy = 0; oy < OH; ++oy) for (int ox = 0; ox < OW; ++ox) {
      double m = -INFINITY;
      for (int i = 0; i < k; ++i) for (int j = 0; j < k; ++j) { int gy = oy * s - p + i, gx = ox * s - p + j;
        if (gy >= 0 && gy < H && gx >= 0 && gx < W) m = fmax(m, (double)x[((size_t)nc * H + gy) * W + gx]); }
      ref[((size_t)nc * OH + oy) * OW + ox] = m; }
    check("maxpool tiled", host(dy, ref.size()), ref, 0, 0);
  }
  for (int HW : {49, 1000}) {
    int NC = 37; auto x = rvec((size_t)NC * HW); auto dx = dev(x); float* dy = dzero<float>(NC);
    global_avgpool_relu<<<(NC + 7) / 8, 256>>>(dx, dy, NC, HW);
    std::vector<double> ref(NC); for (int r = 0; r < NC; ++r) { double a = 0; for (int i = 0; i < HW; ++i) a += fmax((double)x[(size_t)r * HW + i], 0.0); ref[r] = a / HW; }
    check("global avg pool + relu", host(dy, NC), ref, 1e-6, 1e-5);
  }
'''

H["batched-gemm-strided"] = r'''
  for (int cfg = 0; cfg < 3; ++cfg) {   // 0: 16x16 tiles, 1: 4 tiny matrices per block, 2: broadcast B (stride 0)
    const bool bc = cfg == 2; int batch = cfg == 1 ? 9 : 5, M = cfg == 1 ? 7 : 37, N = cfg == 1 ? 5 : 45, K = cfg == 1 ? 13 : 70;
    auto A = rvec((size_t)batch * M * K), B = rvec((size_t)(bc ? 1 : batch) * K * N); auto dA = dev(A), dB = dev(B);
    float* dC = dzero<float>((size_t)batch * M * N);
    bmm_strided(dA, dB, dC, batch, M, N, K, (long long)M * K, bc ? 0LL : (long long)K * N, (long long)M * N, 0); CK(cudaGetLastError());
    std::vector<double> ref;
    for (int b = 0; b < batch; ++b) { size_t ob = bc ? 0 : (size_t)b * K * N;
      std::vector<float> Ab(A.begin() + (size_t)b * M * K, A.begin() + (size_t)(b + 1) * M * K), Bb(B.begin() + ob, B.begin() + ob + (size_t)K * N);
      auto r = gemm_ref(Ab, Bb, M, N, K, false); ref.insert(ref.end(), r.begin(), r.end()); }
    check(cfg == 0 ? "bmm strided 16x16" : cfg == 1 ? "bmm packed 4 per block" : "bmm broadcast B", host(dC, (size_t)batch * M * N), ref, 1e-5, 1e-5);
  }
'''
H["gemv-split-k"] = r'''
  for (int K : {1024, 1001}) {   // 1001: only rows with row % 4 == 0 are 16-B aligned -> float4 + tail, others scalar
    int M = 37; auto A = rvec((size_t)M * K), x = rvec(K); auto dA = dev(A), dx = dev(x); float* dy = dzero<float>(M);
    gemv_warp_per_row<<<(M + 7) / 8, 256>>>(dA, dx, dy, M, K); CK(cudaGetLastError());
    check(K == 1024 ? "gemv float4" : "gemv float4/scalar mix", host(dy, M), gemm_ref(A, x, M, 1, K, false), 1e-4, 1e-4);
  }
  int M = 20, N = 24, K = 5003; auto A = rvec((size_t)M * K), B = rvec((size_t)K * N); auto dA = dev(A), dB = dev(B);
  auto ref = gemm_ref(A, B, M, N, K, false);
  for (int S : {7, 1, 40}) {
    int kc = (K + S - 1) / S, splits = (K + kc - 1) / kc;   // kc not a multiple of 16 for S = 7, 40
    float* ws = dzero<float>((size_t)splits * M * N); float* dC = dzero<float>(M * N);
    std::vector<float> prev;
    for (int rep = 0; rep < 2; ++rep) {
      gemm_splitk_partial<<<dim3((N + 15) / 16, (M + 15) / 16, splits), dim3(16, 16)>>>(dA, dB, ws, M, N, K, kc);
      splitk_reduce<<<(M * N + 255) / 256, 256>>>(ws, dC, M * N, splits); CK(cudaGetLastError());
      auto C = host(dC, M * N); check("split-K gemm", C, ref, 1e-3, 1e-4);
      if (rep == 1 && C != prev) { printf("FAIL split-K not bitwise reproducible\n"); g_fail = 1; } prev = C;
    }
  }
'''
H["atomic-segmented-reduction"] = r'''
  { int S = 41; std::vector<long long> off(S + 1, 0);          // empty, short, and one long (5000+) segment
    for (int s = 0; s < S; ++s) off[s + 1] = off[s] + (s % 7 == 3 ? 0 : (s * 37) % 300 + (s == 20 ? 5000 : 0));
    size_t n = (size_t)off[S]; auto v = rvec(n); auto dv = dev(v); auto doff = dev(off); float* dout = dzero<float>(S);
    segment_sum_warp<<<(S + 7) / 8, 256>>>(dv, doff, dout, S);
    std::vector<double> ref(S, 0.0); for (int s = 0; s < S; ++s) for (long long i = off[s]; i < off[s + 1]; ++i) ref[s] += v[i];
    check("segment sum (warp per segment)", host(dout, S), ref, 1e-3, 1e-5); }
  struct Cfg { int R, splits; };
  for (Cfg cf : {Cfg{1001, 1}, Cfg{1001, 5}, Cfg{10, 6}}) {   // {10, 6}: the last split is empty
    int B = 3, R = cf.R, C = 300; auto x = rvec((size_t)B * R * C); auto dx = dev(x); float* dout = dzero<float>((size_t)B * C);
    sum_dim1<<<dim3((C + 255) / 256, B, cf.splits), 256>>>(dx, dout, R, C);
    std::vector<double> ref((size_t)B * C, 0.0);
    for (int b = 0; b < B; ++b) for (int r = 0; r < R; ++r) for (int c = 0; c < C; ++c) ref[(size_t)b * C + c] += x[((size_t)b * R + r) * C + c];
    check("sum over strided dim 1", host(dout, (size_t)B * C), ref, 1e-3, 1e-4);
  }
  { size_t n = 1000003; auto x = rvec(n); auto dx = dev(x); float* dout = dzero<float>(1);
    sum_all_atomic<<<264, 256>>>(dx, n, dout);
    double s = 0; for (size_t i = 0; i < n; ++i) s += x[i];
    check("global sum, one atomic per block", host(dout, 1), std::vector<double>{s}, 1e-2, 1e-4); }
'''

H["persistent-rnn-kernel"] = r'''
  for (int H : {32, 64}) {
    int T = 23, B = 3; auto gx = rvec((size_t)T * B * 4 * H, 1.5f), W = rvec((size_t)4 * H * H, 0.25f), h0 = rvec(B * H), c0 = rvec(B * H);
    auto dgx = dev(gx), dW = dev(W), dh0 = dev(h0), dc0 = dev(c0);
    float* dout = dzero<float>((size_t)T * B * H); float* dhT = dzero<float>(B * H); float* dcT = dzero<float>(B * H);
    if (H == 32) lstm_persistent<32><<<B, 128>>>(dgx, dW, dh0, dc0, dout, dhT, dcT, T, B);
    else lstm_persistent<64><<<B, 256>>>(dgx, dW, dh0, dc0, dout, dhT, dcT, T, B);
    CK(cudaGetLastError());
    std::vector<double> rout((size_t)T * B * H), rh(B * H), rc(B * H); auto sg = [](double v) { return 1.0 / (1.0 + exp(-v)); };
    for (int b = 0; b < B; ++b) {
      std::vector<double> h(h0.begin() + b * H, h0.begin() + (b + 1) * H), c(c0.begin() + b * H, c0.begin() + (b + 1) * H), g(4 * H);
      for (int t = 0; t < T; ++t) {
        for (int r = 0; r < 4 * H; ++r) { double s = gx[((size_t)t * B + b) * 4 * H + r]; for (int k = 0; k < H; ++k) s += (double)W[(size_t)r * H + k] * h[k]; g[r] = s; }
        for (int j = 0; j < H; ++j) { c[j] = sg(g[H + j]) * c[j] + sg(g[j]) * tanh(g[2 * H + j]); h[j] = sg(g[3 * H + j]) * tanh(c[j]); rout[((size_t)t * B + b) * H + j] = h[j]; }
      }
      for (int j = 0; j < H; ++j) { rh[b * H + j] = h[j]; rc[b * H + j] = c[j]; }
    }
    check(H == 32 ? "lstm H=32 out" : "lstm H=64 out", host(dout, (size_t)T * B * H), rout, 1e-4, 1e-3);
    check("lstm h_T", host(dhT, B * H), rh, 1e-4, 1e-3); check("lstm c_T", host(dcT, B * H), rc, 1e-4, 1e-3);
  }
'''
H["conv-transpose-gather"] = r'''
  // {stride, padding, KH, KW, output_padding, bias}; reference = the scatter definition of ConvTranspose2d
  const int cfgs[6][6] = {{2, 1, 3, 3, 0, 1}, {2, 1, 3, 3, 1, 0}, {1, 1, 3, 3, 0, 1}, {1, 0, 2, 3, 0, 0}, {2, 1, 4, 4, 0, 1}, {3, 2, 5, 3, 2, 1}};
  for (const auto& g : cfgs) {
    const int S = g[0], P = g[1], KH = g[2], KW = g[3], OP = g[4], N = 2, C = 3, H = 7, W = 9, OC = 4;
    const int OH = (H - 1) * S - 2 * P + (KH - 1) + OP + 1, OW = (W - 1) * S - 2 * P + (KW - 1) + OP + 1;
    auto x = rvec(N * C * H * W), w = rvec(C * OC * KH * KW), b = rvec(OC);
    auto dx = dev(x), dw = dev(w), db = dev(b); float* dy = dzero<float>(N * OC * OH * OW);
    const int groups = (OW + S - 1) / S;
    conv_transpose2d_gather<<<dim3((groups + 31) / 32, (OH + 3) / 4, N * OC), dim3(32, 4)>>>(dx, dw, g[5] ? db : nullptr, dy, C, H, W, OC, KH, KW, S, P, OH, OW);
    CK(cudaGetLastError());
    std::vector<double> ref((size_t)N * OC * OH * OW, 0.0);
    for (int n = 0; n < N; ++n) for (int o = 0; o < OC; ++o) for (int i = 0; i < OH * OW; ++i) ref[(size_t)(n * OC + o) * OH * OW + i] = g[5] ? b[o] : 0.0;
    for (int n = 0; n < N; ++n) for (int c = 0; c < C; ++c) for (int ih = 0; ih < H; ++ih) for (int iw = 0; iw < W; ++iw)
      for (int o = 0; o < OC; ++o) for (int kh = 0; kh < KH; ++kh) for (int kw = 0; kw < KW; ++kw) {
        const int oh = ih * S - P + kh, ow = iw * S - P + kw;
        if (oh >= 0 && oh < OH && ow >= 0 && ow < OW)
          ref[((size_t)(n * OC + o) * OH + oh) * OW + ow] += (double)x[((n * C + c) * H + ih) * W + iw] * w[((c * OC + o) * KH + kh) * KW + kw];
      }
    char name[96]; snprintf(name, sizeof name, "conv transpose gather S=%d P=%d K=%dx%d OP=%d bias=%d", S, P, KH, KW, OP, g[5]);
    check(name, host(dy, (size_t)N * OC * OH * OW), ref, 1e-5, 1e-5);
  }
'''

H["depthwise-conv-register-window"] = r'''
  // {K, stride, padding, bias}; W = 290: 3 column tiles of 128 outputs at S = 1, 2 at S = 2, partial last tiles; H = 19: partial row tiles
  const int cfgs[6][4] = {{3, 1, 1, 1}, {3, 2, 1, 0}, {3, 1, 0, 1}, {3, 2, 0, 1}, {5, 2, 2, 1}, {5, 2, 1, 0}};
  for (const auto& g : cfgs) {
    const int K = g[0], S = g[1], P = g[2], N = 2, C = 3, H = 19, W = 290;
    const int OH = (H + 2 * P - K) / S + 1, OW = (W + 2 * P - K) / S + 1;
    auto x = rvec(N * C * H * W), w = rvec(C * K * K), b = rvec(C);
    auto dx = dev(x), dw = dev(w), db = dev(b); float* dy = dzero<float>(N * C * OH * OW);
    if (!launch_dwconv2d(dx, dw, g[3] ? db : nullptr, dy, N, C, H, W, K, S, P)) { printf("FAIL depthwise: no instance for K=%d S=%d\n", K, S); g_fail = 1; continue; }
    CK(cudaGetLastError());
    std::vector<double> ref((size_t)N * C * OH * OW);
    for (int n = 0; n < N; ++n) for (int c = 0; c < C; ++c) for (int oh = 0; oh < OH; ++oh) for (int ow = 0; ow < OW; ++ow) {
      double s = g[3] ? b[c] : 0.0;
      for (int kh = 0; kh < K; ++kh) for (int kw = 0; kw < K; ++kw) {
        const int ih = oh * S - P + kh, iw = ow * S - P + kw;
        if (ih >= 0 && ih < H && iw >= 0 && iw < W) s += (double)x[((n * C + c) * H + ih) * W + iw] * w[(c * K + kh) * K + kw];
      }
      ref[((size_t)(n * C + c) * OH + oh) * OW + ow] = s;
    }
    char name[80]; snprintf(name, sizeof name, "depthwise regwin K=%d S=%d P=%d bias=%d", K, S, P, g[3]);
    check(name, host(dy, (size_t)N * C * OH * OW), ref, 1e-5, 1e-5);
  }
'''

H["tf32x3-split-precision"] = r'''
  // odd M, N, K (edge tiles and a partial last k-step), and K = 256 (the gate's longest): 3xTF32 meets the fp32
  // default 1e-4 (typical error ~1e-6), which plain TF32 (~5e-4 relative per product, ~3e-3 on these sums) misses
  const int cfgs[3][3] = {{37, 53, 45}, {64, 48, 256}, {129, 17, 7}};
  for (const auto& g : cfgs) {
    const int M = g[0], N = g[1], K = g[2];
    auto A = rvec(M * K), B = rvec(K * N); auto dA = dev(A), dB = dev(B); float* dC = dzero<float>(M * N);
    sgemm_3xtf32<<<dim3((N + 15) / 16, (M + 63) / 64), 128>>>(dA, dB, dC, M, N, K);
    CK(cudaGetLastError());
    char name[64]; snprintf(name, sizeof name, "3xTF32 gemm M=%d N=%d K=%d", M, N, K);
    check(name, host(dC, M * N), gemm_ref(A, B, M, N, K, false), 1e-4, 1e-4);
  }
'''
H["monotone-tail-through-max"] = r'''
  // both signs of the scale (max vs min), k = 2 and 3 with H, W not multiples of k (floor mode)
  const float scales[2] = {1.7f, -0.8f}; const int ks[2] = {2, 3};
  for (float sc : scales) for (int k : ks) {
    const int N = 2, C = 5, H = 13, W = 11, OH = H / k, OW = W / k;
    auto conv = rvec(N * C * H * W, 2.f), b = rvec(C); auto dconv = dev(conv), db = dev(b); float* dout = dzero<float>(N * C * OH * OW);
    tanh_scale_bias_maxpool<<<(N * C * OH * OW + 255) / 256, 256>>>(dconv, db, dout, N, C, H, W, k, sc);
    CK(cudaGetLastError());
    std::vector<double> ref((size_t)N * C * OH * OW);
    for (int nc = 0; nc < N * C; ++nc) for (int oh = 0; oh < OH; ++oh) for (int ow = 0; ow < OW; ++ow) {
      double m = -1e300;                                   // the reference order: tail on every element, then max
      for (int r = 0; r < k; ++r) for (int s = 0; s < k; ++s) m = fmax(m, tanh((double)conv[((size_t)nc * H + oh * k + r) * W + ow * k + s]) * sc + b[nc % C]);
      ref[((size_t)nc * OH + oh) * OW + ow] = m;
    }
    char name[64]; snprintf(name, sizeof name, "monotone tail through max scale=%.1f k=%d", sc, k);
    check(name, host(dout, (size_t)N * C * OH * OW), ref, 1e-5, 1e-5);
  }
'''
H["bias-before-batchnorm-cancels"] = r'''
  // the reference keeps the bias: BN_train(z + b); the kernel never adds it to the output
  const int N = 3, C = 5, HW = 77; const float eps = 1e-5f, mom = 0.1f;
  auto z = rvec(N * C * HW, 2.f), b = rvec(C, 3.f), g = rvec(C), be = rvec(C), rm = rvec(C), rv = rvec(C);
  for (auto& v : rv) v = fabsf(v) + 0.5f;
  auto dz = dev(z), db = dev(b), dg = dev(g), dbe = dev(be), drm = dev(rm), drv = dev(rv); float* dy = dzero<float>(N * C * HW);
  bn_train_bias_free<<<C, 128>>>(dz, db, dg, dbe, dy, drm, drv, N, C, HW, eps, mom);
  CK(cudaGetLastError());
  std::vector<double> ref((size_t)N * C * HW), rmr(C), rvr(C);
  for (int c = 0; c < C; ++c) {
    double s = 0, q = 0; const int cnt = N * HW;
    for (int n = 0; n < N; ++n) for (int i = 0; i < HW; ++i) s += (double)z[((size_t)n * C + c) * HW + i] + b[c];
    const double mean = s / cnt;
    for (int n = 0; n < N; ++n) for (int i = 0; i < HW; ++i) { const double d = (double)z[((size_t)n * C + c) * HW + i] + b[c] - mean; q += d * d; }
    const double var = q / cnt;
    for (int n = 0; n < N; ++n) for (int i = 0; i < HW; ++i)
      ref[((size_t)n * C + c) * HW + i] = ((double)z[((size_t)n * C + c) * HW + i] + b[c] - mean) / sqrt(var + eps) * g[c] + be[c];
    rmr[c] = (1 - mom) * rm[c] + mom * mean; rvr[c] = (1 - mom) * rv[c] + mom * q / (cnt - 1);
  }
  check("bias-free train BN output", host(dy, (size_t)N * C * HW), ref, 1e-5, 1e-4);
  check("bias-free train BN running_mean", host(drm, C), rmr, 1e-6, 1e-5);
  check("bias-free train BN running_var", host(drv, C), rvr, 1e-6, 1e-5);
'''
H["small-conv-constant-memory-chain"] = r'''
  // ConvTranspose2d(3 -> 16, k3, s2, p1, op1) -> MaxPool2d(2) -> softmax(C) -> - sub -> swish -> max(C); odd H, W
  const int CI = 3, CO = 16, N = 2, H = 9, W = 13, OHc = 2 * H, OWc = 2 * W;
  auto x = rvec(N * CI * H * W), w = rvec(CI * CO * 9, 0.5f), b = rvec(CO, 0.2f), sub = rvec(CO, 0.05f);
  auto dx = dev(x), dw = dev(w), db = dev(b), dsub = dev(sub); float* dout = dzero<float>(N * H * W);
  CK((launch_convt_chain<CI, CO>(dx, dw, db, dsub, dout, N, H, W, 0)));
  std::vector<double> ct((size_t)N * CO * OHc * OWc);
  for (int n = 0; n < N; ++n) for (int co = 0; co < CO; ++co) for (int oy = 0; oy < OHc; ++oy) for (int ox = 0; ox < OWc; ++ox) {
    double s = b[co];
    for (int ci = 0; ci < CI; ++ci) for (int iy = 0; iy < H; ++iy) for (int ix = 0; ix < W; ++ix) {
      const int kh = oy - 2 * iy + 1, kw = ox - 2 * ix + 1;   // oy = 2 iy - 1 + kh
      if (kh >= 0 && kh < 3 && kw >= 0 && kw < 3) s += (double)x[((n * CI + ci) * H + iy) * W + ix] * w[((ci * CO + co) * 3 + kh) * 3 + kw];
    }
    ct[((size_t)(n * CO + co) * OHc + oy) * OWc + ox] = s;
  }
  std::vector<double> ref((size_t)N * H * W);
  for (int n = 0; n < N; ++n) for (int py = 0; py < H; ++py) for (int px = 0; px < W; ++px) {
    double p[16], m = -1e300, s = 0, best = -1e300;
    for (int co = 0; co < CO; ++co) { p[co] = -1e300; for (int d = 0; d < 4; ++d) p[co] = fmax(p[co], ct[((size_t)(n * CO + co) * OHc + 2 * py + d / 2) * OWc + 2 * px + d % 2]); m = fmax(m, p[co]); }
    for (int co = 0; co < CO; ++co) s += exp(p[co] - m);
    for (int co = 0; co < CO; ++co) { const double q = exp(p[co] - m) / s - sub[co]; best = fmax(best, q / (1 + exp(-q))); }
    ref[((size_t)n * H + py) * W + px] = best;
  }
  check("convT->pool->softmax->swish->max chain (constant memory)", host(dout, (size_t)N * H * W), ref, 1e-5, 1e-4);
'''
H["direct-conv-register-window"] = r'''
  // K = 3 and 5, padding 1 and 2, W = 37 (OW % VW != 0: partial last segment), C = 3, CO = 8
  const int cfgs[3][2] = {{3, 1}, {3, 0}, {5, 2}};
  for (const auto& g : cfgs) {
    const int K = g[0], P = g[1], N = 2, C = 3, CO = 8, H = 11, W = 37, VW = 4;
    const int OH = H + 2 * P - K + 1, OW = W + 2 * P - K + 1, SEG = (OW + VW - 1) / VW;
    auto x = rvec(N * C * H * W), w = rvec(CO * C * K * K), b = rvec(CO);
    auto dx = dev(x), dw = dev(w), db = dev(b); float* dy = dzero<float>(N * CO * OH * OW);
    const int blocks = (N * OH * SEG + 127) / 128;
    if (K == 3) conv2d_regwin<3, 4, 8><<<blocks, 128>>>(dx, dw, db, dy, N, C, H, W, P);
    else conv2d_regwin<5, 4, 8><<<blocks, 128>>>(dx, dw, db, dy, N, C, H, W, P);
    CK(cudaGetLastError());
    std::vector<double> ref((size_t)N * CO * OH * OW);
    for (int n = 0; n < N; ++n) for (int o = 0; o < CO; ++o) for (int oh = 0; oh < OH; ++oh) for (int ow = 0; ow < OW; ++ow) {
      double s = b[o];
      for (int c = 0; c < C; ++c) for (int i = 0; i < K; ++i) for (int j = 0; j < K; ++j) {
        const int ih = oh + i - P, iw = ow + j - P;
        if (ih >= 0 && ih < H && iw >= 0 && iw < W) s += (double)x[((n * C + c) * H + ih) * W + iw] * w[((o * C + c) * K + i) * K + j];
      }
      ref[((size_t)(n * CO + o) * OH + oh) * OW + ow] = s;
    }
    char name[64]; snprintf(name, sizeof name, "direct conv register window K=%d P=%d", K, P);
    check(name, host(dy, (size_t)N * CO * OH * OW), ref, 1e-5, 1e-5);
  }
'''
H["cluster-dsmem-group-statistics"] = r'''
  // groups of 2 channels x 999 values split over the 4 blocks of a cluster (uneven slices); a large mean offset
  const int N = 3, C = 8, G = 4, HW = 999; const float eps = 1e-5f; const int cpg = C / G;
  auto x = rvec(N * C * HW, 2.f); for (auto& v : x) v += 20.f;
  auto g = rvec(C), be = rvec(C); auto dx = dev(x), dg = dev(g), dbe = dev(be); float* dy = dzero<float>(N * C * HW);
  groupnorm_cluster<<<N * G * CL, 256>>>(dx, dg, dbe, dy, C, HW, G, eps);
  CK(cudaGetLastError());
  std::vector<double> ref((size_t)N * C * HW);
  for (int n = 0; n < N; ++n) for (int gr = 0; gr < G; ++gr) {
    const size_t base = ((size_t)n * C + gr * cpg) * HW, S = (size_t)cpg * HW; double s = 0, q = 0;
    for (size_t i = 0; i < S; ++i) s += x[base + i];
    const double mean = s / S;
    for (size_t i = 0; i < S; ++i) q += (x[base + i] - mean) * (x[base + i] - mean);
    const double rstd = 1 / sqrt(q / S + eps);
    for (size_t i = 0; i < S; ++i) { const int c = gr * cpg + (int)(i / HW); ref[base + i] = (x[base + i] - mean) * rstd * g[c] + be[c]; }
  }
  check("groupnorm over a cluster (DSMEM)", host(dy, (size_t)N * C * HW), ref, 1e-4, 1e-4);
'''

if __name__ == "__main__":
    here = pathlib.Path(__file__).resolve().parent
    out = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/kernelskill-gpu-check")
    (out / "ex").mkdir(parents=True, exist_ok=True)
    (out / "common.h").write_text((here / "common.h").read_text())
    ex = {}
    for p in sorted(here.parent.glob("*.toml")):
        d = tomllib.loads(p.read_text())
        if d["example_lang"] == "cuda":
            ex[d["id"]] = d["example"]
    missing = sorted(set(ex) - set(H))
    if missing:
        print("FAIL no harness for:", ", ".join(missing))
    for k, body in H.items():
        (out / "ex" / f"{k}.cu").write_text(ex[k])
        (out / f"h_{k}.cu").write_text(f'#include "common.h"\n#include "ex/{k}.cu"\nint main() {{\n{body}\n  return g_fail;\n}}\n')
