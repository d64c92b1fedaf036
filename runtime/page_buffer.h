// Anonymous memory for large, long-lived data (model weights): page-aligned,
// backed by transparent huge pages where the kernel allows, placed by the
// calling thread's memory policy (a rank binds its policy to its NUMA node
// first) and first touched by whoever writes it.
//
// Huge pages matter for streaming weights: with 4 KiB pages the hardware
// prefetchers stop at every page boundary and every page costs a TLB miss.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tps {

class PageBuffer {
 public:
  PageBuffer() = default;
  explicit PageBuffer(size_t bytes);  // throws Error when the memory is not there
  ~PageBuffer();
  PageBuffer(PageBuffer&& other) noexcept;
  PageBuffer& operator=(PageBuffer&& other) noexcept;
  PageBuffer(const PageBuffer&) = delete;
  PageBuffer& operator=(const PageBuffer&) = delete;

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace tps
