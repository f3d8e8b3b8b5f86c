// One cuDNN backend descriptor, owned (destroyed with the object), with
// attribute setters that name what failed.  A backend graph is built from
// dozens of descriptors and attributes, and cuDNN's own status says only
// "BAD_PARAM": every failure here reads
//   tensor 'K^T' (uid 2): cudnnBackendSetAttribute(CUDNN_ATTR_TENSOR_STRIDES):
//     CUDNN_STATUS_BAD_PARAM (2000): <cuDNN's last error>
// so a wrong attribute is found from the message alone, on a machine we
// cannot log into.
#pragma once
#include <cudnn_graph.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cudnn/cudnn_api.h"

namespace afz::cudnn {

// A failed cuDNN call, with its status for callers that classify it.
class CudnnCallError : public std::runtime_error {
 public:
  CudnnCallError(cudnnStatus_t status, const std::string& what) : std::runtime_error(what), status_(status) {}
  cudnnStatus_t status() const { return status_; }

 private:
  cudnnStatus_t status_;
};

// An attribute and its name, for the error text.
struct Attr {
  cudnnBackendAttributeName_t id;
  const char* name;
};
#define AFZ_CUDNN_ATTR(attr) ::afz::cudnn::Attr{attr, #attr}

// The enum's name ("CUDNN_BACKEND_TENSOR_DESCRIPTOR"), for messages.
const char* descriptor_type_name(cudnnBackendDescriptorType_t type);

class BackendDescriptor {
 public:
  BackendDescriptor() = default;
  // Creates the descriptor; `label` says which one it is ("tensor 'Q' (uid 1)").
  BackendDescriptor(const CudnnApi& api, cudnnBackendDescriptorType_t type, std::string label);
  ~BackendDescriptor();
  BackendDescriptor(BackendDescriptor&& other) noexcept;
  BackendDescriptor& operator=(BackendDescriptor&& other) noexcept;
  BackendDescriptor(const BackendDescriptor&) = delete;
  BackendDescriptor& operator=(const BackendDescriptor&) = delete;

  cudnnBackendDescriptor_t get() const { return desc_; }
  const std::string& label() const { return label_; }
  explicit operator bool() const { return desc_ != nullptr; }

  void set(Attr attr, cudnnBackendAttributeType_t type, int64_t count, const void* values);
  void set_int64(Attr attr, int64_t value) { set(attr, CUDNN_TYPE_INT64, 1, &value); }
  void set_int64s(Attr attr, const std::vector<int64_t>& values);
  void set_data_type(Attr attr, cudnnDataType_t value) { set(attr, CUDNN_TYPE_DATA_TYPE, 1, &value); }
  void set_bool(Attr attr, bool value) { set(attr, CUDNN_TYPE_BOOLEAN, 1, &value); }
  void set_descriptor(Attr attr, const BackendDescriptor& d);
  void set_descriptors(Attr attr, const std::vector<cudnnBackendDescriptor_t>& ds);
  void finalize();

  // Throws a CudnnCallError naming this descriptor and `call` when status fails.
  void check(cudnnStatus_t status, const std::string& call) const;

 private:
  void reset() noexcept;
  const CudnnApi* api_ = nullptr;
  cudnnBackendDescriptor_t desc_ = nullptr;
  std::string label_;
};

}  // namespace afz::cudnn
