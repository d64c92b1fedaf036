// 512-bit and 256-bit FMA throughput: 12 independent chains.
#include <immintrin.h>
#include <stdio.h>
#include <time.h>
static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}
int main(void) {
  const long n = 200000000;
  __m512 a[12];
  __m256 b[12];
  __m512 x = _mm512_set1_ps(0.999999f), y = _mm512_set1_ps(1e-7f);
  __m256 x2 = _mm256_set1_ps(0.999999f), y2 = _mm256_set1_ps(1e-7f);
  for (int i = 0; i < 12; i++) {
    a[i] = _mm512_set1_ps(i);
    b[i] = _mm256_set1_ps(i);
  }
  double t0 = now();
  for (long i = 0; i < n; i++) {
#pragma GCC unroll 12
    for (int k = 0; k < 12; k++) a[k] = _mm512_fmadd_ps(a[k], x, y);
  }
  double t1 = now();
  for (long i = 0; i < n; i++) {
#pragma GCC unroll 12
    for (int k = 0; k < 12; k++) b[k] = _mm256_fmadd_ps(b[k], x2, y2);
  }
  double t2 = now();
  float s = 0;
  for (int k = 0; k < 12; k++) {
    s += _mm512_reduce_add_ps(a[k]);
    float t[8];
    _mm256_storeu_ps(t, b[k]);
    s += t[0];
  }
  printf("512-bit FMAs: %.2f G/s  256-bit FMAs: %.2f G/s  (%g)\n", 12.0 * n / (t1 - t0) / 1e9,
         12.0 * n / (t2 - t1) / 1e9, s);
}
