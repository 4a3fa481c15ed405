// ThreadSanitizer annotations for Debian's Abseil, which is not built with TSan: without them
// TSan cannot see absl::Mutex's synchronisation and reports a race on every variable it guards.
// The TSan tree (tools/tsan_check.sh) links with -Wl,--wrap=SYMBOL for each Mutex and CondVar
// entry point below (tools/tsan/wrapped_symbols.txt), so our calls reach these wrappers, which
// tell TSan what Abseil's own TSan build would: a lock acquires, an unlock releases, a wait
// releases and then acquires again. Abseil's internal calls (absl::Notification's own mutex)
// stay unseen: tests synchronise through absl::Mutex directly. Names are of Debian 12's Abseil
// (inline namespace debian3).
#include <sanitizer/tsan_interface.h>

#include <type_traits>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

using absl::Condition;
using absl::CondVar;
using absl::Duration;
using absl::Mutex;
using absl::Time;

namespace {

constexpr unsigned kRead = __tsan_mutex_read_lock;

// Runs `call`, which returns holding `mu`, as TSan's lock annotations expect.
template <typename Call>
auto Locking(Mutex* mu, unsigned flags, Call call) {
  __tsan_mutex_pre_lock(mu, flags);
  if constexpr (std::is_void_v<decltype(call())>) {
    call();
    __tsan_mutex_post_lock(mu, flags, 0);
  } else {
    auto result = call();
    __tsan_mutex_post_lock(mu, flags, 0);
    return result;
  }
}

// Runs `call`, which lets `mu` go.
template <typename Call>
void Unlocking(Mutex* mu, unsigned flags, Call call) {
  __tsan_mutex_pre_unlock(mu, flags);
  call();
  __tsan_mutex_post_unlock(mu, flags);
}

// Runs `call`, made holding `mu`, which lets it go while it waits and returns holding it again.
template <typename Call>
auto Waiting(Mutex* mu, unsigned flags, Call call) {
  Unlocking(mu, flags, [] {});
  return Locking(mu, flags, call);
}

// A try-lock that may fail: TSan is told which.
template <typename Call>
bool TryLocking(Mutex* mu, unsigned flags, Call call) {
  flags |= __tsan_mutex_try_lock;
  __tsan_mutex_pre_lock(mu, flags);
  const bool locked = call();
  __tsan_mutex_post_lock(mu, flags | (locked ? 0 : __tsan_mutex_try_lock_failed), 0);
  return locked;
}

}  // namespace

// __wrap_SYMBOL, which the linker calls in place of SYMBOL, and __real_SYMBOL, which it maps to
// Abseil's SYMBOL. `mu` names the mutex in each parameter list.
#define PAGODA_TSAN_WRAP(how, flags, ret, symbol, params, args)  \
  extern "C" ret __real_##symbol params;                         \
  extern "C" ret __wrap_##symbol params {                        \
    return how(mu, flags, [&] { return __real_##symbol args; }); \
  }

PAGODA_TSAN_WRAP(Locking, 0, void, _ZN4absl7debian35Mutex4LockEv, (Mutex * mu), (mu))
PAGODA_TSAN_WRAP(Locking, kRead, void, _ZN4absl7debian35Mutex10ReaderLockEv, (Mutex * mu), (mu))
PAGODA_TSAN_WRAP(Unlocking, 0, void, _ZN4absl7debian35Mutex6UnlockEv, (Mutex * mu), (mu))
PAGODA_TSAN_WRAP(Unlocking, kRead, void, _ZN4absl7debian35Mutex12ReaderUnlockEv, (Mutex * mu), (mu))
PAGODA_TSAN_WRAP(TryLocking, 0, bool, _ZN4absl7debian35Mutex7TryLockEv, (Mutex * mu), (mu))
PAGODA_TSAN_WRAP(TryLocking, kRead, bool, _ZN4absl7debian35Mutex13ReaderTryLockEv, (Mutex * mu),
                 (mu))
PAGODA_TSAN_WRAP(Locking, 0, void, _ZN4absl7debian35Mutex8LockWhenERKNS0_9ConditionE,
                 (Mutex * mu, const Condition& c), (mu, c))
PAGODA_TSAN_WRAP(Locking, 0, bool,
                 _ZN4absl7debian35Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE,
                 (Mutex * mu, const Condition& c, Duration d), (mu, c, d))
PAGODA_TSAN_WRAP(Locking, 0, bool,
                 _ZN4absl7debian35Mutex20LockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE,
                 (Mutex * mu, const Condition& c, Time t), (mu, c, t))
PAGODA_TSAN_WRAP(Waiting, 0, void, _ZN4absl7debian35Mutex5AwaitERKNS0_9ConditionE,
                 (Mutex * mu, const Condition& c), (mu, c))
PAGODA_TSAN_WRAP(Waiting, 0, bool,
                 _ZN4absl7debian35Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE,
                 (Mutex * mu, const Condition& c, Duration d), (mu, c, d))
PAGODA_TSAN_WRAP(Waiting, 0, bool,
                 _ZN4absl7debian35Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE,
                 (Mutex * mu, const Condition& c, Time t), (mu, c, t))
PAGODA_TSAN_WRAP(Waiting, 0, void, _ZN4absl7debian37CondVar4WaitEPNS0_5MutexE,
                 (CondVar * cv, Mutex* mu), (cv, mu))
PAGODA_TSAN_WRAP(Waiting, 0, bool,
                 _ZN4absl7debian37CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE,
                 (CondVar * cv, Mutex* mu, Duration d), (cv, mu, d))
PAGODA_TSAN_WRAP(Waiting, 0, bool,
                 _ZN4absl7debian37CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE,
                 (CondVar * cv, Mutex* mu, Time t), (cv, mu, t))
