#include "kernels/cudnn/sdpa_lowering.h"

#include <stdexcept>
#include <utility>

namespace afz::cudnn {
namespace {

std::vector<int64_t> to_vector(const Dims& d) { return {d.begin(), d.end()}; }

std::string tensor_label(const GraphTensor& t) { return "tensor '" + t.name + "' (uid " + std::to_string(t.uid) + ")"; }

const char* reduce_name(cudnnReduceTensorOp_t r) {
  switch (r) {
    case CUDNN_REDUCE_TENSOR_ADD: return "CUDNN_REDUCE_TENSOR_ADD";
    case CUDNN_REDUCE_TENSOR_MAX: return "CUDNN_REDUCE_TENSOR_MAX";
    default: return "cudnnReduceTensorOp_t";
  }
}

BackendDescriptor lower_tensor(const CudnnApi& api, const GraphTensor& t) {
  BackendDescriptor d(api, CUDNN_BACKEND_TENSOR_DESCRIPTOR, tensor_label(t));
  d.set_data_type(AFZ_CUDNN_ATTR(CUDNN_ATTR_TENSOR_DATA_TYPE), t.dtype);
  d.set_int64s(AFZ_CUDNN_ATTR(CUDNN_ATTR_TENSOR_DIMENSIONS), to_vector(t.dims));
  d.set_int64s(AFZ_CUDNN_ATTR(CUDNN_ATTR_TENSOR_STRIDES), to_vector(t.strides));
  d.set_int64(AFZ_CUDNN_ATTR(CUDNN_ATTR_TENSOR_UNIQUE_ID), t.uid);
  d.set_int64(AFZ_CUDNN_ATTR(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT), t.alignment);
  if (t.is_virtual) d.set_bool(AFZ_CUDNN_ATTR(CUDNN_ATTR_TENSOR_IS_VIRTUAL), true);
  if (t.by_value) d.set_bool(AFZ_CUDNN_ATTR(CUDNN_ATTR_TENSOR_IS_BY_VALUE), true);
  if (t.reorder_f16x16) {
    const cudnnBackendTensorReordering_t mode = CUDNN_TENSOR_REORDERING_F16x16;
    d.set(AFZ_CUDNN_ATTR(CUDNN_ATTR_TENSOR_REORDERING_MODE), CUDNN_TYPE_TENSOR_REORDERING_MODE, 1, &mode);
  }
  d.finalize();
  return d;
}

class Lowering {
 public:
  Lowering(const CudnnApi& api, const SdpaGraph& g) : api_(api), g_(g) {}

  LoweredGraph run() {
    for (const GraphTensor& t : g_.tensors) {
      out_.uids.push_back(t.uid);
      out_.tensors.push_back(lower_tensor(api_, t));
    }
    for (const GraphOp& op : g_.ops) {
      switch (op.kind) {
        case OpKind::Pointwise: pointwise(op); break;
        case OpKind::Matmul: matmul(op); break;
        case OpKind::Reduction: reduction(op); break;
        case OpKind::Reshape: reshape(op); break;
      }
    }
    return std::move(out_);
  }

 private:
  const BackendDescriptor& t(int64_t uid) const { return out_.tensor(uid); }

  void pointwise(const GraphOp& op) {
    const std::string what = "'" + op.name + "' (" + pointwise_mode_name(op.mode) + ")";
    BackendDescriptor pw(api_, CUDNN_BACKEND_POINTWISE_DESCRIPTOR, "pointwise descriptor of " + what);
    pw.set(AFZ_CUDNN_ATTR(CUDNN_ATTR_POINTWISE_MODE), CUDNN_TYPE_POINTWISE_MODE, 1, &op.mode);
    pw.set_data_type(AFZ_CUDNN_ATTR(CUDNN_ATTR_POINTWISE_MATH_PREC), op.compute);
    if (op.mode == CUDNN_POINTWISE_GEN_INDEX) pw.set_int64(AFZ_CUDNN_ATTR(CUDNN_ATTR_POINTWISE_AXIS), op.axis);
    pw.finalize();

    BackendDescriptor d(api_, CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, "operation " + what);
    d.set_descriptor(AFZ_CUDNN_ATTR(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR), pw);
    d.set_descriptor(AFZ_CUDNN_ATTR(CUDNN_ATTR_OPERATION_POINTWISE_XDESC), t(op.x));
    if (op.b) d.set_descriptor(AFZ_CUDNN_ATTR(CUDNN_ATTR_OPERATION_POINTWISE_BDESC), t(op.b));
    if (op.t) d.set_descriptor(AFZ_CUDNN_ATTR(CUDNN_ATTR_OPERATION_POINTWISE_TDESC), t(op.t));
    d.set_descriptor(AFZ_CUDNN_ATTR(CUDNN_ATTR_OPERATION_POINTWISE_YDESC), t(op.y));
    d.finalize();
    out_.op_configs.push_back(std::move(pw));
    out_.operations.push_back(std::move(d));
  }

  void matmul(const GraphOp& op) {
    const std::string what = "'" + op.name + "' (MATMUL)";
    BackendDescriptor mm(api_, CUDNN_BACKEND_MATMUL_DESCRIPTOR, "matmul descriptor of " + what);
    mm.set_data_type(AFZ_CUDNN_ATTR(CUDNN_ATTR_MATMUL_COMP_TYPE), op.compute);
    mm.finalize();

    BackendDescriptor d(api_, CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, "operation " + what);
    d.set_descriptor(AFZ_CUDNN_ATTR(CUDNN_ATTR_OPERATION_MATMUL_ADESC), t(op.x));
    d.set_descriptor(AFZ_CUDNN_ATTR(CUDNN_ATTR_OPERATION_MATMUL_BDESC), t(op.b));
    d.set_descriptor(AFZ_CUDNN_ATTR(CUDNN_ATTR_OPERATION_MATMUL_CDESC), t(op.y));
    d.set_descriptor(AFZ_CUDNN_ATTR(CUDNN_ATTR_OPERATION_MATMUL_DESC), mm);
    // The seq-len tensors: rows and keys past each sequence's length are not computed.
    if (op.m_override)
      d.set_descriptor(AFZ_CUDNN_ATTR(CUDNN_ATTR_OPERATION_MATMUL_GEMM_M_OVERRIDE_DESC), t(op.m_override));
    if (op.n_override)
      d.set_descriptor(AFZ_CUDNN_ATTR(CUDNN_ATTR_OPERATION_MATMUL_GEMM_N_OVERRIDE_DESC), t(op.n_override));
    if (op.k_override)
      d.set_descriptor(AFZ_CUDNN_ATTR(CUDNN_ATTR_OPERATION_MATMUL_GEMM_K_OVERRIDE_DESC), t(op.k_override));
    d.finalize();
    out_.op_configs.push_back(std::move(mm));
    out_.operations.push_back(std::move(d));
  }

  void reduction(const GraphOp& op) {
    const std::string what = "'" + op.name + "' (" + reduce_name(op.reduce) + ")";
    BackendDescriptor red(api_, CUDNN_BACKEND_REDUCTION_DESCRIPTOR, "reduction descriptor of " + what);
    red.set(AFZ_CUDNN_ATTR(CUDNN_ATTR_REDUCTION_OPERATOR), CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &op.reduce);
    red.set_data_type(AFZ_CUDNN_ATTR(CUDNN_ATTR_REDUCTION_COMP_TYPE), op.compute);
    red.finalize();

    BackendDescriptor d(api_, CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, "operation " + what);
    d.set_descriptor(AFZ_CUDNN_ATTR(CUDNN_ATTR_OPERATION_REDUCTION_XDESC), t(op.x));
    d.set_descriptor(AFZ_CUDNN_ATTR(CUDNN_ATTR_OPERATION_REDUCTION_YDESC), t(op.y));
    d.set_descriptor(AFZ_CUDNN_ATTR(CUDNN_ATTR_OPERATION_REDUCTION_DESC), red);
    d.finalize();
    out_.op_configs.push_back(std::move(red));
    out_.operations.push_back(std::move(d));
  }

  // A reshape has no config descriptor: its X and Y dims/strides say it all.
  void reshape(const GraphOp& op) {
    BackendDescriptor d(api_, CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR, "operation '" + op.name + "' (RESHAPE)");
    d.set_descriptor(AFZ_CUDNN_ATTR(CUDNN_ATTR_OPERATION_RESHAPE_XDESC), t(op.x));
    d.set_descriptor(AFZ_CUDNN_ATTR(CUDNN_ATTR_OPERATION_RESHAPE_YDESC), t(op.y));
    d.finalize();
    out_.operations.push_back(std::move(d));
  }

  const CudnnApi& api_;
  const SdpaGraph& g_;
  LoweredGraph out_;
};

}  // namespace

const char* pointwise_mode_name(cudnnPointwiseMode_t mode) {
  switch (mode) {
    case CUDNN_POINTWISE_ADD: return "CUDNN_POINTWISE_ADD";
    case CUDNN_POINTWISE_SUB: return "CUDNN_POINTWISE_SUB";
    case CUDNN_POINTWISE_MUL: return "CUDNN_POINTWISE_MUL";
    case CUDNN_POINTWISE_DIV: return "CUDNN_POINTWISE_DIV";
    case CUDNN_POINTWISE_EXP: return "CUDNN_POINTWISE_EXP";
    case CUDNN_POINTWISE_LOG: return "CUDNN_POINTWISE_LOG";
    case CUDNN_POINTWISE_CMP_NEQ: return "CUDNN_POINTWISE_CMP_NEQ";
    case CUDNN_POINTWISE_CMP_GT: return "CUDNN_POINTWISE_CMP_GT";
    case CUDNN_POINTWISE_CMP_GE: return "CUDNN_POINTWISE_CMP_GE";
    case CUDNN_POINTWISE_CMP_LT: return "CUDNN_POINTWISE_CMP_LT";
    case CUDNN_POINTWISE_LOGICAL_AND: return "CUDNN_POINTWISE_LOGICAL_AND";
    case CUDNN_POINTWISE_GEN_INDEX: return "CUDNN_POINTWISE_GEN_INDEX";
    case CUDNN_POINTWISE_BINARY_SELECT: return "CUDNN_POINTWISE_BINARY_SELECT";
    case CUDNN_POINTWISE_IDENTITY: return "CUDNN_POINTWISE_IDENTITY";
    default: return "cudnnPointwiseMode_t";
  }
}

const BackendDescriptor& LoweredGraph::tensor(int64_t uid) const {
  for (size_t i = 0; i < uids.size(); ++i)
    if (uids[i] == uid) return tensors[i];
  throw std::logic_error("sdpa graph: an operation names tensor uid " + std::to_string(uid) +
                         ", which the graph lacks");
}

LoweredGraph lower_sdpa_graph(const CudnnApi& api, const SdpaGraph& g) { return Lowering(api, g).run(); }

BackendDescriptor make_operation_graph(const CudnnApi& api, const LoweredGraph& lowered, cudnnHandle_t handle) {
  BackendDescriptor graph(api, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR,
                          "operation graph (" + std::to_string(lowered.operations.size()) + " operations)");
  std::vector<cudnnBackendDescriptor_t> ops;
  for (const BackendDescriptor& op : lowered.operations) ops.push_back(op.get());
  graph.set_descriptors(AFZ_CUDNN_ATTR(CUDNN_ATTR_OPERATIONGRAPH_OPS), ops);
  if (handle) graph.set(AFZ_CUDNN_ATTR(CUDNN_ATTR_OPERATIONGRAPH_HANDLE), CUDNN_TYPE_HANDLE, 1, &handle);
  graph.finalize();
  return graph;
}

BackendDescriptor make_variant_pack(const CudnnApi& api, const std::vector<int64_t>& uids,
                                    const std::vector<void*>& pointers, void* workspace) {
  BackendDescriptor pack(api, CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR,
                         "variant pack (" + std::to_string(uids.size()) + " tensors)");
  pack.set_int64s(AFZ_CUDNN_ATTR(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS), uids);
  pack.set(AFZ_CUDNN_ATTR(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS), CUDNN_TYPE_VOID_PTR, int64_t(pointers.size()),
           pointers.data());
  pack.set(AFZ_CUDNN_ATTR(CUDNN_ATTR_VARIANT_PACK_WORKSPACE), CUDNN_TYPE_VOID_PTR, 1, &workspace);
  pack.finalize();
  return pack;
}

}  // namespace afz::cudnn
