// Device memory owned by one object (cudaMalloc / cudaFree), with checked copies. Plain device
// allocations only: no managed memory (it can hang a GPU when oversubscribed).
#pragma once
#include <cuda_runtime.h>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "backend/cuda/check.h"

namespace loom::backend::cuda {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
    if (!bytes_) return;
    LOOM_CUDA_CHECK(cudaMalloc(&ptr_, bytes_));
    const size_t now = live_bytes() += bytes_;
    size_t peak = peak_counter().load();
    while (now > peak && !peak_counter().compare_exchange_weak(peak, now)) {
    }
  }
  // Bytes this process holds in DeviceBuffers, and the most it held at once (for reports).
  static size_t peak_bytes() { return peak_counter().load(); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      release();
      ptr_ = std::exchange(o.ptr_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }
  ~DeviceBuffer() { release(); }

  template <typename T = void> T* get() const { return static_cast<T*>(ptr_); }
  size_t bytes() const { return bytes_; }

  void upload(const void* src, size_t n, size_t offset = 0) {
    check_range(n, offset);
    LOOM_CUDA_CHECK(cudaMemcpy(static_cast<uint8_t*>(ptr_) + offset, src, n, cudaMemcpyHostToDevice));
  }
  void download(void* dst, size_t n, size_t offset = 0) const {
    check_range(n, offset);
    LOOM_CUDA_CHECK(cudaMemcpy(dst, static_cast<const uint8_t*>(ptr_) + offset, n, cudaMemcpyDeviceToHost));
  }
  // Every byte 0xFF: an f32 or f16 NaN, so a kernel that skips an element is caught.
  void poison() { LOOM_CUDA_CHECK(cudaMemset(ptr_, 0xFF, bytes_)); }

  template <typename T> static DeviceBuffer of(const std::vector<T>& v) {
    DeviceBuffer b(v.size() * sizeof(T));
    b.upload(v.data(), b.bytes());
    return b;
  }
  template <typename T> std::vector<T> to_host() const {
    std::vector<T> v(bytes_ / sizeof(T));
    download(v.data(), v.size() * sizeof(T));
    return v;
  }

 private:
  void check_range(size_t n, size_t offset) const {
    if (offset > bytes_ || n > bytes_ - offset) cuda_invalid("device buffer copy out of range");
  }
  void release() {
    if (ptr_) {
      cudaFree(ptr_);  // no check: destructors must not throw
      live_bytes() -= bytes_;
    }
    ptr_ = nullptr;
  }
  static std::atomic<size_t>& live_bytes() {
    static std::atomic<size_t> n{0};
    return n;
  }
  static std::atomic<size_t>& peak_counter() {
    static std::atomic<size_t> n{0};
    return n;
  }
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace loom::backend::cuda
