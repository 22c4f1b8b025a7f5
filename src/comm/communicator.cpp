#include "comm/communicator.hpp"

#include <chrono>
#include <cstring>
#include <thread>

#include "core/error.hpp"
#include "core/timer.hpp"

namespace asteria {

Request::Request(std::unique_ptr<Impl> impl, std::string label) : impl_(std::move(impl)), label_(std::move(label)) {}
Request::Request(Request&&) noexcept = default;
Request& Request::operator=(Request&&) noexcept = default;
Request::~Request() = default;

void Communicator::wait(Request& r) {
  if (r.empty()) return;
  Timer t;
  // Spin briefly (collectives of small layers finish in microseconds), then poll with sleeps so
  // a waiting comm lane does not take a core from the compute lane.
  for (int spins = 0; !r.impl_->test(); ++spins) {
    if (t.seconds() > timeout_s_)
      throw CommError(detail::concat("rank ", rank(), ": ", r.label(), " did not complete within distributed.timeout_s = ",
                                     timeout_s_, " s: ", members_.empty() ? "a rank" : "a rank of " + members_,
                                     " died, stalled or lost its link"));
    if (spins > 1000) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  r.impl_.reset();
}

namespace {

// One rank: a collective is its own result.
class LocalCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string kind() const override { return "local"; }
  Request all_gather(const float* send, size_t count, float* recv, std::string) override {
    if (send != recv) std::memmove(recv, send, count * sizeof(float));
    return {};
  }
  Request reduce_scatter(const float* send, float* recv, size_t count, std::string) override {
    if (send != recv) std::memmove(recv, send, count * sizeof(float));
    return {};
  }
  Request all_gatherv(float*, const std::vector<int>&, const std::vector<int>&, std::string) override { return {}; }
  Request reduce_scatterv(const float* send, float* recv, const std::vector<int>& counts, std::string) override {
    if (send != recv) std::memmove(recv, send, static_cast<size_t>(counts.at(0)) * sizeof(float));
    return {};
  }
  Request all_reduce(double*, size_t, std::string) override { return {}; }
  Request all_reduce(float*, size_t, std::string) override { return {}; }
  Request broadcast(void*, size_t, int root, std::string label) override {
    ASTERIA_CHECK(root == 0, label, ": broadcast from rank ", root, " of 1");
    return {};
  }
  Request send(const void*, size_t, int dest, int, std::string label) override {
    fail(label, ": send to rank ", dest, " in a world of one rank");
  }
  Request recv(void*, size_t, int src, int, std::string label) override {
    fail(label, ": receive from rank ", src, " in a world of one rank");
  }
  void barrier(const std::string&) override {}
  std::unique_ptr<Communicator> split(int, int) override { return std::make_unique<LocalCommunicator>(); }
};

}  // namespace

std::unique_ptr<Communicator> make_local_communicator() { return std::make_unique<LocalCommunicator>(); }

}  // namespace asteria
