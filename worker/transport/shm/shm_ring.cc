#include "worker/transport/shm/shm_ring.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"

namespace shardmap {
namespace {

constexpr uint64_t kMagic = 0x73686d72696e6731;  // "shmring1"
constexpr size_t kHeaderBytes = 4096;
// Where the lent-buffer slots start in the header page.
constexpr size_t kLentAreaOffset = 1024;
static_assert(kLentAreaOffset + sizeof(ShmLentArea) <= kHeaderBytes);
constexpr off_t kWriterLockByte = 0;
constexpr off_t kReaderLockByte = 1;

static_assert(std::atomic<uint64_t>::is_always_lock_free);
static_assert(std::atomic<uint32_t>::is_always_lock_free);

uint64_t RandomU64() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

// Sets (or, with F_OFD_GETLK, tests) a write lock on one byte of `fd`.
struct flock ByteLock(off_t byte) {
  struct flock lock;
  std::memset(&lock, 0, sizeof(lock));
  lock.l_type = F_WRLCK;
  lock.l_whence = SEEK_SET;
  lock.l_start = byte;
  lock.l_len = 1;
  return lock;
}

absl::Status Errno(const std::string& what) {
  const int e = errno;
  return absl::UnavailableError(absl::StrCat(what, ": ", std::strerror(e)));
}

void FutexWait(std::atomic<uint32_t>* word, uint32_t expected,
               absl::Duration timeout) {
  struct timespec ts = absl::ToTimespec(timeout);
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected,
          &ts, nullptr, 0);
}

void FutexWakeAll(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX,
          nullptr, nullptr, 0);
}

}  // namespace

// The first page of the object. The two sides' counters live on separate
// cache lines.
struct ShmRing::Header {
  uint64_t magic;
  uint64_t nonce;
  uint64_t capacity;
  alignas(64) std::atomic<uint64_t> write_pos;
  std::atomic<uint32_t> data_seq;         // bumped after write_pos moves
  std::atomic<uint32_t> reader_sleeping;  // readers in futex_wait
  std::atomic<uint32_t> reader_active;
  alignas(64) std::atomic<uint64_t> read_pos;
  std::atomic<uint32_t> space_seq;        // bumped after read_pos moves
  std::atomic<uint32_t> writer_sleeping;  // writers in futex_wait
};

ShmRing::ShmRing(std::string name, int fd, void* base, size_t mapped,
                 size_t capacity, uint64_t nonce, bool writer)
    : name_(std::move(name)),
      fd_(fd),
      base_(base),
      mapped_(mapped),
      capacity_(capacity),
      nonce_(nonce),
      writer_(writer),
      header_(static_cast<Header*>(base)),
      data_(static_cast<uint8_t*>(base) + kHeaderBytes) {
  static_assert(sizeof(Header) <= kLentAreaOffset);
}

ShmRing::~ShmRing() {
  if (!writer_) SetReaderActive(false);
  munmap(base_, mapped_);
  close(fd_);  // drops our liveness lock
}

absl::StatusOr<std::unique_ptr<ShmRing>> ShmRing::Create(size_t capacity) {
  if (capacity < 4096 || capacity % 4096 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("shared-memory ring capacity ", capacity,
                     " must be a positive multiple of 4096 bytes"));
  }
  const uint64_t nonce = RandomU64();
  std::string name;
  int fd = -1;
  for (int attempt = 0; attempt < 8 && fd < 0; ++attempt) {
    name = absl::StrFormat("/shardmap-%d-%016x", getpid(), RandomU64());
    fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) return Errno(absl::StrCat("shm_open(", name, ")"));
  const size_t mapped = kHeaderBytes + capacity;
  struct flock lock = ByteLock(kWriterLockByte);
  // posix_fallocate, not ftruncate: the pages are reserved now, so a
  // full /dev/shm (64 MiB in a default container) fails here, and the
  // pair stays on gRPC, instead of raising SIGBUS in the middle of a
  // collective when a page is first touched.
  if (const int err = posix_fallocate(fd, 0, static_cast<off_t>(mapped));
      err != 0) {
    errno = err;
    absl::Status s = Errno(absl::StrCat("reserving ", mapped, " bytes for ",
                                        name, " in /dev/shm"));
    shm_unlink(name.c_str());
    close(fd);
    return s;
  }
  if (fcntl(fd, F_OFD_SETLK, &lock) != 0) {
    absl::Status s = Errno(absl::StrCat("locking ", name));
    shm_unlink(name.c_str());
    close(fd);
    return s;
  }
  // MAP_POPULATE: the ring's pages are mapped at once, so its memory is
  // all there from the first message (no page faults in collectives, and
  // an RSS that does not creep up as the ring is first written round).
  void* base = mmap(nullptr, mapped, PROT_READ | PROT_WRITE,
                    MAP_SHARED | MAP_POPULATE, fd, 0);
  if (base == MAP_FAILED) {
    absl::Status s = Errno(absl::StrCat("mmap(", name, ")"));
    shm_unlink(name.c_str());
    close(fd);
    return s;
  }
  // The object is zero-filled: every counter starts at 0.
  Header* header = static_cast<Header*>(base);
  header->nonce = nonce;
  header->capacity = capacity;
  std::atomic_thread_fence(std::memory_order_release);
  header->magic = kMagic;
  return std::unique_ptr<ShmRing>(
      new ShmRing(name, fd, base, mapped, capacity, nonce, /*writer=*/true));
}

absl::StatusOr<std::unique_ptr<ShmRing>> ShmRing::Attach(
    const std::string& name, uint64_t nonce, size_t capacity) {
  if (name.size() < 2 || name[0] != '/' ||
      name.find('/', 1) != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", name, "' is not a shared memory object name"));
  }
  const int fd = shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0);
  if (fd < 0) return Errno(absl::StrCat("shm_open(", name, ")"));
  const size_t mapped = kHeaderBytes + capacity;
  struct stat st;
  if (fstat(fd, &st) != 0) {
    absl::Status s = Errno(absl::StrCat("fstat(", name, ")"));
    close(fd);
    return s;
  }
  if (st.st_uid != geteuid() || (st.st_mode & 0777) != 0600 ||
      static_cast<size_t>(st.st_size) != mapped) {
    close(fd);
    return absl::PermissionDeniedError(
        absl::StrCat(name, " is not a 0600 object of ", mapped,
                     " bytes owned by uid ", geteuid()));
  }
  struct flock lock = ByteLock(kReaderLockByte);
  if (fcntl(fd, F_OFD_SETLK, &lock) != 0) {
    absl::Status s = Errno(absl::StrCat("locking ", name));
    close(fd);
    return s;
  }
  void* base = mmap(nullptr, mapped, PROT_READ | PROT_WRITE,
                    MAP_SHARED | MAP_POPULATE, fd, 0);
  if (base == MAP_FAILED) {
    absl::Status s = Errno(absl::StrCat("mmap(", name, ")"));
    close(fd);
    return s;
  }
  const Header* header = static_cast<const Header*>(base);
  if (header->magic != kMagic || header->nonce != nonce ||
      header->capacity != capacity) {
    munmap(base, mapped);
    close(fd);
    return absl::PermissionDeniedError(
        absl::StrCat(name, " does not carry the expected ring header"));
  }
  return std::unique_ptr<ShmRing>(
      new ShmRing(name, fd, base, mapped, capacity, nonce, /*writer=*/false));
}

ShmLentArea* ShmRing::lent_area() const {
  return reinterpret_cast<ShmLentArea*>(static_cast<uint8_t*>(base_) +
                                        kLentAreaOffset);
}

void ShmRing::Unlink() {
  if (unlinked_) return;
  unlinked_ = true;
  shm_unlink(name_.c_str());
}

bool ShmRing::PeerAlive() const {
  struct flock lock = ByteLock(writer_ ? kReaderLockByte : kWriterLockByte);
  if (fcntl(fd_, F_OFD_GETLK, &lock) != 0) return true;  // cannot tell
  return lock.l_type != F_UNLCK;
}

bool ShmRing::PeerAliveLately() const {
  const int64_t now = absl::GetCurrentTimeNanos();
  int64_t next = next_liveness_check_ns_.load(std::memory_order_relaxed);
  // One caller per period asks; the others take the last answer.
  if (now < next || !next_liveness_check_ns_.compare_exchange_strong(
                        next, now + absl::ToInt64Nanoseconds(kLivenessPeriod),
                        std::memory_order_relaxed)) {
    return peer_seen_alive_.load(std::memory_order_relaxed);
  }
  const bool alive = PeerAlive();
  peer_seen_alive_.store(alive, std::memory_order_relaxed);
  return alive;
}

size_t ShmRing::Readable() const {
  return static_cast<size_t>(header_->write_pos.load() -
                             header_->read_pos.load());
}

size_t ShmRing::Writable() const { return capacity_ - Readable(); }

size_t ShmRing::Write(const uint8_t* data, size_t n) {
  const uint64_t w = header_->write_pos.load(std::memory_order_relaxed);
  const uint64_t r = header_->read_pos.load(std::memory_order_acquire);
  n = std::min<size_t>(n, capacity_ - static_cast<size_t>(w - r));
  if (n == 0) return 0;
  const size_t at = static_cast<size_t>(w % capacity_);
  const size_t first = std::min(n, capacity_ - at);
  std::memcpy(data_ + at, data, first);
  if (n > first) std::memcpy(data_, data + first, n - first);
  header_->write_pos.store(w + n);  // seq_cst: see Wait
  header_->data_seq.fetch_add(1);
  if (header_->reader_sleeping.load() > 0) FutexWakeAll(&header_->data_seq);
  return n;
}

size_t ShmRing::Read(uint8_t* out, size_t n) {
  const uint64_t r = header_->read_pos.load(std::memory_order_relaxed);
  const uint64_t w = header_->write_pos.load(std::memory_order_acquire);
  n = std::min<size_t>(n, static_cast<size_t>(w - r));
  if (n == 0) return 0;
  if (out != nullptr) {
    const size_t at = static_cast<size_t>(r % capacity_);
    const size_t first = std::min(n, capacity_ - at);
    std::memcpy(out, data_ + at, first);
    if (n > first) std::memcpy(out + first, data_, n - first);
  }
  header_->read_pos.store(r + n);
  header_->space_seq.fetch_add(1);
  if (header_->writer_sleeping.load() > 0) FutexWakeAll(&header_->space_seq);
  return n;
}

// The sleeper announces itself, then checks again before sleeping; the
// other side moves its position, bumps the sequence word, then looks for
// sleepers (all sequentially consistent). Either the sleeper's second
// check sees the move, or the waker sees the sleeper; and a wake that
// comes between the check and futex_wait changes the word futex_wait
// compares, so it returns at once.
absl::Status ShmRing::Wait(absl::Time deadline,
                           const std::function<absl::Status()>& aborted,
                           const std::function<absl::Status()>& idle) {
  std::atomic<uint32_t>& seq = writer_ ? header_->space_seq : header_->data_seq;
  std::atomic<uint32_t>& sleeping =
      writer_ ? header_->writer_sleeping : header_->reader_sleeping;
  auto ready = [this] { return writer_ ? Writable() > 0 : Readable() > 0; };
  // A small message's answer usually comes within microseconds: poll for
  // it a little, yielding the core (the peer may need it to answer), before
  // paying a futex sleep and wake-up.
  const absl::Time spin_until = absl::Now() + kSpin;
  while (!ready() && absl::Now() < spin_until) sched_yield();
  for (;;) {
    const uint32_t seen = seq.load();
    if (ready()) return absl::OkStatus();
    if (!PeerAlive()) {
      if (ready()) return absl::OkStatus();
      return absl::UnavailableError(
          writer_ ? "the receiving process unmapped the channel (it exited)"
                  : "the sending process unmapped the channel (it exited)");
    }
    if (aborted) {
      if (absl::Status s = aborted(); !s.ok()) return s;
    }
    if (idle) {
      if (absl::Status s = idle(); !s.ok()) return s;
    }
    const absl::Time now = absl::Now();
    if (now >= deadline) {
      return absl::DeadlineExceededError(
          writer_ ? "no room in the shared-memory channel"
                  : "nothing arrived on the shared-memory channel");
    }
    sleeping.fetch_add(1);
    if (!ready()) FutexWait(&seq, seen, std::min(kWaitSlice, deadline - now));
    sleeping.fetch_sub(1);
  }
}

void ShmRing::SetReaderActive(bool active) {
  header_->reader_active.store(active ? 1 : 0);
  // A writer waiting for the reader to come may now wait for room instead.
  header_->space_seq.fetch_add(1);
  if (header_->writer_sleeping.load() > 0) FutexWakeAll(&header_->space_seq);
}

bool ShmRing::ReaderActive() const {
  return header_->reader_active.load() != 0;
}

}  // namespace shardmap
