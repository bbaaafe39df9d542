#include "server/coordinator.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "ops/server_ops.h"
#include "ops/serving.h"
#include "program/program_cache.h"
#include "rpc/channel_cache.h"
#include "rpc/drain_gate.h"
#include "server/array_service.h"
#include "server/call_registry.h"
#include "server/coordinator_health.h"
#include "server/coordinator_metrics.h"
#include "server/coordinator_service.h"
#include "server/deadline_watchdog.h"
#include "server/function_catalog.h"
#include "server/grpc_worker_connector.h"
#include "server/job_runner.h"
#include "server/job_service.h"
#include "server/name_locks.h"
#include "server/plan_service.h"
#include "server/program_store.h"
#include "server/resident_index.h"
#include "server/worker_calls.h"
#include "server/worker_pool.h"

namespace shardmap {
namespace {

WorkerPool::Options PoolOptions(const Coordinator::Options& options,
                                ChannelCache* channels) {
  WorkerPool::Options pool;
  pool.heartbeat_timeout = options.heartbeat_timeout;
  pool.heartbeat_interval = options.heartbeat_interval.value_or(
      std::min(absl::Milliseconds(500), options.heartbeat_timeout / 4));
  // A worker that left, or restarted at its address, is dialled afresh.
  pool.on_leave = [channels](const std::string& address) {
    channels->Evict(address);
  };
  return pool;
}

CallRegistry::Options CallOptions(const Coordinator::Options& options) {
  CallRegistry::Options calls;
  calls.keep = options.call_memory;
  calls.max_output_bytes = options.call_memory_bytes;
  return calls;
}

}  // namespace

// Who the workers are and how to reach them. Members are built in the
// order declared and destroyed in reverse.
struct Coordinator::Workers {
  explicit Workers(const Options& options)
      : pool(PoolOptions(options, &channels)),
        connector(&channels),
        calls(&channels) {}

  ChannelCache channels;  // one channel per worker, for both below
  WorkerPool pool;
  GrpcWorkerConnector connector;
  WorkerCalls calls;
};

// What runs jobs and keeps resident arrays.
struct Coordinator::Jobs {
  Jobs(const Options& options, Workers* workers)
      : index([pool = &workers->pool](const std::string& id) {
          return pool->CheckLive(id).ok();
        }),
        call_registry(CallOptions(options)),
        runner(RunnerOptions(options, &workers->pool, &gate),
               &workers->connector, &index) {}

  static JobRunner::Options RunnerOptions(const Options& options,
                                          WorkerPool* pool, DrainGate* gate) {
    JobRunner::Options runner;
    runner.check_live = [pool, gate](const WorkerPool::Worker& w) {
      if (gate->cancelled()) {
        return absl::UnavailableError(
            "the coordinator is shutting down and its --grace period ended "
            "before the job did");
      }
      return pool->CheckLive(w.id);
    };
    runner.collective_timeout = options.collective_timeout;
    runner.max_job_bytes = options.max_job_bytes;
    runner.job_links = options.job_links;
    return runner;
  }

  DrainGate gate{"the coordinator"};
  std::unique_ptr<ProgramStore> programs;  // set by Create
  std::unique_ptr<FunctionCatalog> catalog;
  program::ProgramCache program_cache;
  ResidentIndex index;
  NameLocks locks;
  DeadlineWatchdog watchdog;
  CallRegistry call_registry;
  JobRunner runner;
};

struct Coordinator::Observability {
  Observability(const Options& options, WorkerPool* pool)
      : metrics([pool](const std::string& function) {
          return pool->FindFunction(function).ok();
        }),
        health(HealthOptions(options, &metrics), pool) {}

  static CoordinatorHealth::Options HealthOptions(const Options& options,
                                                  CoordinatorMetrics* metrics) {
    CoordinatorHealth::Options health;
    health.expected_workers = options.expect_workers;
    health.init_timeout = options.init_timeout;
    health.on_poll = [metrics](int64_t live) { metrics->SetWorkersUp(live); };
    return health;
  }

  CoordinatorMetrics metrics;
  std::unique_ptr<MetricsEndpoint> metrics_endpoint;
  CoordinatorHealth health;
};

// The job and array logic, and the gRPC services that adapt to it.
struct Coordinator::Services {
  Services(const Options& options, Workers* workers, Jobs* jobs,
           Observability* observability)
      : job_service(JobOptions(options, jobs, observability), &workers->pool,
                    &jobs->runner, &jobs->index, &jobs->locks,
                    &jobs->call_registry),
        arrays(&jobs->index, &jobs->locks, &workers->pool, &workers->calls,
               &jobs->call_registry),
        planner(jobs->catalog.get(), &jobs->index, &jobs->program_cache),
        coordinator(
            ServiceOptions(options, jobs, &planner, &admission, &job_threads),
            &job_service, &arrays, &workers->pool, &jobs->watchdog),
        registry(&workers->pool, &jobs->index),
        admission(AdmissionOptions(options, observability)) {}

  static JobAdmission::Options AdmissionOptions(const Options& options,
                                                Observability* observability) {
    JobAdmission::Options admission;
    admission.max_running = options.max_concurrent_jobs;
    admission.max_queued = options.max_queued_jobs;
    if (observability->metrics_endpoint) {
      CoordinatorMetrics* metrics = &observability->metrics;
      admission.on_change = [metrics](int running, int waiting) {
        metrics->SetJobs(running, waiting);
      };
    }
    return admission;
  }

  static JobService::Options JobOptions(const Options& options, Jobs* state,
                                        Observability* observability) {
    JobService::Options jobs;
    jobs.catalog = state->catalog.get();
    jobs.programs = &state->program_cache;
    jobs.max_job_bytes = options.max_job_bytes;
    if (observability->metrics_endpoint) {
      CoordinatorMetrics* metrics = &observability->metrics;
      jobs.on_job_done = [metrics](const std::string& function,
                                   absl::StatusCode code,
                                   absl::Duration elapsed) {
        metrics->JobDone(function, code, elapsed);
      };
    }
    CoordinatorHealth* health = &observability->health;
    jobs.await_bring_up = [health](absl::Time deadline) {
      return health->AwaitBringUp(deadline);
    };
    return jobs;
  }

  static CoordinatorService::Options ServiceOptions(
      const Options& options, Jobs* jobs, PlanService* planner,
      JobAdmission* admission, DeviceThreads* job_threads) {
    CoordinatorService::Options service;
    service.catalog = jobs->catalog.get();
    service.planner = planner;
    service.max_job_time = options.max_job_time;
    service.expected_workers = options.expect_workers;
    service.gate = &jobs->gate;
    service.admission = admission;
    service.job_threads = job_threads;
    return service;
  }

  JobService job_service;
  ArrayService arrays;
  PlanService planner;
  CoordinatorService coordinator;
  RegistryService registry;
  // RunJob's turns, and the threads admitted jobs run on (a call waiting
  // for its turn holds none). Declared last: destroyed first, once every
  // job that runs on them has returned, before the services they use.
  JobAdmission admission;
  DeviceThreads job_threads;
};

Coordinator::Coordinator(const Options& options) : options_(options) {}

absl::StatusOr<std::unique_ptr<Coordinator>> Coordinator::Create(
    const Options& options) {
  std::unique_ptr<Coordinator> c(new Coordinator(options));
  c->workers_ = std::make_unique<Workers>(options);
  c->jobs_ = std::make_unique<Jobs>(options, c->workers_.get());
  auto programs = ProgramStore::Open(options.data_dir);
  if (!programs.ok()) return WithExitCode(programs.status(), kExitDataErr);
  c->jobs_->programs = *std::move(programs);
  c->jobs_->catalog = std::make_unique<FunctionCatalog>(
      &c->workers_->pool, c->jobs_->programs.get());
  c->observability_ =
      std::make_unique<Observability>(options, &c->workers_->pool);
  auto metrics_endpoint = StartMetricsIfAsked(
      options.metrics, c->observability_->metrics.registry(), options.insecure);
  if (!metrics_endpoint.ok()) return metrics_endpoint.status();
  c->observability_->metrics_endpoint = *std::move(metrics_endpoint);
  c->services_ = std::make_unique<Services>(
      options, c->workers_.get(), c->jobs_.get(), c->observability_.get());
  Serving::Options serving;
  serving.listen = options.listen;
  serving.credentials = options.credentials;
  serving.health_listen = options.health_listen;
  Services* services = c->services_.get();
  serving.register_services = [services](grpc::ServerBuilder& builder) {
    builder.RegisterService(&services->coordinator);
    builder.RegisterService(&services->registry);
  };
  auto started = Serving::Start(serving);
  if (!started.ok()) return started.status();
  c->serving_ = *std::move(started);
  c->observability_->health.Attach(c->serving_->health());
  return c;
}

Coordinator::~Coordinator() {
  // The server first: no call may reach a service being destroyed.
  serving_.reset();
  services_.reset();
  observability_.reset();  // health's poller, then the metrics endpoint
  jobs_.reset();
  workers_.reset();
}

const std::string& Coordinator::address() const { return serving_->address(); }

std::string Coordinator::health_address() const {
  return serving_->health_address();
}

std::string Coordinator::metrics_address() const {
  const auto& endpoint = observability_->metrics_endpoint;
  return endpoint ? endpoint->address() : std::string();
}

void Coordinator::Drain(int sig) {
  // NOT_SERVING, refuse new jobs, let those in flight finish until the
  // grace deadline, cancel the rest; workers keep heartbeating meanwhile.
  observability_->health.Shutdown();
  // No new call gets in; those waiting for a turn never started: they end
  // now, safe to send again.
  jobs_->gate.StartDrain();
  services_->admission.Close(absl::UnavailableError(
      absl::StrCat("the coordinator is shutting down (signal ", sig,
                   "); the job never started: retry it")));
  DrainAfterSignal(sig, jobs_->gate, options_.grace_seconds);
  serving_->Shutdown(absl::Now() + absl::Seconds(1));
}

}  // namespace shardmap
