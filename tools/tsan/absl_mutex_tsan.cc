// ThreadSanitizer annotations for Debian's Abseil, which is not built with TSan: without them
// TSan cannot see absl::Mutex's synchronisation and reports a race on every variable it guards.
// The TSan tree (tools/tsan_check.sh) links with -Wl,--wrap=SYMBOL for each Mutex and CondVar
// entry point below (tools/tsan/wrapped_symbols.txt), so our calls reach these wrappers, which
// tell TSan what Abseil's own TSan build would: a lock acquires, an unlock releases, a wait
// releases and then acquires again. Abseil's internal calls (absl::Notification's own mutex)
// stay unseen: tests synchronise through absl::Mutex directly. Names are of Debian 12's Abseil
// (inline namespace debian3).
#include <sanitizer/tsan_interface.h>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

using absl::Condition;
using absl::CondVar;
using absl::Duration;
using absl::Mutex;
using absl::Time;

namespace {

constexpr unsigned kRead = __tsan_mutex_read_lock;

void Acquire(Mutex* mu, unsigned flags) {
  __tsan_mutex_pre_lock(mu, flags);
  __tsan_mutex_post_lock(mu, flags, 0);
}
void Release(Mutex* mu, unsigned flags) {
  __tsan_mutex_pre_unlock(mu, flags);
  __tsan_mutex_post_unlock(mu, flags);
}

}  // namespace

// LOCK(name, mangled, flags, args, call args): a call that returns holding the mutex.
#define PAGODA_TSAN_LOCK(ret, mangled, flags, params, args) \
  extern "C" ret __real_##mangled params;                   \
  extern "C" ret __wrap_##mangled params {                  \
    __tsan_mutex_pre_lock(mu, flags);                       \
    ret r = __real_##mangled args;                          \
    __tsan_mutex_post_lock(mu, flags, 0);                   \
    return r;                                               \
  }
// A call made holding the mutex that lets it go while it waits and returns holding it again.
#define PAGODA_TSAN_WAIT(ret, mangled, flags, params, args) \
  extern "C" ret __real_##mangled params;                   \
  extern "C" ret __wrap_##mangled params {                  \
    Release(mu, flags);                                     \
    ret r = __real_##mangled args;                          \
    Acquire(mu, flags);                                     \
    return r;                                               \
  }

extern "C" void __real__ZN4absl7debian35Mutex4LockEv(Mutex* mu);
extern "C" void __wrap__ZN4absl7debian35Mutex4LockEv(Mutex* mu) {
  __tsan_mutex_pre_lock(mu, 0);
  __real__ZN4absl7debian35Mutex4LockEv(mu);
  __tsan_mutex_post_lock(mu, 0, 0);
}
extern "C" void __real__ZN4absl7debian35Mutex10ReaderLockEv(Mutex* mu);
extern "C" void __wrap__ZN4absl7debian35Mutex10ReaderLockEv(Mutex* mu) {
  __tsan_mutex_pre_lock(mu, kRead);
  __real__ZN4absl7debian35Mutex10ReaderLockEv(mu);
  __tsan_mutex_post_lock(mu, kRead, 0);
}
extern "C" void __real__ZN4absl7debian35Mutex6UnlockEv(Mutex* mu);
extern "C" void __wrap__ZN4absl7debian35Mutex6UnlockEv(Mutex* mu) {
  __tsan_mutex_pre_unlock(mu, 0);
  __real__ZN4absl7debian35Mutex6UnlockEv(mu);
  __tsan_mutex_post_unlock(mu, 0);
}
extern "C" void __real__ZN4absl7debian35Mutex12ReaderUnlockEv(Mutex* mu);
extern "C" void __wrap__ZN4absl7debian35Mutex12ReaderUnlockEv(Mutex* mu) {
  __tsan_mutex_pre_unlock(mu, kRead);
  __real__ZN4absl7debian35Mutex12ReaderUnlockEv(mu);
  __tsan_mutex_post_unlock(mu, kRead);
}
extern "C" bool __real__ZN4absl7debian35Mutex7TryLockEv(Mutex* mu);
extern "C" bool __wrap__ZN4absl7debian35Mutex7TryLockEv(Mutex* mu) {
  __tsan_mutex_pre_lock(mu, __tsan_mutex_try_lock);
  const bool locked = __real__ZN4absl7debian35Mutex7TryLockEv(mu);
  __tsan_mutex_post_lock(mu, __tsan_mutex_try_lock | (locked ? 0 : __tsan_mutex_try_lock_failed),
                         0);
  return locked;
}
extern "C" bool __real__ZN4absl7debian35Mutex13ReaderTryLockEv(Mutex* mu);
extern "C" bool __wrap__ZN4absl7debian35Mutex13ReaderTryLockEv(Mutex* mu) {
  const unsigned flags = kRead | __tsan_mutex_try_lock;
  __tsan_mutex_pre_lock(mu, flags);
  const bool locked = __real__ZN4absl7debian35Mutex13ReaderTryLockEv(mu);
  __tsan_mutex_post_lock(mu, flags | (locked ? 0 : __tsan_mutex_try_lock_failed), 0);
  return locked;
}
extern "C" void __real__ZN4absl7debian35Mutex5AwaitERKNS0_9ConditionE(Mutex* mu,
                                                                      const Condition& c);
extern "C" void __wrap__ZN4absl7debian35Mutex5AwaitERKNS0_9ConditionE(Mutex* mu,
                                                                      const Condition& c) {
  Release(mu, 0);
  __real__ZN4absl7debian35Mutex5AwaitERKNS0_9ConditionE(mu, c);
  Acquire(mu, 0);
}
PAGODA_TSAN_WAIT(bool, _ZN4absl7debian35Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE, 0,
                 (Mutex * mu, const Condition& c, Duration d), (mu, c, d))
PAGODA_TSAN_WAIT(bool, _ZN4absl7debian35Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE, 0,
                 (Mutex * mu, const Condition& c, Time t), (mu, c, t))
extern "C" void __real__ZN4absl7debian35Mutex8LockWhenERKNS0_9ConditionE(Mutex* mu,
                                                                         const Condition& c);
extern "C" void __wrap__ZN4absl7debian35Mutex8LockWhenERKNS0_9ConditionE(Mutex* mu,
                                                                         const Condition& c) {
  __tsan_mutex_pre_lock(mu, 0);
  __real__ZN4absl7debian35Mutex8LockWhenERKNS0_9ConditionE(mu, c);
  __tsan_mutex_post_lock(mu, 0, 0);
}
PAGODA_TSAN_LOCK(bool, _ZN4absl7debian35Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE,
                 0, (Mutex * mu, const Condition& c, Duration d), (mu, c, d))
PAGODA_TSAN_LOCK(bool, _ZN4absl7debian35Mutex20LockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE, 0,
                 (Mutex * mu, const Condition& c, Time t), (mu, c, t))
extern "C" void __real__ZN4absl7debian37CondVar4WaitEPNS0_5MutexE(CondVar* cv, Mutex* mu);
extern "C" void __wrap__ZN4absl7debian37CondVar4WaitEPNS0_5MutexE(CondVar* cv, Mutex* mu) {
  Release(mu, 0);
  __real__ZN4absl7debian37CondVar4WaitEPNS0_5MutexE(cv, mu);
  Acquire(mu, 0);
}
PAGODA_TSAN_WAIT(bool, _ZN4absl7debian37CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE, 0,
                 (CondVar * cv, Mutex* mu, Duration d), (cv, mu, d))
PAGODA_TSAN_WAIT(bool, _ZN4absl7debian37CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE, 0,
                 (CondVar * cv, Mutex* mu, Time t), (cv, mu, t))
