#!/usr/bin/env python3
"""Prints the source files whose translation unit can see a thread-safety annotation: the file,
or a project header it includes (transitively), names a lock, a guarded member or a lock
requirement. Only those can fail Clang's -Wthread-safety; the rest are skipped by
tools/thread_safety_check.sh. Usage: thread_safety_files.py FILE..., run at the source root."""
import os
import re
import sys

ANNOTATION = re.compile(
    r'ABSL_(PT_)?GUARDED_BY|ABSL_(EXCLUSIVE|SHARED)_LOCKS_REQUIRED|ABSL_LOCKS_EXCLUDED|'
    r'ABSL_(EXCLUSIVE_|SHARED_)?LOCK_FUNCTION|ABSL_UNLOCK_FUNCTION|ABSL_ASSERT_|ABSL_ACQUIRED_|'
    r'ABSL_(SCOPED_)?LOCKABLE|ABSL_NO_THREAD_SAFETY_ANALYSIS|absl::(Mutex|ReaderMutexLock|'
    r'WriterMutexLock|CondVar)')
INCLUDE = re.compile(r'^#include "([^"]+)"', re.M)
scanned = {}  # path -> (names an annotation, the project headers it includes)


def scan(path):
    if path not in scanned:
        with open(path, encoding='utf-8') as f:
            text = f.read()
        headers = [h for h in INCLUDE.findall(text) if os.path.isfile(h)]
        scanned[path] = (bool(ANNOTATION.search(text)), headers)
    return scanned[path]


def sees_annotation(source):
    todo, reached = [source], {source}
    while todo:
        found, headers = scan(todo.pop())
        if found:
            return True
        for header in headers:
            if header not in reached:
                reached.add(header)
                todo.append(header)
    return False


for source in sys.argv[1:]:
    if sees_annotation(source):
        print(source)
