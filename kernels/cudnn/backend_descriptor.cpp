#include "kernels/cudnn/backend_descriptor.h"

#include <utility>

namespace afz::cudnn {

const char* descriptor_type_name(cudnnBackendDescriptorType_t type) {
  switch (type) {
    case CUDNN_BACKEND_POINTWISE_DESCRIPTOR: return "CUDNN_BACKEND_POINTWISE_DESCRIPTOR";
    case CUDNN_BACKEND_ENGINE_DESCRIPTOR: return "CUDNN_BACKEND_ENGINE_DESCRIPTOR";
    case CUDNN_BACKEND_ENGINECFG_DESCRIPTOR: return "CUDNN_BACKEND_ENGINECFG_DESCRIPTOR";
    case CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR: return "CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR";
    case CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR: return "CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR";
    case CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR: return "CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR";
    case CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR: return "CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR";
    case CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR: return "CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR";
    case CUDNN_BACKEND_TENSOR_DESCRIPTOR: return "CUDNN_BACKEND_TENSOR_DESCRIPTOR";
    case CUDNN_BACKEND_MATMUL_DESCRIPTOR: return "CUDNN_BACKEND_MATMUL_DESCRIPTOR";
    case CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR: return "CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR";
    case CUDNN_BACKEND_REDUCTION_DESCRIPTOR: return "CUDNN_BACKEND_REDUCTION_DESCRIPTOR";
    case CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR: return "CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR";
    case CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR: return "CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR";
    default: return "cudnnBackendDescriptorType_t";
  }
}

BackendDescriptor::BackendDescriptor(const CudnnApi& api, cudnnBackendDescriptorType_t type, std::string label)
    : api_(&api), label_(std::move(label)) {
  check(api.BackendCreateDescriptor(type, &desc_),
        std::string("cudnnBackendCreateDescriptor(") + descriptor_type_name(type) + ")");
}

BackendDescriptor::~BackendDescriptor() { reset(); }

BackendDescriptor::BackendDescriptor(BackendDescriptor&& other) noexcept
    : api_(other.api_), desc_(std::exchange(other.desc_, nullptr)), label_(std::move(other.label_)) {}

BackendDescriptor& BackendDescriptor::operator=(BackendDescriptor&& other) noexcept {
  if (this != &other) {
    reset();
    api_ = other.api_;
    desc_ = std::exchange(other.desc_, nullptr);
    label_ = std::move(other.label_);
  }
  return *this;
}

void BackendDescriptor::reset() noexcept {
  if (desc_ && api_) api_->BackendDestroyDescriptor(desc_);
  desc_ = nullptr;
}

void BackendDescriptor::check(cudnnStatus_t status, const std::string& call) const {
  if (status == CUDNN_STATUS_SUCCESS) return;
  throw CudnnCallError(status, label_ + ": " + call + ": " + status_text(*api_, status));
}

void BackendDescriptor::set(Attr attr, cudnnBackendAttributeType_t type, int64_t count, const void* values) {
  check(api_->BackendSetAttribute(desc_, attr.id, type, count, values),
        std::string("cudnnBackendSetAttribute(") + attr.name + ")");
}

void BackendDescriptor::set_int64s(Attr attr, const std::vector<int64_t>& values) {
  set(attr, CUDNN_TYPE_INT64, int64_t(values.size()), values.data());
}

void BackendDescriptor::set_descriptor(Attr attr, const BackendDescriptor& d) {
  cudnnBackendDescriptor_t raw = d.get();
  set(attr, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &raw);
}

void BackendDescriptor::set_descriptors(Attr attr, const std::vector<cudnnBackendDescriptor_t>& ds) {
  set(attr, CUDNN_TYPE_BACKEND_DESCRIPTOR, int64_t(ds.size()), ds.data());
}

void BackendDescriptor::finalize() { check(api_->BackendFinalize(desc_), "cudnnBackendFinalize"); }

}  // namespace afz::cudnn
