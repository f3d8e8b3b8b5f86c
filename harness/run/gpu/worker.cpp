#include "harness/run/gpu/worker.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <algorithm>
#include <set>
#include <string>

#include "harness/run/gpu/device_session.h"
#include "harness/run/gpu/mirror.h"
#include "harness/run/gpu/problem_wire.h"
#include "harness/run/gpu/protocol.h"
#include "harness/run/gpu/wire.h"
#include "kernels/registry.h"

namespace afz::gpu {
namespace {

// Kernels by name, as the harness registered them: the built-ins, and
// plugins loaded on first use from the path the request names.
class KernelLookup {
 public:
  const afz_kernel* find(const std::string& name, const std::string& library, std::string* why) {
    if (!load(library, why)) return nullptr;
    const afz_kernel* k = registry_->find(name);
    if (!k) *why = "the worker knows no kernel '" + name + "'";
    return k;
  }
  const afz_backward_kernel* find_backward(const std::string& name, const std::string& library, std::string* why) {
    if (!load(library, why)) return nullptr;
    const afz_backward_kernel* k = registry_->find_backward(name);
    if (!k) *why = "the worker knows no backward kernel '" + name + "'";
    return k;
  }

 private:
  bool load(const std::string& library, std::string* why) {
    if (!registry_) registry_ = std::make_unique<KernelRegistry>(KernelRegistry::with_builtins());
    if (!library.empty() && !loaded_.count(library)) {
      if (!registry_->load_library(library, why)) return false;
      loaded_.insert(library);
    }
    return true;
  }
  std::unique_ptr<KernelRegistry> registry_;
  std::set<std::string> loaded_;
};

struct Worker {
  explicit Worker(bool f) : forked(f) {}
  bool forked;
  std::unique_ptr<DeviceSession> device;
  std::string no_device_why;
  HostMemory host_memory;
  Mirror host_mirror{host_memory};
  std::unique_ptr<Mirror> device_mirror;
  KernelLookup lookup;

  Reply handle(const std::vector<uint8_t>& frame) {
    Reply r;
    WireReader rd(frame.data(), frame.size());
    if (rd.get<uint32_t>() != kRequestMagic) throw WireError("not a request");
    const auto pass = RequestPass(rd.get<uint8_t>());
    const uint64_t address = rd.get<uint64_t>();
    WireProblem w;
    decode_problem(rd, &w);
    std::string why;
    // By name first (a kernel made after this worker was forked has no copy
    // here); a forked worker falls back to the harness's address for kernels
    // no registry knows, such as a test's own.
    if (pass == RequestPass::Backward) {
      if (w.extra.size() != kBackwardExtraCount) return error(r, "a backward request without its six tensors");
      const afz_backward_kernel* k = lookup.find_backward(w.kernel_name, w.kernel_library, &why);
      if (!k && forked && address) k = reinterpret_cast<const afz_backward_kernel*>(address);
      if (!k) return error(r, why);
      return invoke(r, w, (k->caps.flags & AFZ_CAP_GPU) != 0, [&](afz_problem& p, const Mirror& mirror, char* msg,
                                                                   size_t len) {
        afz_backward_problem bp{};
        bp.fwd = &p;
        auto tensor = [&](int x) {
          afz_tensor t{};
          t.data = mirror.extra_data(size_t(x));
          t.dtype = w.extra[size_t(x)].ref.dtype;
          std::copy(w.extra[size_t(x)].ref.stride, w.extra[size_t(x)].ref.stride + 4, t.stride);
          return t;
        };
        bp.dout = tensor(kDout);
        bp.out = tensor(kOut);
        // The LSE travels as [1][b][h][i]: its strides are the last three.
        bp.lse = reinterpret_cast<const float*>(mirror.extra_data(kLseIn));
        std::copy(w.extra[kLseIn].ref.stride + 1, w.extra[kLseIn].ref.stride + 4, bp.lse_stride);
        bp.dq = tensor(kDq);
        bp.dk = tensor(kDk);
        bp.dv = tensor(kDv);
        return k->run(k, &bp, msg, len);
      });
    }
    const afz_kernel* k = lookup.find(w.kernel_name, w.kernel_library, &why);
    if (!k && forked && address) k = reinterpret_cast<const afz_kernel*>(address);
    if (!k) return error(r, why);
    return invoke(r, w, (k->caps.flags & AFZ_CAP_GPU) != 0,
                  [&](afz_problem& p, const Mirror&, char* msg, size_t len) { return k->run(k, &p, msg, len); });
  }

  // Uploads the problem, runs `call` on the mirror's copy, times it, and
  // brings the outputs (extra outputs too) back with the out-of-bounds check.
  template <class Call>
  Reply invoke(Reply& r, WireProblem& w, bool on_gpu, Call call) {
    if (on_gpu && !device) return error(r, no_device_why);
    Mirror& mirror = on_gpu ? *device_mirror : host_mirror;
    afz_problem p{};
    if (std::string e = mirror.upload(w, &p); !e.empty()) return crash(r, e);
    p.stream = on_gpu ? device->stream() : nullptr;
    char msg[512] = {0};
    const auto t0 = std::chrono::steady_clock::now();
    if (on_gpu) device->start_timer();
    const int rc = call(p, mirror, msg, sizeof msg);
    msg[sizeof msg - 1] = 0;
    if (on_gpu) {
      if (std::string e = device->finish(&r.seconds); !e.empty()) return crash(r, e);
    } else {
      r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    if (rc == AFZ_RUN_UNSUPPORTED) {
      r.status = ReplyStatus::Unsupported;
      r.message = msg[0] ? std::string(msg) : "the library refused the problem (no reason given)";
      return r;
    }
    if (rc == AFZ_RUN_HANG) {  // a plugin's own watchdog gave up; this worker is still sound
      r.status = ReplyStatus::Hang;
      r.message = msg[0] ? std::string(msg) : "the kernel's own watchdog gave up (no reason given)";
      return r;
    }
    if (rc != 0) {
      r.status = ReplyStatus::Error;
      r.message = "kernel returned " + std::to_string(rc) + ": " + (msg[0] ? std::string(msg) : "(no message)");
      return r;
    }
    if (std::string e = mirror.download_and_check(w, &r.oob); !e.empty()) return crash(r, e);
    r.o = std::move(w.bytes[kO]);
    r.lse = std::move(w.bytes[kLse]);
    for (WireExtra& x : w.extra)
      if (x.output) r.extra.push_back(std::move(x.bytes));
    return r;
  }

  static Reply& error(Reply& r, const std::string& why) {
    r.status = ReplyStatus::Error;
    r.message = why;
    return r;
  }
  // A CUDA error leaves the context unusable: reply, then exit.
  static Reply& crash(Reply& r, const std::string& why) {
    r.status = ReplyStatus::Crash;
    r.message = why;
    r.fatal = true;
    return r;
  }
};

}  // namespace

int serve(int fd, bool forked) {
  // Kernels may print (device printf lands on stdout): keep stdout off the protocol socket.
  dup2(STDERR_FILENO, STDOUT_FILENO);
  Worker wk(forked);
  std::string device_name;
  wk.device = DeviceSession::open(&wk.no_device_why, &device_name);
  if (wk.device) wk.device_mirror = std::make_unique<Mirror>(wk.device->memory());
  {
    WireWriter hello;
    hello.put(kHelloMagic);
    hello.put<uint8_t>(wk.device != nullptr);
    hello.str(wk.device ? device_name : wk.no_device_why);
    if (!send_frame(fd, hello.data())) return 1;
  }
  std::vector<uint8_t> frame;
  while (recv_frame(fd, &frame)) {
    Reply r;
    try {
      r = wk.handle(frame);
    } catch (const std::exception& e) {
      r.status = ReplyStatus::Crash;
      r.message = std::string("worker: ") + e.what();
      r.fatal = true;
    }
    if (!send_frame(fd, encode_reply(r))) return 1;
    if (r.fatal) return 3;
  }
  return 0;  // the harness closed the socket
}

int worker_main(int argc, char** argv) {
  // argv: worker --fd N
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--fd") == 0) return serve(std::atoi(argv[i + 1]), false);
  std::fprintf(stderr, "attnfuzz worker: internal subcommand; usage: attnfuzz worker --fd N\n");
  return 2;
}

}  // namespace afz::gpu
