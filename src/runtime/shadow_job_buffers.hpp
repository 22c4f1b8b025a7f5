#pragma once
// The buffers of the shadow pipeline's refresh jobs in flight (runtime.shadow.resident_jobs): a
// refresh job holds fp64 arrays (the factors and bases it starts from, the carries between its
// parts, its results: for OLMo-1B SOAP up to 192 MiB a block), so the pipeline does not keep one
// set per block. JobBuffers lends buffer sets (a RefreshJob's arrays) to the jobs while they are
// held, and takes them back when a job is done with:
//   - hold(job) before the job's arrays are read or written, let_go(job) after; a held job keeps
//     its buffers. A job keeps them between holds too, unless they are needed by another (below).
//   - A job that needs buffers gets a spare set (the one fitting it best), or a new one while
//     fewer than resident_jobs sets exist (0: no limit), or else the buffers of the waiting job
//     furthest from its publish step, whose image is parked first in the ShadowJobStore
//     (shadow_job_store.hpp; a finished job's results only) and read back at its next hold.
//     When every job with buffers is held, a new set is lent beyond the budget (counted:
//     over_budget) and freed, not kept, when it comes back.
//   - release(job): the job is done with; its buffers become a spare, its parked image is dropped.
// Parking moves bits only (the store reads an image back exactly), so the budget never changes
// the results, only the memory and the I/O.
//
// Which jobs may be parked is the pipeline's to say (a job waits when it is not being snapshotted
// nor computed): the lender knows the jobs that hold buffers, and asks the pipeline's WaitingTest
// about those not held, all at once, under its own lock. Lock order: the lender's lock, then
// whatever the test takes (the pipeline's mutex). The pipeline never calls into the lender while
// holding its mutex, so the two locks cannot deadlock.
//
// Thread-safe: hold, let_go and release are called from the compute lane, the staging lane, the
// comm lane and the workers at once; set_resident_jobs between steps.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "optim/preconditioner.hpp"
#include "optim/second_order.hpp"
#include "runtime/shadow_job_store.hpp"

namespace asteria {

class StepMetrics;

// A refresh job that borrows its buffers from a JobBuffers (the pipeline's slots derive from it).
// layer, block and publish_step are set by the borrower before its first hold and stay until its
// release; the rest is the lender's, under the lender's lock.
class JobLoan {
 public:
  int layer = 0, block = 0;
  int64_t publish_step = 0;
  RefreshJob job;   // its arrays hold lent buffers from hold() until they are taken back

 private:
  friend class JobBuffers;
  bool has_buffers_ = false;   // job's arrays hold buffers (lent while it is held or waits in memory)
  ParkedImage parked_;         // where its image is while parked
  int pins_ = 0;               // how many hold it now
  size_t lent_at_ = 0;         // its index in JobBuffers::lent_ while has_buffers_
};

class JobBuffers {
 public:
  // The pipeline's word on a job that holds buffers and is not held (filled by the WaitingTest).
  struct Candidate {
    JobLoan* loan = nullptr;
    bool waiting = false;    // may be parked: it waits (for its next part, its publish, a sync)
    bool finished = false;   // its result is computed (parked without its inputs)
    uint64_t order = 0;      // ties between equal (publish_step, layer, block): the lowest first
  };
  // Fills waiting / finished / order of every candidate; called with the lender's lock held.
  using WaitingTest = std::function<void(std::vector<Candidate>&)>;

  // opt: the blocks' names and shapes (for the store's messages and the choice of a spare).
  JobBuffers(const SecondOrderOptimizer& opt, WaitingTest waiting);
  JobBuffers(const JobBuffers&) = delete;
  JobBuffers& operator=(const JobBuffers&) = delete;

  // At most `jobs` buffer sets in memory (0: as many as are in flight); the jobs beyond it parked
  // in `file` (created when the first is parked). Lowered between steps (a run's re-placement),
  // the sets beyond it are freed now: the spares first, then the waiting jobs', parked. The least
  // that never parks a job in use is the compute threads (or workers) + 2 (a snapshot, a publish);
  // fewer still works, holding more jobs for a moment (over_budget).
  void set_resident_jobs(int jobs, const std::string& file);
  int resident_jobs() const { return resident_jobs_; }

  // The job's arrays in memory while its holder uses it: buffers lent (a spare, new ones within
  // resident_jobs, or a waiting job's, which is parked), its image read back if parked.
  void hold(JobLoan& loan);
  void let_go(JobLoan& loan);
  // A job done with (not held): its buffers back to the spares (or freed, when lent beyond the
  // budget), its parked image dropped.
  void release(JobLoan& loan);

  // The store's figures (shadow_metrics.cpp): buffer sets in memory, bytes parked, the bytes
  // written and read and the seconds in the store's I/O since the last call, the sets lent beyond
  // the budget. Nothing without a store (resident_jobs never set).
  void record_metrics(StepMetrics& metrics);

 private:
  // Lock held: parks the waiting job with buffers furthest from its publish step and moves its
  // buffers into `into`; false when there is no store or every job with buffers is held.
  bool park_one(RefreshJob* into);
  // Lock held: the spare buffer set to lend a block of rows x cols; spares_ not empty.
  size_t best_fitting_spare(int64_t rows, int64_t cols) const;
  // Lock held: the loan's buffers join / leave lent_.
  void lent(JobLoan& loan);
  void taken_back(JobLoan& loan);

  const SecondOrderOptimizer& opt_;
  WaitingTest waiting_;
  std::mutex mu_;
  std::unique_ptr<ShadowJobStore> store_;
  int resident_jobs_ = 0;
  int buffer_sets_ = 0;                 // lent to jobs or spare
  std::vector<JobLoan*> lent_;          // the jobs whose arrays hold buffers (any order)
  std::vector<RefreshJob> spares_;
  std::vector<Candidate> candidates_;   // park_one's, kept for their capacity
  int64_t over_budget_ = 0;             // buffers lent beyond resident_jobs (every job held)
  uint64_t reported_written_ = 0, reported_read_ = 0;
  double park_s_ = 0;                   // time in the store's I/O since the last metrics
};

}  // namespace asteria
